"""Insert triggers (IoTDB's ``CREATE TRIGGER``): the registry, the user's class, and firing it.

A trigger is a user class (:class:`airflow_stream_provider.InsertTrigger`) that
listens to writes on a path pattern. Its definition lives in ``$AIRFLOW_STREAM_HOME/triggers``
(``registry.json``; the files of ``USING URI`` under ``install/<id>``; fire counts in
``stats.json``). Every process that writes through the warehouse fires the triggers whose pattern
matches, re-reading the registry when it changes, so only writes after a CREATE fire and none
after a DROP. A STATELESS trigger has an instance in each writing process (created at its first
matching write: ``validate`` then ``on_create``); a STATEFUL one has a single instance in the
stream node, which writers call over the node's trigger port (:mod:`airflow_stream_provider.node.stateful_triggers`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib
import json
import os
import queue
import shutil
import socket
import sys
import threading
import types
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from airflow_stream_provider import config
from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import CorruptStateError, StreamError, read_json_object
from airflow_stream_provider.files import lock_file, make_dirs, write_json
from airflow_stream_provider.spark import endpoint
from airflow_stream_provider.warehouse import listeners
from airflow_stream_provider.warehouse.listeners import Write

if TYPE_CHECKING:
    import pyarrow as pa

_MODULE_PREFIX = "_airflow_stream_trigger_"
_ARCHIVES = (".zip", ".whl")


class TriggerError(StreamError):
    """A trigger statement that cannot be done, or a write refused by a BEFORE INSERT trigger."""


def folder() -> Path:
    """Where triggers are kept: ``$AIRFLOW_STREAM_TRIGGER_DIR``, default ``$AIRFLOW_STREAM_HOME/triggers``."""
    return Path(os.environ.get("AIRFLOW_STREAM_TRIGGER_DIR") or config.home() / "triggers").expanduser()


def fire_timeout() -> float:
    """Seconds a ``fire`` may take before it counts as failed (``AIRFLOW_STREAM_TRIGGER_TIMEOUT``, default 30)."""
    raw = os.environ.get("AIRFLOW_STREAM_TRIGGER_TIMEOUT") or "30"
    try:
        value = float(raw)
    except ValueError:
        raise StreamError(f"AIRFLOW_STREAM_TRIGGER_TIMEOUT={raw!r} is not a number of seconds") from None
    if value <= 0:
        raise StreamError(f"AIRFLOW_STREAM_TRIGGER_TIMEOUT must be more than 0 seconds, not {raw}")
    return value


# --- the registry --------------------------------------------------------------------------------


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

    @property
    def stateful(self) -> bool:
        return self.type is m.TriggerType.STATEFUL

    def attributes_object(self) -> m.TriggerAttributes:
        return m.TriggerAttributes(dict(self.attributes))

    def to_json(self) -> dict:
        return {"id": self.id, "name": self.name, "type": self.type.value, "event": self.event.value,
                "pattern": list(self.pattern.nodes), "class": self.class_name, "uri": self.uri,
                "install": self.install, "attributes": [list(a) for a in self.attributes],
                "strategy": self.strategy.value, "created": self.created}

    @classmethod
    def from_json(cls, payload: dict) -> Entry:
        return cls(payload["id"], payload["name"], m.TriggerType(payload["type"]), m.TriggerEvent(payload["event"]),
                   m.SeriesPath(tuple(payload["pattern"])), payload["class"], payload.get("uri"),
                   payload.get("install"), tuple((k, v) for k, v in payload.get("attributes", [])),
                   m.FailureStrategy(payload.get("strategy", "OPTIMISTIC")), payload.get("created", ""))


class Registry:
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
        return [Entry.from_json(e) for e in payload["triggers"]]

    @contextlib.contextmanager
    def locked(self) -> Iterator[list[Entry]]:
        """The entries to change, under the folder's lock; saved when the body ends without an error."""
        make_dirs(self.root)
        fd = lock_file(self.root / "registry.lock")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            entries = self._read()
            yield entries
            write_json(self.path, {"triggers": [e.to_json() for e in entries]})
        finally:
            os.close(fd)

    # fire counts, kept beside the registry: {id: {"fired", "failed", "last_error", "last_error_at"}}

    def stats(self) -> dict[str, dict]:
        try:
            return read_json_object(self.root / "stats.json")
        except (FileNotFoundError, CorruptStateError):  # counts only: a damaged file starts them again
            return {}

    def add_counts(self, counts: dict[str, _Counts]) -> None:
        if not counts:
            return
        fd = lock_file(self.root / "stats.lock")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            stats = self.stats()
            for trigger_id, c in counts.items():
                row = stats.setdefault(trigger_id, {"fired": 0, "failed": 0, "last_error": None, "last_error_at": None})
                row["fired"] += c.fired
                row["failed"] += c.failed
                if c.last_error is not None:
                    row["last_error"], row["last_error_at"] = c.last_error, c.last_error_at
            write_json(self.root / "stats.json", stats)
        finally:
            os.close(fd)


