"""Real WebSocket receivers for the notification tests: ``airflow-stream receive`` processes,
each started by the test and stopped by PID."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from airflow_stream_provider.processes import free_port


def notify_database(wh, monkeypatch, more: str = "") -> Iterator:
    """A warehouse fixture's body for stream notification tests: database ``d`` in use (and
    ``more`` statements run), no Airflow connection looked up for the receivers, and the process's
    receiver connections closed afterwards."""
    from airflow_stream_provider import statements
    from airflow_stream_provider.notify import delivery

    monkeypatch.setenv("AIRFLOW_STREAM_NOTIFY_CONN_IDS", "none")
    list(statements.run(wh, f"CREATE DATABASE d; USE d; {more}"))
    yield wh
    delivery.close_all()


class ReceiverProcess:
    def __init__(self, folder: Path, port: int | None = None, tls: tuple[Path, Path] | None = None,
                 extra: Sequence[str] = ()) -> None:
        self.port = port or free_port()
        self.extra = list(extra)
        self.out = folder / f"received-{self.port}.jsonl"
        self.tls = tls
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"{'wss' if self.tls else 'ws'}://{'localhost' if self.tls else '127.0.0.1'}:{self.port}/notify"

    def start(self) -> ReceiverProcess:
        cmd = [sys.executable, "-m", "airflow_stream_provider.cli", "receive", "--port", str(self.port),
               "--out", str(self.out), "--quiet"]
        if self.tls:
            cmd += ["--tls-cert", str(self.tls[0]), "--tls-key", str(self.tls[1])]
        cmd += self.extra
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"receiver exited: {self.proc.stderr.read().decode()[-2000:]}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self
            time.sleep(0.1)
        raise RuntimeError("receiver did not start listening")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self.proc = None

    def messages(self) -> list[dict]:
        if not self.out.exists():
            return []
        return [json.loads(line) for line in self.out.read_text().splitlines() if line.strip()]

    def texts(self) -> list[str]:
        return self.out.read_text().splitlines() if self.out.exists() else []


@pytest.fixture
def receivers(tmp_path):
    made: list[ReceiverProcess] = []

    def make(port: int | None = None, *, start: bool = True, tls: tuple[Path, Path] | None = None) -> ReceiverProcess:
        rec = ReceiverProcess(tmp_path, port, tls)
        made.append(rec)
        return rec.start() if start else rec

    yield make
    from airflow_stream_provider.notify import delivery

    delivery.close_all()  # the client side first, so the receivers close without waiting
    for rec in made:
        rec.stop()


def events_of(messages: list[dict]) -> list[dict]:
    return [ev for msg in messages for stream in msg["streams"] for ev in stream["events"]]
