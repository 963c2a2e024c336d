"""A trigger's user class: installed from ``USING URI``, imported under a module name of its own, and
live as an :class:`Instance` whose ``fire`` runs on a thread of its own and times out.

A STATELESS trigger has an instance in each writing process (created at its first matching write:
``validate`` then ``on_create``); a STATEFUL one has a single instance in the stream node
(:mod:`airflow_stream_provider.node.stateful_triggers`).

User code never runs on the writer's own thread, and never without a deadline: making an instance
(the import, the constructor, ``validate``, ``on_create``, ``restore``) and ``on_drop`` have
``AIRFLOW_STREAM_TRIGGER_SETUP_TIMEOUT`` seconds, each ``fire`` ``AIRFLOW_STREAM_TRIGGER_TIMEOUT``.
Whatever it raises, ``SystemExit`` and ``KeyboardInterrupt`` included, is a failure of the trigger.
A thread that did not return is left behind (Python cannot stop it); until it returns, that trigger
gets no second thread in this process: the calls fail at once (:class:`TriggerTimeout`).
"""

from __future__ import annotations

import hashlib
import importlib
import os
import queue
import shutil
import sys
import threading
import time
import types
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from airflow_stream_provider import config
from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import StreamError
from airflow_stream_provider.files import make_dirs
from airflow_stream_provider.streams.insert_triggers.registry import Entry, TriggerError

_MODULE_PREFIX = "_airflow_stream_trigger_"
_ARCHIVES = (".zip", ".whl")


FIRE_TIMEOUT = "AIRFLOW_STREAM_TRIGGER_TIMEOUT"
URI_LIMIT = "AIRFLOW_STREAM_TRIGGER_URI_LIMIT_MB"
URI_TIMEOUT = "AIRFLOW_STREAM_TRIGGER_URI_TIMEOUT"
SETUP_TIMEOUT = "AIRFLOW_STREAM_TRIGGER_SETUP_TIMEOUT"
T = TypeVar("T")


def positive_setting(name: str, default: str, unit: str = "") -> float:
    """The environment setting ``name`` (``default`` when unset), a number above 0; a StreamError
    naming it otherwise. ``unit`` says what it counts in its messages ("seconds")."""
    raw = os.environ.get(name) or default
    what = f" {unit}" if unit else ""
    try:
        value = float(raw)
    except ValueError:
        raise StreamError(f"{name}={raw!r} is not a number{' of' + what if unit else ''}") from None
    if value <= 0:
        raise StreamError(f"{name} must be more than 0{what}, not {raw}")
    return value


def fire_timeout() -> float:
    """Seconds a ``fire`` may take before it counts as failed (``AIRFLOW_STREAM_TRIGGER_TIMEOUT``, default 30)."""
    return positive_setting(FIRE_TIMEOUT, "30", "seconds")


def setup_timeout() -> float:
    """Seconds making an instance (import, constructor, ``validate``, ``on_create``, ``restore``) or
    its ``on_drop`` may take (``AIRFLOW_STREAM_TRIGGER_SETUP_TIMEOUT``, default 60)."""
    return positive_setting(SETUP_TIMEOUT, "60", "seconds")


class TriggerTimeout(TriggerError):
    """A trigger's code did not return by its deadline, or an earlier call of it has not returned yet."""


class _Failed(Exception):
    """User code raised ``error`` during ``step``."""

    def __init__(self, step: str, error: BaseException) -> None:
        super().__init__(step)
        self.step, self.error = step, error


#: trigger id -> (the thread still running its code past a deadline, the step, when it started)
_stuck: dict[str, tuple[threading.Thread, str, float]] = {}
_stuck_lock = threading.Lock()


def _within(entry: Entry, work: Callable[[Callable[[str], None]], T]) -> T:
    """``work(step)`` on a thread of its own, for at most :func:`setup_timeout` seconds; ``work``
    calls ``step(name)`` before each step of user code. Raises :class:`_Failed` when user code
    raised (anything), TriggerError when ``work`` did, TriggerTimeout when the deadline passed."""
    with _stuck_lock:
        earlier = _stuck.get(entry.id)
        if earlier is not None and earlier[0].is_alive():
            raise TriggerTimeout(f"trigger {entry.name}: its {earlier[1]} of {time.monotonic() - earlier[2]:.0f} s "
                                 "ago has not returned yet")
        _stuck.pop(entry.id, None)
    timeout = setup_timeout()
    steps: list[str] = ["setup"]
    box: list = []
    done = threading.Event()

    def run() -> None:
        try:
            box.append((True, work(steps.append)))
        except TriggerError as err:
            box.append((False, err))
        except BaseException as err:
            box.append((False, _Failed(steps[-1], err)))
        finally:
            done.set()

    began = time.monotonic()
    thread = threading.Thread(target=run, name=f"trigger-{entry.name}-setup", daemon=True)
    thread.start()
    if not done.wait(timeout):
        with _stuck_lock:
            _stuck[entry.id] = (thread, steps[-1], began)
        raise TriggerTimeout(f"trigger {entry.name}: {steps[-1]} did not return within {timeout:g} s "
                             f"({SETUP_TIMEOUT})")
    ok, value = box[0]
    if not ok:
        raise value
    return value


