"""A trigger's user class: installed from ``USING URI``, imported under a module name of its own, and
live as an :class:`Instance` whose ``fire`` runs on a thread of its own and times out.

A STATELESS trigger has an instance in each writing process (created at its first matching write:
``validate`` then ``on_create``); a STATEFUL one has a single instance in the stream node
(:mod:`airflow_stream_provider.node.stateful_triggers`).
"""

from __future__ import annotations

import hashlib
import importlib
import os
import queue
import shutil
import sys
import threading
import types
import urllib.parse
import urllib.request
from pathlib import Path

from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import StreamError
from airflow_stream_provider.streams.insert_triggers.registry import Entry, TriggerError

_MODULE_PREFIX = "_airflow_stream_trigger_"
_ARCHIVES = (".zip", ".whl")


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
