"""The registry of insert triggers: ``registry.json`` of the trigger folder (one :class:`Entry` per
trigger), and the fire counts kept beside it in ``stats.json``.

A trigger's definition lives in ``$AIRFLOW_STREAM_HOME/triggers`` (``registry.json``; the files of
``USING URI`` under ``install/<id>``; fire counts in ``stats.json``). Every process that writes
through the warehouse re-reads the registry when it changes, so only writes after a CREATE fire and
none after a DROP.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from airflow_stream_provider import config
from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import CorruptStateError, StreamError, read_json_object
from airflow_stream_provider.files import hold_lock, make_dirs, write_json


class TriggerError(StreamError):
    """A trigger statement that cannot be done, or a write refused by a BEFORE INSERT trigger."""


def folder() -> Path:
    """Where triggers are kept: ``$AIRFLOW_STREAM_TRIGGER_DIR``, default ``$AIRFLOW_STREAM_HOME/triggers``."""
    return Path(os.environ.get("AIRFLOW_STREAM_TRIGGER_DIR") or config.home() / "triggers").expanduser()


def progress_path(root: Path, trigger_id: str) -> Path:
    """The versions of the attached tables an AFTER INSERT trigger has fired on (kept by the stream
    node: :mod:`airflow_stream_provider.node.attached_triggers`)."""
    return root / "attached" / f"{trigger_id}.json"


@dataclass(frozen=True)
class Entry:
    """A registered trigger."""

    id: str
    name: str
    type: m.TriggerType
    event: m.TriggerEvent
    pattern: m.SeriesPath
    class_name: str
    uri: str | None
    install: str | None  # the folder under install/ holding the URI's files
    attributes: tuple[tuple[str, str], ...]
    strategy: m.FailureStrategy  # what its instance said at CREATE
    created: str
    #: the attached databases its pattern reached at CREATE: (IoTDB path, Delta table, the table's
    #: version then); it fires on the owner's commits after that version
    since: tuple[tuple[str, str, int], ...] = ()

    @property
    def stateful(self) -> bool:
        return self.type is m.TriggerType.STATEFUL

    def attributes_object(self) -> m.TriggerAttributes:
        return m.TriggerAttributes(dict(self.attributes))

    def to_json(self) -> dict:
        return {"id": self.id, "name": self.name, "type": self.type.value, "event": self.event.value,
                "pattern": list(self.pattern.nodes), "class": self.class_name, "uri": self.uri,
                "install": self.install, "attributes": [list(a) for a in self.attributes],
                "strategy": self.strategy.value, "created": self.created, "since": [list(s) for s in self.since]}

    @classmethod
    def from_json(cls, payload: dict) -> Entry:
        return cls(payload["id"], payload["name"], m.TriggerType(payload["type"]), m.TriggerEvent(payload["event"]),
                   m.SeriesPath(tuple(payload["pattern"])), payload["class"], payload.get("uri"),
                   payload.get("install"), tuple((k, v) for k, v in payload.get("attributes", [])),
                   m.FailureStrategy(payload.get("strategy", "OPTIMISTIC")), payload.get("created", ""),
                   tuple((str(p), str(t), int(v)) for p, t, v in payload.get("since", [])))


class TriggerRegistry:
    """``registry.json`` of a trigger folder, read again only when the file changes."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = root / "registry.json"
        self._seen: tuple[int, int, int] | None = None
        self._entries: list[Entry] = []

    def entries(self) -> list[Entry]:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            self._seen, self._entries = None, []
            return []
        seen = (stat.st_ino, stat.st_mtime_ns, stat.st_size)  # each save is a new file: a new inode
        if seen != self._seen:
            self._entries = self._read()
            self._seen = seen
        return self._entries

    def _read(self) -> list[Entry]:
        try:
            payload = read_json_object(self.path, ("triggers",))
        except FileNotFoundError:
            return []
        try:
            return [Entry.from_json(e) for e in payload["triggers"]]
        except (KeyError, ValueError, TypeError, AttributeError) as err:
            raise CorruptStateError(self.path, f"a trigger's entry is not one this version wrote ({err!r})") from None

    @contextlib.contextmanager
    def locked(self) -> Iterator[list[Entry]]:
        """The entries to change, under the folder's lock; saved when the body ends without an error."""
        make_dirs(self.root)
        with hold_lock(self.root / "registry.lock"):
            entries = self._read()
            yield entries
            write_json(self.path, {"triggers": [e.to_json() for e in entries]})

    # fire counts, kept beside the registry: {id: {"fired", "failed", "last_error", "last_error_at"}}

    def stats(self) -> dict[str, dict]:
        try:
            return read_json_object(self.root / "stats.json")
        except (FileNotFoundError, CorruptStateError):  # counts only: a damaged file starts them again
            return {}

    def add_counts(self, counts: dict[str, Counts]) -> None:
        if not counts:
            return
        with hold_lock(self.root / "stats.lock"):
            stats = self.stats()
            for trigger_id, c in counts.items():
                row = stats.setdefault(trigger_id, {"fired": 0, "failed": 0, "last_error": None, "last_error_at": None})
                row["fired"] += c.fired
                row["failed"] += c.failed
                if c.last_error is not None:
                    row["last_error"], row["last_error_at"] = c.last_error, c.last_error_at
            write_json(self.root / "stats.json", stats)


@dataclass
class Counts:
    """A trigger's fires and failures in one batch of writes, added to ``stats.json``."""

    fired: int = 0
    failed: int = 0
    last_error: str | None = None
    last_error_at: str | None = None
