"""Start and stop a throwaway Apache IoTDB 2.0.1-beta cluster (1 ConfigNode + 1 DataNode) on
127.0.0.1, for differential tests against a real server.

    from dev.iotdb.server import start
    server = start(Path("/tmp/iotdb-work"), Path.home() / "airflow-stream/iotdb/lib")
    try:
        ...  # connect to server.host:server.port (user root, password root)
    finally:
        server.stop()

(or ``with start(...) as server:``). The jars come from dev/iotdb/fetch.sh. Standard library
only; when the ``iotdb`` client (PyPI ``apache-iotdb``) is importable, readiness is checked by
opening a real session and :meth:`Server.session` hands one out.

What it does:
* writes ``<workdir>/{confignode,datanode}/conf/iotdb-system.properties`` (free ports, data dirs
  under the node's directory) and a logback config that logs to ``<workdir>/logs/``;
* runs ``java -cp <lib>/* org.apache.iotdb.confignode.service.ConfigNode -s``, then
  ``... org.apache.iotdb.db.service.DataNode -s`` with ``-Xmx512m`` each and the system
  properties the official start scripts pass (CONFIGNODE_HOME/CONFIGNODE_CONF,
  IOTDB_HOME/IOTDB_CONF, ...);
* waits until the DataNode's RPC port accepts a session (and the log says it is set up);
* :meth:`Server.stop` sends SIGTERM to the DataNode then the ConfigNode, SIGKILL after a grace
  period. The JVMs also get PR_SET_PDEATHSIG=SIGKILL, so they die with the Python process even
  when it is killed, and an ``atexit`` hook stops a server left running.

Network isolation: IoTDB's services (RPC, internal, MPP, consensus) listen on all interfaces
whatever the configuration says. With ``isolate=True`` the JVMs run in a private network
namespace that has only a loopback interface (made with unshare(CLONE_NEWNET) in a helper thread:
needs root or CAP_SYS_ADMIN), and the DataNode's RPC port is forwarded from ``127.0.0.1:<port>``
of the caller's namespace (the same port number on both sides, so the client's redirections to
127.0.0.1:<port> still work). Nothing of the cluster is then reachable from outside. The default
``isolate=None`` isolates when the kernel allows it and otherwise runs the nodes unisolated.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import ctypes
import errno
import fcntl
import functools
import os
import queue
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Server", "ServerError", "start", "default_lib"]

CONFIGNODE_MAIN = "org.apache.iotdb.confignode.service.ConfigNode"
DATANODE_MAIN = "org.apache.iotdb.db.service.DataNode"
CONFIG_FILE = "iotdb-system.properties"
DATANODE_READY_LOG = "IoTDB DataNode is set up successfully"
DEFAULT_USER = "root"
DEFAULT_PASSWORD = "root"

# What scripts/conf/{datanode,confignode}-env.sh add on Java 11+ (JEP 396).
_ADD_OPENS = [
    f"--add-opens=java.base/{pkg}=ALL-UNNAMED"
    for pkg in ("java.util.concurrent", "java.lang", "java.util", "java.nio", "java.io", "java.net")
]

_LOGBACK = """<?xml version="1.0" encoding="UTF-8"?>
<configuration scan="false">
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>{log}</file>
    <append>true</append>
    <encoder><pattern>%d [%t] %-5p %C{{25}}:%L - %m %n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
  <logger name="org.apache.ratis" level="WARN"/>
  <logger name="org.apache.thrift" level="WARN"/>
  <logger name="io.netty" level="WARN"/>
  <logger name="org.reflections" level="WARN"/>
