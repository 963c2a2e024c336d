"""How a process of ours ends (:func:`exit_process`): as a normal Python exit does, its non-daemon
threads finished, its ``atexit`` handlers run and its output flushed, with its status; then without
the interpreter's final teardown, where Arrow's native thread pools can abort a process whose work
is done."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from importlib.metadata import entry_points
from pathlib import Path

import pytest

PROGRAM = textwrap.dedent("""
    import atexit, sys, threading, time
    from airflow_stream_provider.processes import exit_process

    def late():
        time.sleep(0.3)
        print("thread done", flush=True)

    def main():
        atexit.register(lambda: print("atexit ran"))
        threading.Thread(target=late).start()
        sys.stdout.write("unflushed")  # no newline, no flush: exit_process flushes it
        {end}

    exit_process(main)
    print("never printed")
""")


def run(end: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", PROGRAM.format(end=end)], capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize(("end", "status"), [("return 3", 3), ("return None", 0), ("raise SystemExit(2)", 2),
                                             ("raise KeyboardInterrupt", 130), ("raise ValueError('bad')", 1)])
def test_the_process_ends_with_its_status_after_what_a_normal_exit_does(end, status):
    done = run(end)
    assert done.returncode == status, done.stderr
    assert done.stdout == "unflushedthread done\natexit ran\n"
    if "ValueError" in end:
        assert "ValueError: bad" in done.stderr  # the traceback, as Python prints it


def test_a_message_as_status_is_printed_and_the_status_is_1():
    done = run("raise SystemExit('no such stream')")
    assert (done.returncode, done.stderr) == (1, "no such stream\n")


def test_the_console_script_and_the_node_end_through_it():
    (script,) = [e for e in entry_points(group="console_scripts") if e.name == "airflow-stream"]
    assert script.value == "airflow_stream_provider.cli:run"
    from airflow_stream_provider.node import server, worker
    for module in (server, worker):
        assert "exit_process(main)" in Path(module.__file__).read_text()
