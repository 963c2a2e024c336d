"""A stream's durable outbox: messages wait here, in order, until every receiver has them.

``<stream state>/outbox/`` holds one file per message (``<seq>.json``: its id, the keys of its
events, and the JSON text as first built) and ``outbox.json``: per receiver URL, the last message
sequence number it was given or that was dropped for it, and the counts of messages and events
sent and dropped.

A message is written before it is sent and stays until the stream's progress is committed, so a
run killed at any point sends the same messages, byte for byte, when it runs again, and a rerun
that rebuilds the same events adds nothing (events are matched by key). A message of window events
records the latest detector batch it holds and stays, once delivered, until the committed progress
has consumed that batch (``settled_batch`` in ``outbox.json``), and the events of a batch already
consumed are never queued again. So a run that commits less than another one already delivered
(an Airflow task attempt left running after its supervisor died, pushing its progress after the
retry's) and a run that queues after a later run committed (that same attempt) add nothing.

A message file that cannot be read back is moved to ``quarantine/``, logged, and reported as every
receiver's last error, so later runs proceed without it; an unreadable ``outbox.json`` stops
delivery with a :class:`~airflow_stream_provider.exceptions.CorruptStateError` naming it.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from airflow_stream_provider.exceptions import CorruptStateError, read_json_object
from airflow_stream_provider.files import hold_lock, make_dirs, write_text
from airflow_stream_provider.notify.message import MAX_MESSAGE_BYTES, NotifyEvent, pack

log = logging.getLogger(__name__)

#: the keys every message file holds
MESSAGE_KEYS = ("seq", "messageId", "keys", "events", "text")


@dataclass(frozen=True)
class Queued:
    seq: int
    message_id: str
    events: int
    text: str


class Outbox:
    def __init__(self, directory: Path, targets: Sequence[str]) -> None:
        self.directory = Path(directory)
        self.targets = tuple(targets)

    # --- locking and state ----------------------------------------------------------------------

    @contextmanager
    def _locked(self, name: str = "outbox.lock") -> Iterator[None]:
        make_dirs(self.directory)
        with hold_lock(self.directory / name):
            yield

    def delivering(self) -> AbstractContextManager[None]:
        """Held by the one process delivering this outbox; others wait their turn."""
        return self._locked("deliver.lock")

    def _state(self) -> dict:
        path = self.directory / "outbox.json"
        try:
            state = read_json_object(path)
        except FileNotFoundError:
            state = {}
        state.setdefault("next_seq", 1)
        targets = state.setdefault("targets", {})
        if not isinstance(targets, dict) or not isinstance(state["next_seq"], int):
            raise CorruptStateError(path, "its targets or next_seq are not what the outbox writes")
        for url in self.targets:
            targets.setdefault(url, {"through": 0, "sent_messages": 0, "sent_events": 0, "dropped_messages": 0,
                                     "dropped_events": 0, "last_error": None, "last_error_at": None})
        return state

    def _save(self, state: dict) -> None:
        write_text(self.directory / "outbox.json", json.dumps(state, indent=1), durable=True)

    def _files(self) -> list[Path]:
        return sorted(p for p in self.directory.glob("*.json") if p.stem.isdigit())

    def _messages(self) -> list[dict]:
        """Every readable message, in order; the unreadable ones go to ``quarantine/`` (under the
        outbox lock)."""
        out, bad = [], []
        for path in self._files():
            try:
                rec = read_json_object(path, MESSAGE_KEYS)
                if rec["seq"] != int(path.stem) or not isinstance(rec["text"], str) or \
                        not isinstance(rec["events"], int) or not isinstance(rec["keys"], list):
                    raise CorruptStateError(path, "its seq, text, events or keys are not what the outbox writes")
            except FileNotFoundError:
                continue
            except CorruptStateError as err:
                bad.append((path, err))
                continue
            out.append(rec)
        if bad:
            self._quarantine(bad)
        return out

    def _quarantine(self, bad: list[tuple[Path, CorruptStateError]]) -> None:
        folder = self.directory / "quarantine"
        make_dirs(folder)
        for path, err in bad:
            os.replace(path, folder / path.name)
            log.warning("unreadable outbox message moved to %s: %s", folder / path.name, err.problem)
        names = ", ".join(p.name for p, _ in bad)
        state = self._state()
        for url in self.targets:
            state["targets"][url]["last_error"] = \
                f"{len(bad)} unreadable message(s) ({names}) moved to {folder}, not delivered: {bad[-1][1].problem}"
            state["targets"][url]["last_error_at"] = datetime.now(UTC).isoformat()
        self._save(state)

    # --- the three verbs ------------------------------------------------------------------------

    def enqueue(self, events: Sequence[NotifyEvent], *, now_ms: int | None = None,
                max_bytes: int = MAX_MESSAGE_BYTES, unless: Callable[[], bool] | None = None) -> list[Queued]:
        """Add the events not already waiting and not of a batch the stream has consumed, packed into
        messages; returns the new messages. ``unless``: asked under the outbox's lock, which a commit
        of the stream's progress takes only after recording it; when true, nothing is added."""
        if not events:
            return []
        with self._locked():
            if unless is not None and unless():
                return []
            records = self._messages()
            waiting = {key for rec in records for key in rec["keys"]}
            state = self._state()
            settled = state.get("settled_batch")
            fresh = [ev for ev in events if f"{ev.stream}/{ev.key}" not in waiting
                     and (ev.batch is None or settled is None or ev.batch > settled)]
            if not fresh:
                return []
            batch_of = {f"{ev.stream}/{ev.key}": ev.batch for ev in fresh}
            files = self._files() + sorted((self.directory / "quarantine").glob("*.json"))
            seq = max([state["next_seq"], *(int(p.stem) + 1 for p in files if p.stem.isdigit())])
            stamp = now_ms if now_ms is not None else int(datetime.now(UTC).timestamp() * 1000)
            added = []
            for msg in pack(fresh, stamp, max_bytes):
                batches = [b for b in (batch_of[key] for key in msg.keys) if b is not None]
                record = {"seq": seq, "messageId": msg.message_id, "keys": list(msg.keys), "events": msg.events,
                          "text": msg.text, "batch": max(batches) if batches else None}
                write_text(self.directory / f"{seq:012d}.json", json.dumps(record), durable=True)
                added.append(Queued(seq, msg.message_id, msg.events, msg.text))
                seq += 1
            state["next_seq"] = seq
            self._save(state)
            return added

    def pending(self, url: str) -> list[Queued]:
        """Messages ``url`` has not been given yet, in order."""
        with self._locked():
            through = self._state()["targets"][url]["through"]
            return [Queued(rec["seq"], rec["messageId"], rec["events"], rec["text"])
                    for rec in self._messages() if rec["seq"] > through]

    def mark(self, url: str, messages: Sequence[Queued], *, delivered: bool, error: str | None = None) -> None:
        """Record ``messages`` (in order) as delivered to ``url``, or as dropped for it."""
        if not messages and error is None:
            return
        with self._locked():
            state = self._state()
            target = state["targets"][url]
            if messages:
                target["through"] = max(target["through"], messages[-1].seq)
                kind = "sent" if delivered else "dropped"
                target[f"{kind}_messages"] += len(messages)
                target[f"{kind}_events"] += sum(m.events for m in messages)
            if error is not None:
                target["last_error"] = error
                target["last_error_at"] = datetime.now(UTC).isoformat()
            self._save(state)

    def prune(self, consumed_batch: int | None = None) -> int:
        """Remove the messages every receiver has been given (called when progress is committed,
        with the stream's consumed detector batch): those of window events once that batch is
        consumed, so that their events, built again by a run that read older progress, are still
        found waiting."""
        with self._locked():
            state = self._state()
            settled = state.get("settled_batch")
            if consumed_batch is not None and (settled is None or consumed_batch > settled):
                settled = state["settled_batch"] = consumed_batch
                self._save(state)
            through = min((t["through"] for u, t in state["targets"].items() if u in self.targets), default=0)
            gone = 0
            for rec in self._messages():
                batch = rec.get("batch")
                if rec["seq"] <= through and (batch is None or (settled is not None and batch <= settled)):
                    (self.directory / f"{rec['seq']:012d}.json").unlink()
                    gone += 1
            return gone

    def stats(self) -> dict:
        """Counts for SHOW STREAMS: events sent, dropped and pending, and the last error."""
        if not self.directory.exists():
            return {"sent": 0, "dropped": 0, "pending": 0, "last_error": None}
        with self._locked():
            events = {rec["seq"]: rec["events"] for rec in self._messages()}  # first: it may quarantine
            state = self._state()
            pending = 0
            for url in self.targets:
                through = state["targets"][url]["through"]
                pending += sum(n for seq, n in events.items() if seq > through)
            targets = [state["targets"][u] for u in self.targets]
            errors = sorted((t for t in targets if t["last_error_at"]), key=lambda t: t["last_error_at"])
            return {"sent": sum(t["sent_events"] for t in targets),
                    "dropped": sum(t["dropped_events"] for t in targets), "pending": pending,
                    "last_error": errors[-1]["last_error"] if errors else None}