</configuration>
"""


class ServerError(RuntimeError):
    """The cluster could not be started (the message carries the tail of the relevant log)."""


def default_lib() -> Path:
    """``$AIRFLOW_STREAM_HOME/iotdb/lib`` (``~/airflow-stream/iotdb/lib``), where fetch.sh puts
    the jars."""
    home = os.environ.get("AIRFLOW_STREAM_HOME") or str(Path.home() / "airflow-stream")
    return Path(home) / "iotdb" / "lib"


# --------------------------------------------------------------------------------------------
# Linux plumbing: parent-death signal, private network namespace, loopback up.

_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1
_CLONE_NEWNET = 0x40000000
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1


def _unshare_net() -> None:
    """Move the calling *thread* into a new network namespace and bring its loopback up."""
    if _libc.unshare(_CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare(CLONE_NEWNET): {os.strerror(err)}")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifreq = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(s, _SIOCGIFFLAGS, ifreq))[1]
        fcntl.ioctl(s, _SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | _IFF_UP))


def _die_with_parent(parent_pid: int) -> Callable[[], None]:
    def preexec() -> None:  # runs in the child between fork and exec
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:  # parent already gone
            os._exit(1)

    return preexec


class _Runner(threading.Thread):
    """A long-lived thread that forks the JVMs (and, isolated, owns the private network
    namespace: Linux namespaces are per thread, children and threads inherit the creator's).
    PR_SET_PDEATHSIG fires when the *thread* that forked a child ends, so this thread lives
    until the server is stopped."""

    def __init__(self, isolate: bool) -> None:
        super().__init__(name="iotdb-runner", daemon=True)
        self.isolate = isolate
        self._jobs: queue.Queue = queue.Queue()
        self._started = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        if self.isolate:
            try:
                _unshare_net()
            except BaseException as e:
                self.error = e
                self._started.set()
                return
        self._started.set()
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fn, fut = job
            if fut.set_running_or_notify_cancel():
                try:
                    fut.set_result(fn())
                except BaseException as e:
                    fut.set_exception(e)

    def begin(self) -> None:
        self.start()
        self._started.wait()
        if self.error is not None:
            raise self.error

    def call(self, fn: Callable[[], Any], timeout: float | None = None) -> Any:
        fut: concurrent.futures.Future = concurrent.futures.Future()
        self._jobs.put((fn, fut))
        return fut.result(timeout)

    def finish(self) -> None:
        if self.is_alive():
            self._jobs.put(None)
            self.join(5)


def _can_isolate() -> bool:
    runner = _Runner(isolate=True)
    try:
        runner.begin()
        return True
    except OSError:
        return False
    finally:
        runner.finish()


class _Forwarder:
    """Forwards 127.0.0.1:<port> of the caller's network namespace to 127.0.0.1:<port> inside
    the runner's private one. The listening socket is made here (caller's namespace); the accept
    loop is a thread started by the runner, so its upstream connections are made in the private
    namespace."""

    def __init__(self, runner: _Runner, port: int) -> None:
        self.port = port
        self._closed = False
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", port))
        self._listener.listen(64)
        runner.call(lambda: threading.Thread(target=self._accept, name="iotdb-forward", daemon=True).start())

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.port), timeout=10)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns.update((client, upstream))
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
            with self._lock:
                for s in (src, dst):
                    if s in self._conns:
                        self._conns.discard(s)
                        s.close()

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        with self._lock:
            conns, self._conns = list(self._conns), set()
        for s in conns:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()


# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ports:
    cn_internal: int
    cn_consensus: int
    dn_rpc: int
    dn_internal: int
    dn_mpp_data_exchange: int
    dn_schema_region_consensus: int
    dn_data_region_consensus: int


def _free_ports(n: int) -> list[int]:
    """n distinct ports free on 127.0.0.1 (and on 0.0.0.0: the nodes bind widely)."""
    socks: list[socket.socket] = []
    ports: list[int] = []
    try:
        while len(ports) < n:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("", 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


def _properties(ports: Ports, node_dir: Path) -> str:
    seed = f"127.0.0.1:{ports.cn_internal}"
    d = node_dir / "data"
    values = {
        "cluster_name": "defaultCluster",
        "cn_seed_config_node": seed,
        "dn_seed_config_node": seed,
        "cn_internal_address": "127.0.0.1",
        "cn_internal_port": ports.cn_internal,
        "cn_consensus_port": ports.cn_consensus,
        "dn_rpc_address": "127.0.0.1",
        "dn_rpc_port": ports.dn_rpc,
        "dn_internal_address": "127.0.0.1",
        "dn_internal_port": ports.dn_internal,
        "dn_mpp_data_exchange_port": ports.dn_mpp_data_exchange,
        "dn_schema_region_consensus_port": ports.dn_schema_region_consensus,
        "dn_data_region_consensus_port": ports.dn_data_region_consensus,
        "schema_replication_factor": 1,
        "data_replication_factor": 1,
        "cn_system_dir": d / "confignode/system",
        "cn_consensus_dir": d / "confignode/consensus",
        "cn_pipe_receiver_file_dir": d / "confignode/system/pipe/receiver",
        "dn_system_dir": d / "datanode/system",
        "dn_data_dirs": d / "datanode/data",
        "dn_consensus_dir": d / "datanode/consensus",
        "dn_wal_dirs": d / "datanode/wal",
        "dn_tracing_dir": d / "datanode/tracing",
        "dn_sync_dir": d / "datanode/sync",
        "sort_tmp_dir": d / "datanode/tmp",
        "dn_pipe_receiver_file_dirs": d / "datanode/system/pipe/receiver",
        "udf_lib_dir": node_dir / "ext/udf",
        "trigger_lib_dir": node_dir / "ext/trigger",
        "pipe_lib_dir": node_dir / "ext/pipe",
        "load_active_listening_dirs": node_dir / "ext/load/pending",
        "load_active_listening_fail_dir": node_dir / "ext/load/failed",
        "cn_metric_reporter_list": "",
        "dn_metric_reporter_list": "",
        "enable_rest_service": "false",
        "enable_mqtt_service": "false",
        "pipe_air_gap_receiver_enabled": "false",
    }
    lines = ["# written by dev/iotdb/server.py"]
    lines += [f"{k}={v}" for k, v in values.items()]
    return "\n".join(lines) + "\n"


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return f"(no {path})"
    return f"--- {path} (last {min(lines, len(text))} lines) ---\n" + "\n".join(text[-lines:])


def _try_session(host: str, port: int) -> bool:
    try:
        from iotdb.Session import Session  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return True  # no client: the TCP check and the log line have to do
    session = Session(host, port, DEFAULT_USER, DEFAULT_PASSWORD)
    try:
        session.open(False)
        try:
            dataset = session.execute_query_statement("SHOW DATABASES")
            dataset.close_operation_handle()
        finally:
            session.close()
        return True
    except Exception:
        return False


def _port_open(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=1).close()
        return True
    except OSError:
        return False


@dataclass
class Server:
    """A running 1C1D cluster. Connect to ``host:port`` as ``user``/``password``."""

    workdir: Path
    lib: Path
    ports: Ports
    isolated: bool
    host: str = "127.0.0.1"
    user: str = DEFAULT_USER
    password: str = DEFAULT_PASSWORD
    startup_seconds: float = 0.0
    _procs: dict[str, subprocess.Popen] = field(default_factory=dict, repr=False)
    _runner: _Runner | None = field(default=None, repr=False)
    _forwarder: _Forwarder | None = field(default=None, repr=False)

    @property
    def port(self) -> int:
        return self.ports.dn_rpc

    @property
    def pids(self) -> dict[str, int]:
        return {name: p.pid for name, p in self._procs.items()}

    @property
    def logs(self) -> Path:
        return self.workdir / "logs"

    def alive(self) -> bool:
        return bool(self._procs) and all(p.poll() is None for p in self._procs.values())

    def session(self):
        """An opened ``iotdb.Session.Session`` (needs the apache-iotdb client); close it."""
        from iotdb.Session import Session  # type: ignore[import-not-found,unused-ignore]

        session = Session(self.host, self.port, self.user, self.password)
        session.open(False)
        return session

    def stop(self, grace: float = 15.0) -> None:
        """SIGTERM the DataNode, then the ConfigNode; SIGKILL whichever is still alive after
        ``grace`` seconds. Idempotent."""
        for name in ("datanode", "confignode"):
            proc = self._procs.get(name)
            if proc is None:
                continue
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(grace)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(proc.pid, signal.SIGKILL)
                    proc.wait(10)
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
            del self._procs[name]
        if self._forwarder is not None:
            self._forwarder.close()
            self._forwarder = None
        if self._runner is not None:
            self._runner.finish()
            self._runner = None
        atexit.unregister(self.stop)

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _java_command(
    lib: Path, main: str, home: Path, conf: Path, logback: Path, heap: str, confignode: bool
) -> list[str]:
    props = {
        "logback.configurationFile": logback,
        "TSFILE_HOME": home,
        "TSFILE_CONF": conf,
        "sun.jnu.encoding": "UTF-8",
        "file.encoding": "UTF-8",
        "iotdb.jmx.local": "true",
    }
    if confignode:
        props.update(
            CONFIGNODE_HOME=home,
            CONFIGNODE_DATA_HOME=home,
            CONFIGNODE_CONF=conf,
            CONFIGNODE_LOGS=logback.parent,
            name="iotdb.ConfigNode",
        )
    else:
        props.update(
            IOTDB_HOME=home,
            IOTDB_DATA_HOME=home,
            IOTDB_CONF=conf,
            IOTDB_LOG_DIR=logback.parent,
            name="iotdb.IoTDB",
            OFF_HEAP_MEMORY="256M",
        )
    return [
        "java",
        *_ADD_OPENS,
        "-Xms64m",
        f"-Xmx{heap}",
        "-XX:MaxDirectMemorySize=256m",
        "-Xss512k",
        "-XX:+CrashOnOutOfMemoryError",
        *(f"-D{k}={v}" for k, v in props.items()),
        "-cp",
        f"{lib}/*",
        main,
        "-s",
    ]


def _spawn(cmd: list[str], cwd: Path, out: Any, parent: int) -> subprocess.Popen:
    # util-linux's setpriv asks for the parent-death signal and then executes the JVM: no Python runs
    # between fork and exec, which in a process with threads (a test run's) can hang the child
    setpriv = shutil.which("setpriv")
    if setpriv is not None:
        return subprocess.Popen([setpriv, "--pdeathsig", "KILL", "--", *cmd], cwd=cwd, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    return subprocess.Popen(
        cmd,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=_die_with_parent(parent),
    )


def start(
    workdir: Path,
    lib: Path | None = None,
    *,
    isolate: bool | None = None,
    heap: str = "512m",
    timeout: float = 120.0,
) -> Server:
    """Start a fresh 1C1D cluster with its files under ``workdir`` (created; reuse of a
    workdir from an earlier run restarts that cluster with its data, but on new ports that the
    stored cluster state does not know, so use a fresh/empty workdir). ``lib``: the jar directory
    (default :func:`default_lib`). ``isolate``: private network namespace (see module doc;
    ``None`` = when possible). Raises :class:`ServerError` (with the log tail) when a node dies
    or the DataNode is not ready within ``timeout`` seconds; nothing is left running then."""
    t0 = time.monotonic()
    workdir = Path(workdir).resolve()
    lib = Path(lib).resolve() if lib is not None else default_lib()
    jars = list(lib.glob("*.jar"))
    if not any(j.name.startswith("iotdb-server-") for j in jars) or not any(
        j.name.startswith("iotdb-confignode-") for j in jars
    ):
        raise ServerError(f"no IoTDB jars in {lib}: run dev/iotdb/fetch.sh first")
    if isolate is None:
        isolate = _can_isolate()

    logs = workdir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    ports = Ports(*_free_ports(7))
    runner = _Runner(isolate)
    runner.begin()
    server = Server(workdir=workdir, lib=lib, ports=ports, isolated=isolate, _runner=runner)
    atexit.register(server.stop)
    try:
        if isolate:
            server._forwarder = _Forwarder(runner, ports.dn_rpc)
        parent = os.getpid()
        for name, main in (("confignode", CONFIGNODE_MAIN), ("datanode", DATANODE_MAIN)):
            home = workdir / name
            conf = home / "conf"
            conf.mkdir(parents=True, exist_ok=True)
            (conf / CONFIG_FILE).write_text(_properties(ports, home))
            logback = logs / f"logback-{name}.xml"
            logback.write_text(_LOGBACK.format(log=logs / f"{name}.log"))
            cmd = _java_command(lib, main, home, conf, logback, heap, name == "confignode")
            with open(logs / f"{name}.out", "ab") as out:
                proc = runner.call(functools.partial(_spawn, cmd, home, out, parent))
            server._procs[name] = proc
            if name == "confignode":
                _wait(
                    server,
                    lambda: runner.call(lambda: _port_open("127.0.0.1", ports.cn_internal)),
                    t0 + timeout,
                    "ConfigNode internal port",
                )
        _wait(
            server,
            lambda: (
                runner.call(lambda: _port_open("127.0.0.1", ports.dn_rpc))
                and DATANODE_READY_LOG in (logs / "datanode.log").read_text(errors="replace")
            ),
            t0 + timeout,
            "DataNode set-up",
        )
        _wait(server, lambda: _try_session(server.host, server.port), t0 + timeout, "a session")
    except BaseException:
        server.stop(grace=5)
        raise
    server.startup_seconds = time.monotonic() - t0
    return server


def _wait(server: Server, ready: Callable[[], bool], deadline: float, what: str) -> None:
    while True:
        for name, proc in server._procs.items():
            if proc.poll() is not None:
                raise ServerError(
                    f"IoTDB {name} exited with code {proc.returncode} while waiting for {what}\n"
                    + _tail(server.logs / f"{name}.log")
                    + "\n"
                    + _tail(server.logs / f"{name}.out", 20)
                )
        try:
            if ready():
                return
        except OSError as e:
            if e.errno not in (errno.ENOENT, errno.ECONNREFUSED):
                raise
        if time.monotonic() > deadline:
            raise ServerError(
                f"IoTDB not ready ({what}) before the timeout\n"
                + "\n".join(_tail(server.logs / f"{n}.log") for n in server._procs)
            )
        time.sleep(0.25)


if __name__ == "__main__":  # python dev/iotdb/server.py [WORKDIR] [LIB]: start, report, wait
    import sys
    import tempfile

    wd = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="iotdb-"))
    lb = Path(sys.argv[2]) if len(sys.argv) > 2 else None
    srv = start(wd, lb)
    print(
        f"IoTDB up in {srv.startup_seconds:.1f}s at {srv.host}:{srv.port} "
        f"(isolated={srv.isolated}, pids={srv.pids}, workdir={srv.workdir}); Ctrl-C stops it",
        flush=True,
    )
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    finally:
        srv.stop()
