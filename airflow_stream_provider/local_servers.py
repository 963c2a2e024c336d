"""PostgreSQL and Redis as local processes on 127.0.0.1, each with its own data folder: the metadata
database and the Celery broker of the scaled-out Airflow (``LocalAirflow(..., celery=...)``), for
the end-to-end tests and the benchmarks. Each server is a child process, stopped by its pid.

The binaries are Debian's (``postgresql``, ``redis-server``; ``dev/setup`` installs them).
PostgreSQL refuses to run as root, so under root the cluster belongs to the ``postgres`` user.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Self

from airflow_stream_provider.files import make_dirs
from airflow_stream_provider.processes import HOST, accepts, free_port, tail


class ServerError(RuntimeError):
    """A local server is missing or did not start; the message says which and where its log is."""


class _Server(ABC):
    name = "server"

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder).resolve()
        self.port = free_port()
        self.process: subprocess.Popen | None = None
        self.log = self.folder / f"{self.name}.log"

    def start(self, timeout: float | None = None) -> Self:
        """Start the server and wait until it serves; a server that fails to start is stopped."""
        try:
            return self._start() if timeout is None else self._start(timeout)
        except BaseException:
            self.stop()
            raise

    @abstractmethod
    def _start(self, timeout: float = 60.0) -> Self:
        """Launch the server and wait until it serves (each server class knows how)."""

    def _spawn(self, args: list[str], user: str | None = None, env: dict[str, str] | None = None) -> None:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            env=env, cwd="/" if user else self.folder, start_new_session=True,
                                            user=user)

    def _wait_up(self, timeout: float) -> None:
        assert self.process is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServerError(f"{self.name} exited with {self.process.returncode}:\n{tail(self.log)}")
            if accepts(self.port):
                return
            time.sleep(0.2)
        raise ServerError(f"{self.name} did not accept connections on {HOST}:{self.port} within {timeout:.0f} s; "
                          f"see {self.log}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.process.pid, sig)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)


def _postgres_bin() -> Path:
    for folder in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (folder / "postgres").is_file():
            return folder
    found = shutil.which("postgres")
    if found:
        return Path(found).resolve().parent
    raise ServerError("PostgreSQL is not installed: run dev/setup, or apt-get install postgresql")


class Postgres(_Server):
    """A PostgreSQL cluster in ``folder``, serving database ``airflow`` to user ``airflow`` on
    127.0.0.1 only: trust authentication, or with ``password`` the user's password over TCP
    (SCRAM), as a shared metastore database is reached."""

    name = "postgres"

    def __init__(self, folder: Path, password: str | None = None) -> None:
        super().__init__(folder)
        self.password = password

    def _start(self, timeout: float = 60.0) -> Postgres:
        binaries = _postgres_bin()
        make_dirs(self.folder)
        cluster_dir, user = self.folder, None
        if os.geteuid() == 0:
            # the postgres user owns the cluster, in a folder of its own that it can reach (the
            # folders of a root process, pytest's among them, are often closed to other users)
            user = "postgres"
            owner = pwd.getpwnam(user)
            cluster_dir = self._owned = Path(tempfile.mkdtemp(prefix="airflow-stream-postgres-"))
            os.chown(cluster_dir, owner.pw_uid, owner.pw_gid)
        data = cluster_dir / "data"
        if not (data / "PG_VERSION").exists():
            self._initdb(binaries, cluster_dir, data, user)
        self._spawn([str(binaries / "postgres"), "-D", str(data), "-p", str(self.port), "-k", str(cluster_dir),
                     "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200"], user=user)
        self._wait_up(timeout)
        deadline = time.monotonic() + timeout
        while True:  # the port opens a moment before the cluster takes connections
            made = subprocess.run([str(binaries / "createdb"), "-h", HOST, "-p", str(self.port), "-U", "airflow",
                                   "airflow"], capture_output=True, text=True, env=self._client_env())
            if made.returncode == 0 or "already exists" in made.stderr:
                return self
            if time.monotonic() > deadline:
                raise ServerError(f"createdb failed: {made.stderr}")
            time.sleep(0.3)

    def _initdb(self, binaries: Path, cluster_dir: Path, data: Path, user: str | None) -> None:
        auth = ["--auth=trust"]
        if self.password is not None:
            # the password from a file of the cluster's owner, never from the command line
            secret = cluster_dir / "pwfile"
            secret.write_text(self.password + "\n", encoding="utf-8")
            secret.chmod(0o600)
            if user is not None:
                owner = pwd.getpwnam(user)
                os.chown(secret, owner.pw_uid, owner.pw_gid)
            auth = ["--auth-local=trust", "--auth-host=scram-sha-256", f"--pwfile={secret}"]
        try:
            made = subprocess.run([str(binaries / "initdb"), "-D", str(data), "-U", "airflow", *auth, "-E", "UTF8",
                                   "--no-sync"], capture_output=True, text=True, user=user, cwd="/")
        finally:
            (cluster_dir / "pwfile").unlink(missing_ok=True)
        if made.returncode != 0:
            raise ServerError(f"initdb failed: {made.stderr or made.stdout}")

    def _client_env(self) -> dict[str, str]:
        """The environment of a PostgreSQL client: the password in ``PGPASSWORD``, off the command line."""
        env = dict(os.environ)
        if self.password is not None:
            env["PGPASSWORD"] = self.password
        return env

    _owned: Path | None = None

    def stop(self, sig: int = signal.SIGINT, timeout: float = 30.0) -> None:
        super().stop(sig, timeout)  # SIGINT: PostgreSQL's fast shutdown
        if self._owned is not None:
            shutil.rmtree(self._owned, ignore_errors=True)
            self._owned = None

    @property
    def url(self) -> str:
        return f"postgresql+psycopg2://airflow@{HOST}:{self.port}/airflow"

    @property
    def jdbc_url(self) -> str:
        """The database as a JDBC URL (a metastore's ``[catalog] url``), without the password."""
        return f"jdbc:postgresql://{HOST}:{self.port}/airflow"


class Redis(_Server):
    """A Redis server in ``folder``, without persistence: the Celery broker."""

    name = "redis"

    def _start(self, timeout: float = 30.0) -> Redis:
        server = shutil.which("redis-server") or "/usr/bin/redis-server"
        if not Path(server).is_file():
            raise ServerError("redis-server is not installed: run dev/setup, or apt-get install redis-server")
        make_dirs(self.folder)
        self._spawn([server, "--port", str(self.port), "--bind", HOST, "--dir", str(self.folder),
                     "--save", "", "--appendonly", "no", "--daemonize", "no"])
        self._wait_up(timeout)
        return self

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}/0"


