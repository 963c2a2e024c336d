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

The messages given to a receiver are kept besides, for VERIFY STREAM to compare the results a
notify-only stream sent with the batch's: ``sent.jsonl`` holds one line per message sent (its
sequence number, when it was sent, its events' keys and its text), the latest
``[notify] keep_sent_messages`` (default 10000) sent within ``[notify] keep_sent_days`` (default
7); ``outbox.json`` records the latest window start (or instant) among the events of the lines
dropped (``sent_forgotten``), before which VERIFY cannot judge what was sent.

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
from datetime import UTC, datetime, timedelta
from pathlib import Path

from airflow_stream_provider import config
from airflow_stream_provider.exceptions import CorruptStateError, read_json_object
from airflow_stream_provider.files import hold_lock, make_dirs, write_text
from airflow_stream_provider.notify.message import MAX_MESSAGE_BYTES, NotifyEvent, pack

log = logging.getLogger(__name__)

#: the keys every message file holds
MESSAGE_KEYS = ("seq", "messageId", "keys", "events", "text")
#: the sent messages kept for VERIFY: at most this many ...
KEEP_SENT_MESSAGES = 10_000
#: ... sent within this many days
KEEP_SENT_DAYS = 7.0


def keep_sent() -> tuple[int, timedelta]:
    """How many sent messages an outbox keeps, and for how long (``[notify] keep_sent_messages`` and
    ``keep_sent_days``, or ``AIRFLOW_STREAM_NOTIFY_KEEP_SENT_MESSAGES`` and ``..._DAYS``)."""
    section = config.settings().get("notify", {})
    count = os.environ.get("AIRFLOW_STREAM_NOTIFY_KEEP_SENT_MESSAGES") or section.get("keep_sent_messages")
    days = os.environ.get("AIRFLOW_STREAM_NOTIFY_KEEP_SENT_DAYS") or section.get("keep_sent_days")
    try:
        kept = (int(count) if count not in (None, "") else KEEP_SENT_MESSAGES,
                float(days) if days not in (None, "") else KEEP_SENT_DAYS)
    except (TypeError, ValueError):
        raise ValueError(f"[notify] keep_sent_messages = {count!r} and keep_sent_days = {days!r} must be numbers") \
            from None
    if kept[0] < 0 or kept[1] < 0:
        raise ValueError(f"[notify] keep_sent_messages = {count!r} and keep_sent_days = {days!r} must not be negative")
    return kept[0], timedelta(days=kept[1])


@dataclass(frozen=True)
class SentEvent:
    """One event of a message sent, as VERIFY reads it back."""

    seq: int  # the message's
    key: str  # the event's key (``<stream>/<key>``, ``#<row>`` for a trigger's later result rows)
    body: dict  # the event's JSON


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
                if delivered:
                    self._keep_sent(state, messages)
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

    # --- what was sent, for VERIFY ----------------------------------------------------------------

    def _keep_sent(self, state: dict, messages: Sequence[Queued]) -> None:
        """Add ``messages`` (sent) to ``sent.jsonl``, once each, then drop what is kept no longer
        (under the outbox lock)."""
        kept_through = state.get("sent_through", 0)
        fresh = [m for m in messages if m.seq > kept_through]
        if not fresh:
            return
        keys = {rec["seq"]: rec["keys"] for rec in self._messages()}
        now = datetime.now(UTC)
        path = self.directory / "sent.jsonl"
        with path.open("a", encoding="utf-8") as out:
            for m in fresh:
                out.write(json.dumps({"seq": m.seq, "sent_at": now.isoformat(), "keys": keys.get(m.seq, []),
                                      "text": m.text}) + "\n")
        state["sent_through"] = fresh[-1].seq
        state["sent_lines"] = state.get("sent_lines", 0) + len(fresh)
        count, days = keep_sent()
        oldest = state.setdefault("sent_oldest", now.isoformat())
        if state["sent_lines"] > count + max(1, count // 10) or datetime.fromisoformat(oldest) < now - days:
            self._trim_sent(state, count, now - days)

    def _trim_sent(self, state: dict, count: int, since: datetime) -> None:
        path = self.directory / "sent.jsonl"
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        keep = [rec for rec in lines if datetime.fromisoformat(rec["sent_at"]) >= since][-count:] if count else []
        kept = {rec["seq"] for rec in keep}
        forgotten = [e.body for rec in lines if rec["seq"] not in kept for e in _events(rec)]
        moments: list[int] = [m for m in (ev.get("windowStart", ev.get("eventTime")) for ev in forgotten)
                              if isinstance(m, int)]
        if moments:
            before = state.get("sent_forgotten")
            state["sent_forgotten"] = max(moments) if before is None else max(*moments, int(before))
        write_text(path, "".join(json.dumps(rec) + "\n" for rec in keep), durable=True)
        state["sent_lines"] = len(keep)
        state["sent_oldest"] = keep[0]["sent_at"] if keep else datetime.now(UTC).isoformat()

    def sent(self) -> tuple[list[SentEvent], int | None]:
        """The events of the messages kept as sent and of those still waiting (which will be sent),
        in order; and ``sent_forgotten``: the latest window start (in the stream's precision) or
        instant (ms) among the events no longer kept (None: none was dropped)."""
        if not self.directory.exists():
            return [], None
        with self._locked():
            path = self.directory / "sent.jsonl"
            lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
                     if line.strip()] if path.exists() else []
            seen = {rec["seq"] for rec in lines}
            lines += [rec for rec in self._messages() if rec["seq"] not in seen]
            forgotten = self._state().get("sent_forgotten")
        lines.sort(key=lambda rec: rec["seq"])
        return [e for rec in lines for e in _events(rec)], forgotten


def _events(record: dict) -> list[SentEvent]:
    """The events of a kept message (or a message file), with their keys."""
    body = json.loads(record["text"])
    events = [ev for stream in body.get("streams", []) for ev in stream.get("events", [])]
    keys = list(record.get("keys") or [])
    keys += [""] * (len(events) - len(keys))
    return [SentEvent(record["seq"], key, ev) for key, ev in zip(keys, events)]
