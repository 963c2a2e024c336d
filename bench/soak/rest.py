"""The soak's REST clients: ``airflow-stream serve`` as a process of its own, and a few threads that
write rows through its TDengine REST endpoint (``POST /rest/sql`` with an INSERT), each into a
subtable of its own, beside the feed's statements and the foreign writer."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import requests

from airflow_stream_provider.processes import free_port
from bench.soak.feed import stamp
from bench.soak.spec import DB, REST_SUBTABLES, STEP, T0, say

#: how often a client looks whether the feed has moved on to a new tick
POLL_S = 0.3


class RestClients:
    """``airflow-stream serve`` and one client thread per subtable of :data:`REST_SUBTABLES`. Each
    client writes, whenever the feed reaches a new tick, one row at the tick's event time plus its
    own offset of seconds, and now and then an update of its previous row (an INSERT at that
    timestamp), in one request; the rows stay in time order per subtable."""

    def __init__(self, home: Path, rng: random.Random, tick: Callable[[], int]) -> None:
        self.home = home
        self.port = free_port()
        self.rng = rng
        self.tick = tick
        self.counts: Counter = Counter()
        self.errors: list[str] = []
        self.proc: subprocess.Popen | None = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/rest/sql"

    def start(self, timeout: float = 60.0) -> None:
        env = os.environ | {"AIRFLOW_STREAM_HOME": str(self.home)}
        cmd = [sys.executable, "-m", "airflow_stream_provider.cli", "serve", "--tdengine-port", str(self.port),
               "--iotdb-port", "0"]
        with (self.home / "serve.out").open("ab") as handle:
            self.proc = subprocess.Popen(cmd, env=env, stdout=handle, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"airflow-stream serve exited with {self.proc.returncode}; see serve.out")
            with contextlib.suppress(requests.ConnectionError):
                if requests.get(f"http://127.0.0.1:{self.port}/rest/login/root/taosdata", timeout=5).ok:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("airflow-stream serve did not answer in time")
            time.sleep(0.2)
        for offset, sub in enumerate(REST_SUBTABLES, start=1):
            seed = self.rng.random()
            thread = threading.Thread(target=self._client, args=(sub, offset, random.Random(seed)),
                                      name=f"rest-{sub}", daemon=True)
            thread.start()
            self._threads.append(thread)
        say(f"serve at {self.url}; {len(self._threads)} REST clients writing")

    def _client(self, sub: str, offset: int, rng: random.Random) -> None:
        session = requests.Session()
        session.auth = ("root", "taosdata")
        last, previous = -1, None
        while not self._stop.is_set():
            k = self.tick()
            if k <= last:
                time.sleep(POLL_S)
                continue
            last = k
            at = T0 + k * STEP + offset * STEP / 10
            rows = [f"('{stamp_ms(at)}', {rng.randint(0, 10)}, {rng.randint(1, 2)})"]
            updated = previous is not None and rng.random() < 0.3
            if updated:  # an update of the previous row: an INSERT at its timestamp, before the new row
                rows.insert(0, f"('{stamp_ms(previous)}', {rng.randint(0, 10)}, {rng.randint(1, 2)})")
            text = f"INSERT INTO {DB}.{sub} VALUES {' '.join(rows)}"
            try:
                answer = session.post(self.url, data=text, timeout=120)
                body = answer.json()
            except (requests.RequestException, ValueError) as err:
                self._failed(f"{sub}: {text}: {err}")
                continue
            if answer.status_code != 200 or body.get("code") != 0:
                self._failed(f"{sub}: {text}: HTTP {answer.status_code} {body}")
                continue
            with self._lock:
                self.counts["rest inserts"] += 1
                self.counts["rest updates"] += int(updated)
                self.counts["rest requests"] += 1
            previous = at

    def _failed(self, problem: str) -> None:
        with self._lock:
            self.errors.append(problem)

    def stop(self) -> None:
        """Stop the clients (each finishes its request in flight), then the server."""
        self._stop.set()
        for thread in self._threads:
            thread.join(150)
        self._threads = []
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


def stamp_ms(at) -> str:
    """A timestamp string with milliseconds, as TDengine's INSERT reads it."""
    return stamp(at) + f".{at.microsecond // 1000:03d}"
