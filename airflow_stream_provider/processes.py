"""Local processes on 127.0.0.1, as the node, the local servers, Airflow's components and a Spark
cluster are started: a free port, whether a port is free or accepts connections, waiting for a
process to be ready, the tail of its log for the message when it is not, and how a process of
ours ends.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"


def free_port() -> int:
    """A port of :data:`HOST` that no one listens on now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def port_free(port: int, host: str = HOST) -> bool:
    """True when a server could listen on ``port`` of ``host`` now (one in TIME_WAIT counts as free)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def accepts(port: int, host: str = HOST) -> bool:
    """True when something accepts connections on ``port`` of ``host`` (asked for at most a second)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex((host, port)) == 0


def wait_for(check: Callable[[], Any], timeout: float, what: str, every: float = 1.0,
             timed_out: Callable[[str], Exception] = AssertionError) -> Any:
    """The first truthy value of ``check()``, polled every ``every`` seconds; after ``timeout``
    seconds, ``timed_out`` (AssertionError by default) raised with a message naming ``what``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    raise timed_out(f"timed out after {timeout:.0f} s waiting for {what}")


def tail(path: Path, lines: int = 20) -> str:
    """The last ``lines`` lines of the log at ``path``, or ``(no log)``."""
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


def descendants(root: int) -> list[int]:
    """``root`` and every process descending from it, ``root`` first (read from ``/proc``)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        parent = int(stat[stat.rindex(")") + 2:].split()[1])  # the fields after the command's name
        children.setdefault(parent, []).append(int(entry.name))
    found = [root]
    for pid in found:
        found.extend(children.get(pid, []))
    return found


def exit_process(main: Callable[[], int | None]) -> None:
    """Run ``main`` as a process's whole life and end the process with its status.

    Everything Python does at a normal exit is done: the process waits for its non-daemon threads,
    runs its ``atexit`` handlers (logging's flush, the receivers' close) and flushes its output;
    then it ends without the interpreter's final teardown. The native thread pools of Arrow and
    DuckDB are destroyed in that teardown, and one still running then aborts the process
    ("terminate called without an active exception", status -6) after its work was done.
    """
    status: object
    try:
        status = main()
    except SystemExit as stop:
        status = stop.code
    except KeyboardInterrupt:
        status = 130
    except BaseException:  # printed as Python prints it, then the process ends
        traceback.print_exc()
        status = 1
    if status is None:
        code = 0
    elif isinstance(status, int):
        code = status
    else:
        print(status, file=sys.stderr)
        code = 1
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe or stream: nothing more to say
            stream.flush()
    os._exit(code)