def uri_limit() -> int:
    """Bytes ``USING URI`` may copy into the home (``AIRFLOW_STREAM_TRIGGER_URI_LIMIT_MB``, default 64 MB)."""
    return int(positive_setting(URI_LIMIT, "64", "megabytes") * 1024 * 1024)


def uri_timeout() -> float:
    """Seconds an http(s) ``USING URI`` may take in all (``AIRFLOW_STREAM_TRIGGER_URI_TIMEOUT``, default 60)."""
    return positive_setting(URI_TIMEOUT, "60", "seconds")


def install(uri: str, target: Path) -> None:
    """Copy what ``uri`` names into ``target``: a ``.py`` file, a package folder (with its
    ``__init__.py``), a folder of modules, a ``.zip`` or a ``.whl``; a local path, ``file://`` or
    ``http(s)://`` (fetched once, here). At most :func:`uri_limit` bytes, no symbolic links (they
    are refused, not followed), never ``/``, the user's home or a folder holding the stream home or
    ``target``;
    a download by :func:`uri_timeout`."""
    parsed = urllib.parse.urlparse(uri)
    if parsed.scheme in ("http", "https"):
        target.mkdir(parents=True)
        _download(uri, urllib.parse.unquote(parsed.path), target)
        return
    if parsed.scheme not in ("", "file"):
        raise TriggerError(f"USING URI {uri!r}: the scheme {parsed.scheme}:// is not supported; use a file path, "
                           "file:// or http(s)://")
    path = Path(os.path.abspath(Path(urllib.parse.unquote(parsed.path) if parsed.scheme == "file" else uri)
                                .expanduser()))
    if not path.exists() and not path.is_symlink():
        raise TriggerError(f"USING URI {uri!r} cannot be read: {path} does not exist")
    home = config.home().absolute()
    if path in (Path("/"), Path.home().absolute(), home, *home.parents, *target.absolute().parents):
        raise TriggerError(f"USING URI {uri!r}: {path} is not copied (the root, the user's home, or a folder holding "
                           "the stream home or the trigger folder); name the trigger's own file or folder")
    if path.is_dir() and not path.is_symlink():
        files = _files(uri, path)
        base = target / path.name if (path / "__init__.py").is_file() else target
    elif path.suffix == ".py" or path.suffix in _ARCHIVES:
        files = _files(uri, path)
        base = target
    else:
        raise TriggerError(f"USING URI {uri!r}: name a .py file, a package folder, a .zip or a .whl")
    target.mkdir(parents=True)
    try:
        for source, relative in files:
            make_dirs((base / relative).parent)
            shutil.copyfile(source, base / relative, follow_symlinks=False)
    except OSError as err:
        raise TriggerError(f"USING URI {uri!r} cannot be read: {err}") from None


def _files(uri: str, path: Path) -> list[tuple[Path, Path]]:
    """(file, its path in the copy) of what ``path`` names, checked before anything is copied."""
    limit, total, out = uri_limit(), 0, []
    stack = [path]
    while stack:
        current = stack.pop()
        relative = Path(current.name) if current == path else current.relative_to(path)
        if current.is_symlink():
            raise TriggerError(f"USING URI {uri!r}: {current} is a symbolic link; links are not followed (copy "
                               "the files they name instead)")
        if current.is_dir():
            if current.name != "__pycache__":
                stack.extend(sorted(current.iterdir()))
            continue
        if not current.is_file():
            raise TriggerError(f"USING URI {uri!r}: {current} is not a regular file")
        total += current.stat().st_size
        if total > limit:
            raise TriggerError(f"USING URI {uri!r}: more than {limit // (1024 * 1024)} MB ({URI_LIMIT})")
        out.append((current, relative))
    return out


