"""Where streams live: their definitions and their progress.

- ``$AIRFLOW_STREAM_HOME/streams/<db>/<name>.sql``: the CREATE STREAM statement as written. The
  file's presence is the stream's existence; the DAG loader renders each file.
- ``$AIRFLOW_STREAM_HOME/state/<db>/<name>/``: ``stream.json`` (creation time, the trigger
  table's version then, progress), the detector's lock and the notification outbox; with a local
  warehouse also ``events/`` (the detector's event table) and ``checkpoint/`` (its Structured
  Streaming checkpoint). With the warehouse on an object store, those two are at
  ``<location>/.streams/<db>/<name>/`` (:func:`airflow_stream_provider.storage.streams_root`).

``stream.json`` is replaced atomically, so a killed run leaves the previous progress.

Every path is derived from a database and a stream name that obey the name rule
(:mod:`airflow_stream_provider.model.names`), checked on every call, and must resolve to a place
inside ``streams/`` or ``state/``: no read, write or removal happens anywhere else.
"""

from __future__ import annotations

import functools
import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from airflow_stream_provider import config, storage
from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import CorruptStateError, StreamError, did_you_mean, read_json_object
from airflow_stream_provider.files import held_lock, hold_lock, lock_held, make_dirs, try_lock, write_text
from airflow_stream_provider.model.names import DATABASE, STREAM, check_name, path_under
from airflow_stream_provider.plan.state import StreamState
from airflow_stream_provider.sql import parse
from airflow_stream_provider.storage import Location

#: the lock file in a stream's state folder that the process running its detector holds
DETECTOR_LOCK = "detector.lock"


class StreamNotFound(StreamError):
    pass


@dataclass(frozen=True)
class StoredStream:
    db: str
    name: str
    text: str
    statement: m.CreateStream
    state_dir: Path
    #: where the event table and the checkpoint are: ``state_dir``, or its place on the object store
    data_dir: Location

    @property
    def qualified(self) -> str:
        return f"{self.db}.{self.name}"

    @property
    def events_path(self) -> Location:
        return storage.join(self.data_dir, "events")

    @property
    def checkpoint(self) -> Location:
        return storage.join(self.data_dir, "checkpoint")

    @property
    def lock_path(self) -> Path:
        return self.state_dir / DETECTOR_LOCK

    @property
    def progress_path(self) -> Path:
        """The progress of the stream's latest long computation (``progress.json``)."""
        return self.state_dir / "progress.json"

    @property
    def detector_path(self) -> Path:
        """What the process hosting the live detector reports (``detector.json``)."""
        return self.state_dir / "detector.json"


@contextmanager
def detector_lock(stream: StoredStream) -> Iterator[bool]:
    """Hold the stream's detector lock while the body runs the detector; yields False (holding
    nothing) when another process holds it, such as the stream node hosting the live detector.
    One detector at a time writes a checkpoint; the lock goes with the process that held it."""
    make_dirs(stream.state_dir)
    with try_lock(stream.lock_path) as mine:
        yield mine


def take_detector_lock(stream: StoredStream) -> int | None:
    """The stream's detector lock, held until the returned descriptor is closed (None: another process
    holds it): the stream node's, for as long as it hosts the stream's detector."""
    make_dirs(stream.state_dir)
    return held_lock(stream.lock_path)


@contextmanager
def run_lock(stream: StoredStream) -> Iterator[None]:
    """Held by a run of the stream from reading its progress to queuing its notifications, waiting
    for any other run of it. Two runs at once (an Airflow task attempt left running after its
    supervisor died, beside the retry) would read the trigger table at different versions and write
    their results in either order, the older last; in turn, the later run reads what the earlier one
    left. The lock goes with the process that held it."""
    make_dirs(stream.state_dir)
    with hold_lock(stream.state_dir / "run.lock"):
        yield


def detector_hosted(state_dir: Path) -> bool:
    """True when a process holds the detector lock of the stream whose state is in ``state_dir``."""
    return lock_held(state_dir / DETECTOR_LOCK)


def _atomic_write(path: Path, text: str) -> None:
    """Replace ``path`` with ``text``, durably, creating its folder (a new stream's) when needed."""
    write_text(make_dirs(path.parent) / path.name, text, durable=True)


@functools.lru_cache(maxsize=1024)
def _definition(text: str) -> m.CreateStream:
    """A stream's CREATE STREAM, parsed once per process: the node looks at every stream's definition
    every few seconds, and a live stream's runs at it every second (statements are immutable)."""
    (stmt,) = parse(text)
    assert isinstance(stmt, m.CreateStream)
    return stmt