@dataclass
class _Counts:
    fired: int = 0
    failed: int = 0
    last_error: str | None = None
    last_error_at: str | None = None


# --- the user's class ----------------------------------------------------------------------------


def install(uri: str, target: Path) -> None:
    """Copy what ``uri`` names into ``target``: a ``.py`` file, a package folder (with its
    ``__init__.py``), a folder of modules, a ``.zip`` or a ``.whl``; a local path, ``file://`` or
    ``http(s)://`` (fetched once, here)."""
    parsed = urllib.parse.urlparse(uri)
    target.mkdir(parents=True)
    if parsed.scheme in ("http", "https"):
        name = Path(urllib.parse.unquote(parsed.path)).name
        if not name.endswith((".py", *_ARCHIVES)):
            raise TriggerError(f"USING URI {uri!r}: an http(s) URI names a .py, .zip or .whl file")
        try:
            with urllib.request.urlopen(uri, timeout=60) as response:
                (target / name).write_bytes(response.read())
        except OSError as err:
            raise TriggerError(f"USING URI {uri!r} cannot be read: {err}") from None
        return
    if parsed.scheme not in ("", "file"):
        raise TriggerError(f"USING URI {uri!r}: the scheme {parsed.scheme}:// is not supported; use a file path, "
                           "file:// or http(s)://")
    path = Path(urllib.parse.unquote(parsed.path) if parsed.scheme == "file" else uri).expanduser()
    if not path.exists():
        raise TriggerError(f"USING URI {uri!r} cannot be read: {path} does not exist")
    try:
        if path.is_dir():
            if (path / "__init__.py").is_file():
                shutil.copytree(path, target / path.name, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copytree(path, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
        elif path.suffix == ".py" or path.suffix in _ARCHIVES:
            shutil.copy2(path, target / path.name)
        else:
            raise TriggerError(f"USING URI {uri!r}: name a .py file, a package folder, a .zip or a .whl")
    except OSError as err:
        raise TriggerError(f"USING URI {uri!r} cannot be read: {err}") from None


def load_class(entry: Entry, root: Path) -> type[m.InsertTrigger]:
    """Import the class ``entry`` names, and only it: from the Python path, or from its installed
    URI under a module name of its own (two triggers whose files define the same names do not meet)."""
    module_name, _, class_name = entry.class_name.rpartition(".")
    full = module_name
    if entry.install:
        base = root / "install" / entry.install
        alias = _MODULE_PREFIX + hashlib.sha1(entry.id.encode()).hexdigest()[:16]
        if alias not in sys.modules:
            package = types.ModuleType(alias)
            package.__path__ = [str(base), *(str(p) for p in sorted(base.iterdir()) if p.suffix in _ARCHIVES)]
            sys.modules[alias] = package
        full = f"{alias}.{module_name}"
    try:
        module = importlib.import_module(full)
    except Exception as err:  # the user's module may raise anything while it imports
        where = f"the files of {entry.uri}" if entry.uri else "the Python path"
        raise TriggerError(f"trigger {entry.name}: module {module_name} cannot be imported from {where} "
                           f"({type(err).__name__}: {err})") from None
    found = getattr(module, class_name, None)
    if found is None:
        raise TriggerError(f"trigger {entry.name}: module {module_name} has no class {class_name}")
    if not (isinstance(found, type) and issubclass(found, m.InsertTrigger)):
        raise TriggerError(f"trigger {entry.name}: {entry.class_name} is not a subclass of "
                           "airflow_stream_provider.InsertTrigger")
    return found


def _described(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}" if str(err) else type(err).__name__


class Instance:
    """A live trigger object. ``fire`` runs on a thread of its own, so that a ``fire`` that hangs
    can time out; calls to one instance never overlap."""

    def __init__(self, entry: Entry, trigger: m.InsertTrigger) -> None:
        self.entry = entry
        self.trigger = trigger
        self.hung = False
        self._requests: queue.SimpleQueue = queue.SimpleQueue()
        self._worker: threading.Thread | None = None

    @classmethod
    def create(cls, entry: Entry, root: Path, *, restoring: bool = False) -> Instance:
        """A new instance: ``validate``, then ``on_create``, then (a stateful trigger coming back)
        ``restore``; an error names the step that failed."""
        trigger_class = load_class(entry, root)
        attributes = entry.attributes_object()
        try:
            obj = trigger_class()
        except Exception as err:
            raise TriggerError(f"trigger {entry.name}: {entry.class_name}() failed ({_described(err)})") from None
        steps = [("validate", lambda: obj.validate(attributes)), ("on_create", lambda: obj.on_create(attributes))]
        if restoring:
            steps.append(("restore", obj.restore))
        for step, call in steps:
            try:
                call()
            except Exception as err:
                raise TriggerError(f"trigger {entry.name}: {step} failed ({_described(err)})") from None
        return cls(entry, obj)

    def strategy(self) -> m.FailureStrategy:
        try:
            return m.FailureStrategy(self.trigger.failure_strategy())
        except Exception:
            return self.entry.strategy

    def fire(self, tablet: m.Tablet, timeout: float) -> str | None:
        """Fire once; None when it succeeded, else why it failed."""
        if self._worker is None:
            self._worker = threading.Thread(target=self._serve, name=f"trigger-{self.entry.name}", daemon=True)
            self._worker.start()
        done = threading.Event()
        box: list = []
        self._requests.put((tablet, box, done))
        if not done.wait(timeout):
            self.hung = True
            return f"fire did not return within {timeout:g} s (AIRFLOW_STREAM_TRIGGER_TIMEOUT)"
        ok, value = box[0]
        if not ok:
            return value
        return "fire returned False" if value is False else None

    def _serve(self) -> None:
        while True:
            tablet, box, done = self._requests.get()
            try:
                box.append((True, self.trigger.fire(tablet)))
            except Exception as err:
                box.append((False, f"fire raised {_described(err)}"))
            done.set()

    def drop(self) -> str | None:
        try:
            self.trigger.on_drop()
        except Exception as err:
            return f"on_drop raised {_described(err)}"
        return None


# --- tablets and the stateful protocol -------------------------------------------------------------


def tablet_json(tablet: m.Tablet) -> dict:
    return {"device": tablet.device, "schemas": [[s.name, s.type.value] for s in tablet.schemas],
            "micros": list(tablet.micros), "values": [list(v) for v in tablet.values]}


def tablet_from_json(payload: dict) -> m.Tablet:
    micros = tuple(payload["micros"])
    return m.Tablet(payload["device"], tuple(m.Measurement(n, m.SeriesType(t)) for n, t in payload["schemas"]),
                    tuple(t // 1000 for t in micros), tuple(tuple(v) for v in payload["values"]), micros)


def _address_path() -> Path:
    return endpoint.folder() / "triggers.json"


class NodeDown(ConnectionError):
    """No stream node runs for this home."""


class NodeClient:
    """A writer's line to the stateful triggers the stream node holds: one JSON request per line,
    answered by one JSON line, the first carrying the node's token."""

    def __init__(self) -> None:
        self._sock: socket.socket | None = None
        self._reader: TextIO | None = None
        self._port: int | None = None
        self._lock = threading.Lock()  # one request at a time on the connection

    def call(self, request: dict, timeout: float) -> dict:
        """The node's answer; raises ``ConnectionError`` when the node cannot be reached."""
        with self._lock:
            return self._call(request, timeout)

    def _call(self, request: dict, timeout: float) -> dict:
        for attempt in (1, 2):  # a connection the node closed (a restart) is opened again once
            try:
                sock = self._connect()
                sock.settimeout(timeout)
                sock.sendall((json.dumps(request) + "\n").encode())
                assert self._reader is not None  # made with the socket
                line = self._reader.readline()
                if not line:
                    raise ConnectionError("the stream node closed the connection")
                return json.loads(line)
            except (TimeoutError, NodeDown):
                self.close()
                raise
            except (OSError, ConnectionError, json.JSONDecodeError) as err:
                self.close()
                if attempt == 2:
                    raise ConnectionError(f"the stream node's trigger port does not answer ({err})") from None
        raise AssertionError("unreachable")

    def _connect(self) -> socket.socket:
        try:
            port = json.loads(_address_path().read_text(encoding="utf-8"))["port"]
        except (FileNotFoundError, json.JSONDecodeError, KeyError):
            self.close()
            raise NodeDown("the stream node is not running (start it with `airflow-stream node start`)") from None
        if self._sock is not None and port == self._port:
            return self._sock
        self.close()
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        reader = sock.makefile("r", encoding="utf-8")
        self._sock, self._port, self._reader = sock, port, reader
        sock.sendall((json.dumps({"token": endpoint.token() or ""}) + "\n").encode())
        answer = json.loads(reader.readline() or "{}")
        if not answer.get("ok"):
            self.close()
            raise ConnectionError(answer.get("error") or "the stream node refused the connection")
        return sock

    def close(self) -> None:
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
        self._sock = self._reader = self._port = None


# --- firing ----------------------------------------------------------------------------------------


class _Home:
    """The triggers of one trigger folder, as this process sees them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.registry = Registry(root)
        self.instances: dict[str, Instance] = {}  # stateless, by trigger id
        self.node = NodeClient()
        self._matches: dict[tuple[str, m.SeriesPath, str], bool] = {}
        self._lock = threading.RLock()  # writers of one process may run on several threads (the node's)

    def entries(self) -> list[Entry]:
        with self._lock:
            entries = self.registry.entries()
            if self.instances:
                live = {e.id for e in entries}
                for trigger_id in [i for i in self.instances if i not in live]:
                    self.instances.pop(trigger_id).drop()  # dropped by another process: this instance ends too
            return entries

    def matched(self, entry: Entry, write: Write, millis: tuple[int, ...]) -> m.Tablet | None:
        schemas, values = [], []
        for name, kind, column in write.columns:
            key = (entry.id, write.device, name)
            hit = self._matches.get(key)
            if hit is None:
                hit = self._matches[key] = entry.pattern.matches(write.device.nodes + (name,))
            if hit:
                schemas.append(m.Measurement(name, kind))
                values.append(column)
        if not schemas:
            return None
        return m.Tablet(str(write.device), tuple(schemas), millis, tuple(values), write.micros)

    def instance(self, entry: Entry) -> Instance:
        with self._lock:
            found = self.instances.get(entry.id)
            if found is None or found.hung:
                found = self.instances[entry.id] = Instance.create(entry, self.root)
            return found

    def fire(self, entry: Entry, tablet: m.Tablet, timeout: float) -> tuple[str | None, m.FailureStrategy]:
        """(None, _) when the fire succeeded, else (why, the strategy that applies)."""
        if entry.stateful:
            try:
                answer = self.node.call({"op": "fire", "id": entry.id, "tablet": tablet_json(tablet)}, timeout + 5)
            except TimeoutError:
                return f"the stream node did not answer within {timeout + 5:g} s", entry.strategy
            except ConnectionError as err:
                return f"stateful trigger not reachable: {err}", entry.strategy
            return answer.get("error"), m.FailureStrategy(answer.get("strategy") or entry.strategy)
        try:
            instance = self.instance(entry)
        except TriggerError as err:
            return f"no instance: {err}", entry.strategy
        error = instance.fire(tablet, timeout)
        return error, (instance.strategy() if error else entry.strategy)


class InsertTriggers:
    """The warehouse listener that fires the registered triggers (one per process)."""

    def __init__(self) -> None:
        self._homes: dict[Path, _Home] = {}
        self._lock = threading.Lock()

    def home(self, root: Path | None = None) -> _Home:
        root = (root or folder()).absolute()  # on every write: no file system call
        with self._lock:
            found = self._homes.get(root)
            if found is None:
                found = self._homes[root] = _Home(root)
            return found

    def active(self) -> bool:
        return bool(self.home().entries())

    def before(self, writes: Sequence[Write]) -> list[str]:
        return self._fire(m.TriggerEvent.BEFORE_INSERT, writes)

    def after(self, writes: Sequence[Write]) -> list[str]:
        return self._fire(m.TriggerEvent.AFTER_INSERT, writes)

    def _fire(self, event: m.TriggerEvent, writes: Sequence[Write]) -> list[str]:
        home = self.home()
        entries = [e for e in home.entries() if e.event is event]
        if not entries:
            return []
        timeout = fire_timeout()
        notices: list[str] = []
        counts: dict[str, _Counts] = {}
        try:
            for write in writes:
                if not write.micros:
                    continue  # nothing was written (a CQ window without points)
                millis = tuple(t // 1000 for t in write.micros)
                for entry in entries:
                    tablet = home.matched(entry, write, millis)
                    if tablet is None:
                        continue
                    error, strategy = home.fire(entry, tablet, timeout)
                    c = counts.setdefault(entry.id, _Counts())
                    c.fired += 1
                    if error is None:
                        continue
                    c.failed += 1
                    c.last_error, c.last_error_at = error, datetime.now(UTC).isoformat(timespec="seconds")
                    message = f"trigger {entry.name} failed on {write.device}: {error}"
                    if strategy is m.FailureStrategy.PESSIMISTIC:
                        if event is m.TriggerEvent.BEFORE_INSERT:
                            raise TriggerError(f"Failed to complete the insertion because trigger error before the "
                                               f"insertion: {message} (PESSIMISTIC: nothing was written)")
                        notices.append(f"{message} (PESSIMISTIC: the triggers after it did not fire; the data is "
                                       "written)")
                        return notices
                    notices.append(f"{message} (the data is written)")
        finally:
            home.registry.add_counts(counts)
        return notices


LISTENER = InsertTriggers()
listeners.register(LISTENER)


# --- CREATE, DROP and SHOW TRIGGERS --------------------------------------------------------------


def create(stmt: m.CreateInsertTrigger) -> str:
    """Register a trigger: its class is imported and an instance made (``validate``, ``on_create``)
    before anything is kept; a failure registers nothing."""
    home = LISTENER.home()
    with home.registry.locked() as entries:
        if any(e.name == stmt.name for e in entries):
            raise TriggerError(f"Failed to create trigger [{stmt.name}], the same name trigger has been created")
        trigger_id = uuid.uuid4().hex
        install_dir = f"{_folder_name(stmt.name)}-{trigger_id[:8]}" if stmt.uri else None
        entry = Entry(trigger_id, stmt.name, stmt.type, stmt.event, stmt.pattern, stmt.class_name, stmt.uri,
                      install_dir, stmt.attributes, m.FailureStrategy.OPTIMISTIC,
                      datetime.now(UTC).isoformat(timespec="seconds"))
        try:
            if stmt.uri and install_dir:
                install(stmt.uri, home.root / "install" / install_dir)
            if entry.stateful:
                entry = _create_in_node(home, entry)
            else:
                instance = Instance.create(entry, home.root)
                entry = _with_strategy(entry, instance.strategy())
                home.instances[entry.id] = instance  # this process's instance: no second on_create
        except BaseException:
            if install_dir:
                shutil.rmtree(home.root / "install" / install_dir, ignore_errors=True)
            raise
        entries.append(entry)
    where = "in the stream node" if entry.stateful else "in each process that writes"
    return (f"trigger {entry.name} created: {entry.type.value} {entry.event.value} on {entry.pattern}, "
            f"{entry.class_name} ({entry.strategy.value}), an instance {where}")


def _folder_name(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in name)[:40] or "trigger"


def _with_strategy(entry: Entry, strategy: m.FailureStrategy) -> Entry:
    return Entry(**{**entry.__dict__, "strategy": strategy})


def _create_in_node(home: _Home, entry: Entry) -> Entry:
    try:
        answer = home.node.call({"op": "create", "entry": entry.to_json()}, 120)
    except (ConnectionError, TimeoutError) as err:
        raise TriggerError(f"a STATEFUL trigger lives in the stream node, which cannot be reached ({err}); "
                           "start it with `airflow-stream node start`") from None
    if answer.get("error"):
        raise TriggerError(answer["error"])
    return _with_strategy(entry, m.FailureStrategy(answer["strategy"]))


def drop(stmt: m.DropInsertTrigger) -> tuple[str, list[str]]:
    """Unregister a trigger (firing stops at once) and call ``on_drop`` on the instances this process
    and the node hold; (message, notices of an ``on_drop`` that failed)."""
    home = LISTENER.home()
    with home.registry.locked() as entries:
        entry = next((e for e in entries if e.name == stmt.name), None)
        if entry is None:
            names = sorted(e.name for e in entries)
            raise TriggerError(f"Failed to drop trigger [{stmt.name}], this trigger has not been created"
                               + (f" (triggers: {', '.join(names)}; names are case-sensitive)" if names else ""))
        entries.remove(entry)
    notices = []
    if entry.stateful:
        try:
            answer = home.node.call({"op": "drop", "id": entry.id}, 120)
            if answer.get("error"):
                notices.append(f"trigger {entry.name} dropped, but {answer['error']}")
        except (ConnectionError, TimeoutError) as err:
            notices.append(f"trigger {entry.name} dropped, but its on_drop was not called: {err}")
    else:
        instance = home.instances.pop(entry.id, None)
        error = instance.drop() if instance is not None else None
        if error:
            notices.append(f"trigger {entry.name} dropped, but its {error}")
    if entry.install:
        shutil.rmtree(home.root / "install" / entry.install, ignore_errors=True)
    return f"trigger {entry.name} dropped", notices


SHOW_COLUMNS = ("TriggerName", "Event", "Type", "State", "PathPattern", "ClassName", "NodeId", "Fired", "Failed",
                "LastError")


def show() -> pa.Table:
    """SHOW TRIGGERS: IoTDB's columns, then the fire and failure counts and the last error."""
    import pyarrow as pa

    home = LISTENER.home()
    entries = home.registry.entries()
    stats = home.registry.stats()
    rows: dict[str, list] = {c: [] for c in SHOW_COLUMNS}
    for e in entries:
        s = stats.get(e.id, {})
        for column, value in zip(SHOW_COLUMNS, (
                e.name, e.event.value, e.type.value, "ACTIVE", str(e.pattern), e.class_name,
                "node" if e.stateful else "ALL", s.get("fired", 0), s.get("failed", 0), s.get("last_error")),
                strict=True):
            rows[column].append(value)
    return pa.table({c: pa.array(v, pa.int64() if c in ("Fired", "Failed") else pa.string())
                     for c, v in rows.items()})