def _download(uri: str, url_path: str, target: Path) -> None:
    name = Path(url_path).name
    if not name.endswith((".py", *_ARCHIVES)):
        raise TriggerError(f"USING URI {uri!r}: an http(s) URI names a .py, .zip or .whl file")
    limit, timeout = uri_limit(), uri_timeout()
    deadline = time.monotonic() + timeout
    chunks: list[bytes] = []
    size = 0
    try:
        with urllib.request.urlopen(uri, timeout=min(timeout, 30)) as response:
            while chunk := response.read1(65536):
                size += len(chunk)
                if size > limit:
                    raise TriggerError(f"USING URI {uri!r}: more than {limit // (1024 * 1024)} MB ({URI_LIMIT})")
                if time.monotonic() > deadline:
                    raise TriggerError(f"USING URI {uri!r}: not downloaded within {timeout:g} s ({URI_TIMEOUT})")
                chunks.append(chunk)
    except TimeoutError:
        raise TriggerError(f"USING URI {uri!r}: not downloaded within {timeout:g} s ({URI_TIMEOUT})") from None
    except OSError as err:
        raise TriggerError(f"USING URI {uri!r} cannot be read: {err}") from None
    (target / name).write_bytes(b"".join(chunks))


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


def _make(entry: Entry, root: Path, restoring: bool, step: Callable[[str], None]
          ) -> tuple[m.InsertTrigger, m.FailureStrategy]:
    step(f"the import of {entry.class_name.rpartition('.')[0]}")
    trigger_class = load_class(entry, root)
    step(f"{entry.class_name}()")
    obj = trigger_class()
    attributes = entry.attributes_object()
    step("validate")
    obj.validate(attributes)
    step("on_create")
    obj.on_create(attributes)
    if restoring:
        step("restore")
        obj.restore()
    step("failure_strategy")
    try:
        strategy = m.FailureStrategy(obj.failure_strategy())
    except Exception:
        strategy = entry.strategy
    return obj, strategy


class Instance:
    """A live trigger object. ``fire`` runs on a thread of its own, so that a ``fire`` that hangs
    can time out; calls to one instance never overlap. Its failure strategy is asked once, when
    it is made."""

    def __init__(self, entry: Entry, trigger: m.InsertTrigger, strategy: m.FailureStrategy) -> None:
        self.entry = entry
        self.trigger = trigger
        self._strategy = strategy
        self.hung = False
        self._requests: queue.SimpleQueue = queue.SimpleQueue()
        self._worker: threading.Thread | None = None
        self._last: threading.Event | None = None  # set when the latest fire returned

    @classmethod
    def create(cls, entry: Entry, root: Path, *, restoring: bool = False) -> Instance:
        """A new instance: the import, the constructor, ``validate``, then ``on_create``, then (a
        stateful trigger coming back) ``restore``, by :func:`setup_timeout`; an error names the
        step that failed (TriggerTimeout: the step that did not return)."""
        try:
            obj, strategy = _within(entry, lambda step: _make(entry, root, restoring, step))
        except _Failed as failed:
            raise TriggerError(f"trigger {entry.name}: {failed.step} failed ({_described(failed.error)})") from None
        return cls(entry, obj, strategy)

    def strategy(self) -> m.FailureStrategy:
        return self._strategy

    @property
    def stuck(self) -> bool:
        """A fire timed out and has not returned yet: its thread is still taken."""
        return self.hung and self._last is not None and not self._last.is_set()

    def fire(self, tablet: m.Tablet, timeout: float) -> str | None:
        """Fire once; None when it succeeded, else why it failed."""
        if self._worker is None:
            self._worker = threading.Thread(target=self._serve, name=f"trigger-{self.entry.name}", daemon=True)
            self._worker.start()
        done = self._last = threading.Event()
        box: list = []
        self._requests.put((tablet, box, done))
        if not done.wait(timeout):
            self.hung = True
            return f"fire did not return within {timeout:g} s ({FIRE_TIMEOUT})"
        ok, value = box[0]
        if not ok:
            return value
        return "fire returned False" if value is False else None

    def _serve(self) -> None:
        while True:
            tablet, box, done = self._requests.get()
            try:
                box.append((True, self.trigger.fire(tablet)))
            except BaseException as err:
                box.append((False, f"fire raised {_described(err)}"))
            done.set()

    def drop(self) -> str | None:
        """Call ``on_drop`` (by :func:`setup_timeout`); None when it returned, else why not."""
        def on_drop(step: Callable[[str], None]) -> None:
            step("on_drop")
            self.trigger.on_drop()

        try:
            _within(self.entry, on_drop)
        except _Failed as failed:
            return f"on_drop raised {_described(failed.error)}"
        except TriggerError as err:  # the deadline: "trigger t: on_drop did not return ..."
            return str(err).removeprefix(f"trigger {self.entry.name}: ").removeprefix("its ")
        return None
