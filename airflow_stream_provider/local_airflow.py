"""Airflow on this machine as separate local processes: api-server, scheduler, dag-processor and
triggerer, with LocalExecutor and a SQLite database in a folder of its own.

The benchmarks and the end-to-end tests run the real components this way; each is started in its
own process group and stopped by its PID. The DAG folder is the provider's (``dags/streams.py``),
so every stream of ``AIRFLOW_STREAM_HOME`` is a DAG.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import airflow_stream_provider
from airflow_stream_provider.airflow_api import AirflowApi
from airflow_stream_provider.processes import descendants, free_port, wait_for
from airflow_stream_provider.spark.session import child_environ

AIRFLOW = Path(sys.executable).with_name("airflow")
COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")


def worker_hostname() -> str:
    """The host name a task instance records: ``AIRFLOW_STREAM_WORKER_NAME`` when set (each Celery
    worker of a :class:`LocalAirflow` has its own, so a task's record tells which worker ran it),
    else the machine's fully qualified name, as Airflow's default does."""
    return os.environ.get("AIRFLOW_STREAM_WORKER_NAME") or socket.getfqdn()


class LocalAirflow:
    """Airflow for ``stream_home``: its components as four processes, or with ``standalone`` as
    ``airflow standalone`` (one process that starts them all), on ``port`` (a free one by default).

    By default the metadata database is SQLite and the executor LocalExecutor. With ``database``
    (a SQLAlchemy URL, PostgreSQL say) and ``celery`` (a broker URL, Redis say), it is the scaled-out
    Airflow: the CeleryExecutor, and ``workers`` Celery workers as processes of their own
    (``celery-worker-1``, ...), which run every task."""

    def __init__(self, home: Path, stream_home: Path, *, parallelism: int = 4, standalone: bool = False,
                 port: int | None = None, users: dict[str, tuple[str, str]] | None = None,
                 database: str | None = None, celery: str | None = None, workers: int = 2,
                 dags_folder: Path | None = None) -> None:
        """``users``: name -> (role, password) for Airflow's simple auth manager, the first being
        the one this provider's API calls use; without them, every request is admin. ``dags_folder``:
        the DAG folder (default: the provider's, which renders the streams of ``stream_home``)."""
        if celery and not database:
            raise ValueError("the CeleryExecutor needs a database other than SQLite: pass database= (PostgreSQL)")
        self.home = Path(home)
        self.standalone = standalone
        self.workers = [f"celery-worker-{i + 1}" for i in range(workers)] if celery else []
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = child_environ() | {
            "AIRFLOW_HOME": str(home), "AIRFLOW_STREAM_HOME": str(stream_home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder or Path(airflow_stream_provider.__file__).parent / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            # SQLite lets one writer in at a time: a CLI command waits for the scheduler's write
            # instead of failing with "database is locked" after SQLite's default 5 s
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{(Path(home) / 'airflow.db').resolve()}?timeout=60",
            "AIRFLOW__CORE__PARALLELISM": str(parallelism),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.url}/execution/",
            "AIRFLOW__API__PORT": str(self.port), "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API_AUTH__JWT_SECRET": "airflow-stream-local-" + os.urandom(8).hex(),
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "5",
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
            "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "1",
            "AIRFLOW_STREAM_API_URL": self.url,
            # marks every process of this Airflow, so that stop() finds what outlived its parent
            "AIRFLOW_STREAM_LOCAL_AIRFLOW": os.urandom(8).hex(),
            "PATH": f"{AIRFLOW.parent}{os.pathsep}{os.environ.get('PATH', '')}",  # standalone runs `airflow ...`
        }
        if database:
            self.env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = database
        if celery:
            self.env |= {
                "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
                "AIRFLOW__CELERY__BROKER_URL": celery,
                "AIRFLOW__CELERY__RESULT_BACKEND": f"db+{database}",
                "AIRFLOW__CELERY__WORKER_CONCURRENCY": str(max(1, parallelism // max(1, workers))),
                "AIRFLOW__CORE__HOSTNAME_CALLABLE": f"{__name__}.worker_hostname",
            }
        self.users = users or {}
        if self.users:
            passwords = self.home / "passwords.json"
            self.env |= {
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(f"{n}:{r}" for n, (r, _p) in self.users.items()),
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
                "AIRFLOW_STREAM_API_USER": next(iter(self.users)),
                "AIRFLOW_STREAM_API_PASSWORD": next(iter(self.users.values()))[1],
            }
        self.processes: dict[str, subprocess.Popen] = {}
        #: (component, pid) of every component process started, killed or restarted ones included;
        #: each is the leader of its own process group
        self.started: list[tuple[str, int]] = []

    def start(self, timeout: float = 180) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        if self.users:
            (self.home / "passwords.json").write_text(json.dumps({n: p for n, (_r, p) in self.users.items()}))
        migrated = subprocess.run([str(AIRFLOW), "db", "migrate"], env=self.env, capture_output=True, text=True,
                                  timeout=300)
        if migrated.returncode != 0:
            raise RuntimeError(f"airflow db migrate failed:\n{(migrated.stderr or migrated.stdout)[-3000:]}")
        for name in ("standalone",) if self.standalone else COMPONENTS + tuple(self.workers):
            self._spawn(name)
        wait_for(self._up, timeout, "the api-server to answer")

    def _spawn(self, name: str) -> None:
        """Start component ``name`` in a process group of its own, appending to its log."""
        args = [str(AIRFLOW), name] + (["--port", str(self.port)] if name == "api-server" else [])
        env = self.env
        if name in self.workers:
            # each worker its own Celery node name and task host name; the workers' logs are files
            # on this machine, which the api-server reads, so no log server is needed
            args = [str(AIRFLOW), "celery", "worker", "--celery-hostname", f"{name}@%h", "--skip-serve-logs"]
            env = env | {"AIRFLOW_STREAM_WORKER_NAME": name}
        with (self.home / f"{name}.log").open("ab") as log:
            self.processes[name] = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT,
                                                    start_new_session=True, cwd=self.home)
        self.started.append((name, self.processes[name].pid))

    def kill(self, name: str, sig: int = signal.SIGKILL) -> int:
        """Send ``sig`` to component ``name``'s process alone (its children live on, as after a crash of
        that process) and wait for it to end; return its pid."""
        proc = self.processes[name]
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, sig)
        proc.wait(30)
        return proc.pid

    def tree(self, name: str) -> list[int]:
        """The pids of component ``name``'s process and of all its descendants (a worker's task
        processes), the component's first."""
        return descendants(self.processes[name].pid)

    def restart(self, name: str) -> int:
        """Start component ``name`` again, as a supervisor restarts a process that ended; return its pid.
        A component still running is left as it is."""
        if self.processes[name].poll() is None:
            return self.processes[name].pid
        self._spawn(name)
        return self.processes[name].pid

    def _up(self) -> bool:
        for name, proc in self.processes.items():
            if proc.poll() is not None:
                raise AssertionError(f"{name} exited with {proc.returncode}:\n{self.log(name)}")
        try:
            with urllib.request.urlopen(f"{self.url}/api/v2/monitor/health", timeout=2):
                return True
        except OSError:
            return False

    def log(self, name: str, lines: int = 40) -> str:
        text = (self.home / f"{name}.log").read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def stop(self) -> None:
        for proc in self.processes.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        for proc in self.processes.values():
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        # what outlived a killed component (say, the executor's workers of a killed scheduler) is
        # still in that component's process group; a task process leads a group of its own, and
        # carries this Airflow's mark in its environment
        for _name, group in self.started:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
        for pid in self._leftovers():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def _leftovers(self) -> list[int]:
        """The processes whose environment holds this Airflow's mark."""
        marker = f"AIRFLOW_STREAM_LOCAL_AIRFLOW={self.env['AIRFLOW_STREAM_LOCAL_AIRFLOW']}".encode()
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                if marker in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:  # gone meanwhile, or not ours to read
                continue
        return found

    def client(self, user: str | None = None) -> AirflowApi:
        """An API client of ``user`` (by default the first user; anyone without users)."""
        if user is None or not self.users:
            return AirflowApi(self.url, self.env.get("AIRFLOW_STREAM_API_USER"),
                              self.env.get("AIRFLOW_STREAM_API_PASSWORD"))
        return AirflowApi(self.url, user, self.users[user][1])

    def api(self, path: str) -> dict:
        return self.client()._send("GET", path)

    def token(self, user: str | None = None) -> str:
        """A JWT of ``user`` (by default the first user; anyone without users)."""
        return self.client(user).token()
