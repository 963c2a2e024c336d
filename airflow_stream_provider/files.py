"""The files the project writes under its home: replaced whole, created with one mode policy, and the
lock files that keep two processes from doing the same work.

The mode policy: every file the project writes is created ``0640`` and every folder ``0750``
(owner read-write, the owner's group read, no one else), with the process's umask applied on top;
the node's token is ``0600``. A deployment whose readers (the DAG processor, the api-server) run as
another user gives them the home owner's group. Delta data files are written by Spark and delta-rs
with the umask alone; the ``0750`` folders above them keep other users out.

Locks are ``flock`` locks on a lock file: they go with the process (or the descriptor) that holds
them, so a killed holder never leaves a stale lock behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

#: the mode of the files the project writes (the umask applies too)
FILE_MODE = 0o640
#: the mode of the folders the project creates (the umask applies too)
DIR_MODE = 0o750


def make_dirs(path: Path) -> Path:
    """Create ``path`` and its missing parents with :data:`DIR_MODE`; return it."""
    missing = []
    folder = Path(path)
    while not folder.is_dir():
        missing.append(folder)
        folder = folder.parent
    for each in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another process made it meanwhile
            each.mkdir(mode=DIR_MODE)
    return path


def _temporary(path: Path, text: str, durable: bool) -> Path:
    """A new file beside ``path`` (its folder exists) holding ``text``, created with :data:`FILE_MODE`."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
        if durable:
            handle.flush()
            os.fsync(handle.fileno())
    return tmp


def write_text(path: Path, text: str, *, durable: bool = False) -> None:
    """Replace ``path`` with ``text`` in one step: a reader sees the old file or the new one, never a
    part. ``durable`` also syncs the data to disk before the replacement. The folder must exist: a
    writer that may create it calls :func:`make_dirs` (a writer whose folder was removed, as a
    dropped stream's, fails rather than making it again)."""
    _temporary(path, text, durable).replace(path)


def create_text(path: Path, text: str) -> bool:
    """Create ``path`` holding ``text`` unless it exists, in one step; True when this call created it."""
    tmp = _temporary(path, text, durable=False)
    try:
        os.link(tmp, path)  # fails when the name exists: an atomic create-if-absent with full content
        return True
    except FileExistsError:
        return False
    finally:
        tmp.unlink()


def write_json(path: Path, payload: Any, *, durable: bool = False, default: Callable[[Any], Any] | None = None) -> None:
    """Replace ``path`` with ``payload`` as JSON in one step (:func:`write_text`); ``default`` turns
    values JSON does not know into ones it does."""
    write_text(path, json.dumps(payload, default=default), durable=durable)


def append_file(path: Path) -> int:
    """A descriptor to append to ``path`` (created with :data:`FILE_MODE`)."""
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)


def lock_file(path: Path) -> int:
    """A descriptor of the lock file ``path`` (created with :data:`FILE_MODE`), to ``flock``."""
    return os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE)


@contextlib.contextmanager
def hold_lock(path: Path) -> Iterator[None]:
    """Hold the lock file ``path`` exclusively while the block runs, waiting for any other holder.
    The lock goes with the process that held it."""
    fd = lock_file(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # (closing it lets go of the lock)


def held_lock(path: Path) -> int | None:
    """The lock file ``path`` held exclusively, if no other holder has it: the descriptor that holds
    it until it is closed (or its process ends), or None."""
    fd = lock_file(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


@contextlib.contextmanager
def try_lock(path: Path) -> Iterator[bool]:
    """Hold the lock file ``path`` exclusively while the block runs, if no other holder has it;
    yields whether this one does. The lock goes with the process that held it."""
    fd = held_lock(path)
    try:
        yield fd is not None
    finally:
        if fd is not None:
            os.close(fd)  # (closing it lets go of the lock)


def lock_held(path: Path) -> bool:
    """True when a process holds the lock file ``path``. The probe takes a shared lock for an
    instant: probes never block each other, and a holder that is taking the lock retries."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # (also lets go of the shared lock)
    return False