def _minio_binary() -> Path:
    for candidate in (Path(sys.executable).with_name("minio"), Path(shutil.which("minio") or "/nonexistent")):
        if candidate.is_file():
            return candidate
    raise ServerError("MinIO is not installed: run dev/setup, which builds it with Go into .venv/bin")


class Minio(_Server):
    """A MinIO server in ``folder``: an S3-compatible object store with one bucket. :attr:`environ`
    holds the AWS variables through which the Delta kernel, pyarrow and Spark's S3A reach it."""

    name = "minio"
    access_key = "airflow-stream"

    def __init__(self, folder: Path, bucket: str = "warehouse") -> None:
        super().__init__(folder)
        self.bucket = bucket
        self.secret_key = os.urandom(12).hex()

    def _start(self, timeout: float = 60.0) -> Minio:
        make_dirs(self.folder / "data")
        console = free_port()
        env = dict(os.environ) | {"MINIO_ROOT_USER": self.access_key, "MINIO_ROOT_PASSWORD": self.secret_key,
                                  "MINIO_BROWSER": "off", "MINIO_UPDATE": "off"}
        self._spawn([str(_minio_binary()), "server", str(self.folder / "data"), "--address", f"{HOST}:{self.port}",
                     "--console-address", f"{HOST}:{console}", "--quiet"], env=env)
        self._wait_up(timeout)
        from pyarrow import fs

        filesystem = fs.S3FileSystem(access_key=self.access_key, secret_key=self.secret_key, region="us-east-1",
                                     endpoint_override=f"{HOST}:{self.port}", scheme="http",
                                     allow_bucket_creation=True)
        deadline = time.monotonic() + timeout
        while True:  # the port opens a moment before the server takes requests
            try:
                filesystem.create_dir(self.bucket)
                return self
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)

    @property
    def endpoint(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def environ(self) -> dict[str, str]:
        return {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key,
                "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": self.endpoint, "AWS_ALLOW_HTTP": "true"}

    def url(self, prefix: str) -> str:
        return f"s3://{self.bucket}/{prefix}"