class StreamStore:
    def __init__(self, home: Path | None = None) -> None:
        root = Path(home) if home else config.home()
        self.definitions = root / "streams"
        self.states = root / "state"
        self.data = storage.streams_root(self.states)

    def definition(self, db: str, name: str) -> Path:
        """``streams/<db>/<name>.sql``; raises :class:`~airflow_stream_provider.model.names.InvalidName`
        for a name that breaks the rule or a path that leaves ``streams/``."""
        db, name = check_name(db, DATABASE), check_name(name, STREAM)
        return path_under(self.definitions, db, f"{name}.sql")

    def state_dir(self, db: str, name: str) -> Path:
        """``state/<db>/<name>/``, under the same checks as :meth:`definition`."""
        db, name = check_name(db, DATABASE), check_name(name, STREAM)
        return path_under(self.states, db, name)

    def data_dir(self, db: str, name: str) -> Location:
        """Where the stream's event table and checkpoint are: its :meth:`state_dir`, or
        ``<warehouse>/.streams/<db>/<name>`` on an object store."""
        if isinstance(self.data, Path):
            return self.state_dir(db, name)
        db, name = check_name(db, DATABASE), check_name(name, STREAM)
        return storage.join(self.data, db, name)

    def exists(self, db: str, name: str) -> bool:
        return self.definition(db, name).exists()

    def names(self, db: str | None = None) -> list[tuple[str, str]]:
        if db is not None:
            folders = [path_under(self.definitions, check_name(db, DATABASE))]
        else:
            folders = sorted(p for p in self.definitions.glob("*") if p.is_dir())
        return [(f.name, p.stem) for f in folders for p in sorted(f.glob("*.sql"))]

    def create(self, db: str, stmt: m.CreateStream, text: str, state: StreamState) -> None:
        """Record a new stream: its state first, then its definition (which makes it exist)."""
        name = stmt.name.name.lower()
        state_dir = self.state_dir(db, name)
        if state_dir.exists():  # left by a stream of the same name dropped earlier
            shutil.rmtree(state_dir)
        self._remove_data(db, name)
        self.save_state(db, name, state)
        body = text.strip().rstrip(";") + ";\n"
        _atomic_write(self.definition(db, name), body)

    def get(self, db: str, name: str) -> StoredStream:
        path = self.definition(db, name)
        if not path.exists():
            hint = did_you_mean(name, [n for _, n in self.names(db)])
            raise StreamNotFound(f"stream {db.lower()}.{name.lower()} does not exist" + (f" ({hint})" if hint else ""))
        text = path.read_text(encoding="utf-8")
        return StoredStream(db.lower(), name.lower(), text, _definition(text), self.state_dir(db, name),
                            self.data_dir(db, name))

    def drop(self, db: str, name: str) -> None:
        self.definition(db, name).unlink(missing_ok=True)
        shutil.rmtree(self.state_dir(db, name), ignore_errors=True)
        self._remove_data(db, name)

    def _remove_data(self, db: str, name: str) -> None:
        data = self.data_dir(db, name)
        if isinstance(data, str):  # a local one is inside the state folder
            storage.remove(data)

    def load_state(self, db: str, name: str) -> StreamState:
        """The stream's ``stream.json`` (an empty state before its first save); CorruptStateError
        naming the file when it cannot be read back."""
        return read_state(self.state_dir(db, name))

    def save_state(self, db: str, name: str, state: StreamState) -> None:
        _atomic_write(self.state_dir(db, name) / "stream.json", json.dumps(state.to_json(), indent=1,
                                                                            default=_isoformat))

    @contextmanager
    def updating(self, db: str, name: str) -> Iterator[StateUpdate]:
        """Read, change and save a stream's state under a lock, so concurrent updates (a task
        committing progress, STOP STREAM) do not lose each other's keys: the block replaces the
        update's :attr:`~StateUpdate.state`, which is saved when the block ends without an error."""
        state_dir = self.state_dir(db, name)
        make_dirs(state_dir)
        with hold_lock(state_dir / "stream.lock"):
            update = StateUpdate(self.load_state(db, name))
            yield update
            self.save_state(db, name, update.state)


@dataclass
class StateUpdate:
    """The state of a stream being updated under its lock (:meth:`StreamStore.updating`)."""

    state: StreamState


def read_state(state_dir: Path) -> StreamState:
    """The ``stream.json`` in ``state_dir`` (an empty state when there is none); CorruptStateError
    naming the file when it cannot be read back."""
    path = state_dir / "stream.json"
    try:
        payload = read_json_object(path)
    except FileNotFoundError:
        return StreamState()
    try:
        return StreamState.from_json(payload)
    except (TypeError, ValueError) as err:  # a value of the wrong kind: an instant that is not one, ...
        raise CorruptStateError(path, f"holds a value of the wrong kind ({err})") from None


def _isoformat(value: object) -> object:
    """A datetime of the state as ISO 8601 text; stream.json holds no other value JSON cannot write."""
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON")
