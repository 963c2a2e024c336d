"""The HTTP servers of ``airflow-stream serve``: one for TDengine's interfaces (default port 6041),
one for IoTDB's REST API (default 18080), each a thread per connection (the standard library's
``ThreadingHTTPServer``, HTTP/1.1 with keep-alive), with a limit on request bodies, an access log in
``$AIRFLOW_STREAM_HOME/logs/serve.log``, and a clean stop on SIGTERM or SIGINT: the servers stop
accepting, the requests in flight finish, then the process exits. IoTDB's session protocol (the
``apache-iotdb`` ``Session``) is served on ``iotdb_session_port`` when one is set (IoTDB's is
6667; off by default), by :mod:`.iotdb_rpc_server`.

Settings come from ``[serve]`` of ``airflow-stream.toml`` (``host``, ``tdengine_port``,
``iotdb_port``, ``iotdb_session_port``, ``max_body_bytes``, and ``[serve.tdengine]``/``[serve.iotdb]`` with ``user`` and
``password``; ``[serve.tdengine]`` also ``child_table_name_tag``); the command's options win.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from airflow_stream_provider import config
from airflow_stream_provider.serve.auth import Tokens, credentials
from airflow_stream_provider.serve.exchange import Request, Response, json_response
from airflow_stream_provider.serve.iotdb import IoTDBService
from airflow_stream_provider.serve.tdengine import TDengineService
from airflow_stream_provider.warehouse import Warehouse

log = logging.getLogger(__name__)
access = logging.getLogger(__name__ + ".access")

DEFAULT_MAX_BODY = 64 * 1024 * 1024
IDLE_TIMEOUT_S = 30
#: query parameters that carry secrets, left out of the access log
_SECRET_PARAMS = ("p", "token", "password")


@dataclass(frozen=True)
class Settings:
    host: str = "127.0.0.1"
    tdengine_port: int = 6041
    iotdb_port: int = 18080
    iotdb_session_port: int = 0
    max_body: int = DEFAULT_MAX_BODY
    tdengine: dict | None = None
    iotdb: dict | None = None

    @classmethod
    def read(cls, **overrides: Any) -> Settings:
        """``[serve]`` of ``airflow-stream.toml``, with the options that are not None over it."""
        table = config.settings().get("serve", {})
        if not isinstance(table, dict):
            raise ValueError("[serve] of airflow-stream.toml must be a table")
        values = {"host": table.get("host", cls.host), "tdengine_port": table.get("tdengine_port", cls.tdengine_port),
                  "iotdb_port": table.get("iotdb_port", cls.iotdb_port),
                  "iotdb_session_port": table.get("iotdb_session_port", cls.iotdb_session_port),
                  "max_body": table.get("max_body_bytes", cls.max_body),
                  "tdengine": table.get("tdengine", {}), "iotdb": table.get("iotdb", {})}
        values.update({k: v for k, v in overrides.items() if v is not None})
        for key in ("tdengine_port", "iotdb_port", "iotdb_session_port", "max_body"):
            if not isinstance(values[key], int) or isinstance(values[key], bool) or values[key] < 0:
                raise ValueError(f"[serve] {key} must be a whole number, not {values[key]!r}")
        return cls(**values)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "airflow-stream"
    #: seconds an idle keep-alive connection (or a slow sender) is kept before it is closed
    timeout = IDLE_TIMEOUT_S
    #: the headers and the body of an answer go out as two writes: without TCP_NODELAY the body
    #: would wait for the client's delayed acknowledgement of the headers (some 40 ms a request)
    disable_nagle_algorithm = True
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.opened(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.closed(self.connection)

    def _serve(self) -> None:
        started = time.perf_counter()
        response = self._answer()
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.end_headers()
        if response.body and self.command != "HEAD":
            self.wfile.write(response.body)
        access.info("%s %s %s %d %d %.1fms%s", self.client_address[0], self.command, _shown(self.path),
                    response.status, len(response.body), (time.perf_counter() - started) * 1000,
                    f" {response.note}" if response.note else "")

    def _answer(self) -> Response:
        try:
            body = self._body()
        except _TooLarge as err:
            self.close_connection = True
            return json_response(413, self.server.too_large(str(err)))
        except ValueError as err:
            self.close_connection = True
            return json_response(400, {"code": 400, "message": str(err)})
        request = Request.of(self.command, self.path, dict(self.headers.items()), body)
        try:
            return self.server.handle(request)
        except Exception:  # one bad request must not take the server down: logged, answered 500
            log.exception("%s %s failed", self.command, _shown(self.path))
            return json_response(500, {"code": 500, "message": "internal error; see the server's log"})

    def _body(self) -> bytes:
        limit = self.server.max_body
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            return self._chunked(limit)
        length = self.headers.get("Content-Length")
        if not length:
            return b""
        if not length.isdigit():
            raise ValueError("Content-Length is not a number")
        if int(length) > limit:
            raise _TooLarge(f"the body of {length} bytes is larger than the limit of {limit}")
        body = self.rfile.read(int(length))
        if len(body) < int(length):  # the client went away (or the server is stopping): nothing is run
            raise ValueError(f"the body ended after {len(body)} of its {length} bytes")
        return body

    def _chunked(self, limit: int) -> bytes:
        parts: list[bytes] = []
        size = 0
        while True:
            line = self.rfile.readline(1024).split(b";")[0].strip()
            try:
                chunk = int(line, 16)
            except ValueError:
                raise ValueError("a chunk size is not hexadecimal") from None
            if chunk == 0:
                while self.rfile.readline(1024).strip():
                    pass
                return b"".join(parts)
            size += chunk
            if size > limit:
                raise _TooLarge(f"the body is larger than the limit of {limit} bytes")
            part = self.rfile.read(chunk)
            if len(part) < chunk:
                raise ValueError("the body ended inside a chunk")
            parts.append(part)
            self.rfile.readline(8)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _serve

    def log_message(self, format: str, *args: Any) -> None:  # the access log above says it once
        log.debug(format, *args)


class _TooLarge(ValueError):
    pass


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # a stop waits for the requests in flight
    block_on_close = True

    def __init__(self, address: tuple[str, int], handle: Callable[[Request], Response], max_body: int,
                 too_large: Callable[[str], dict]) -> None:
        self.handle = handle
        self.max_body = max_body
        self.too_large = too_large
        self._connections: set[socket.socket] = set()
        self._lock = threading.Lock()
        super().__init__(address, _Handler)

    def opened(self, connection: socket.socket) -> None:
        with self._lock:
            self._connections.add(connection)

    def closed(self, connection: socket.socket) -> None:
        with self._lock:
            self._connections.discard(connection)

    def hang_up(self) -> None:
        """End the reading side of every open connection: an idle keep-alive connection ends at
        once, a request being answered still writes its answer."""
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RD)


def _shown(target: str) -> str:
    path, _, query = target.partition("?")
    if not query:
        return path
    kept = [part if part.split("=")[0] not in _SECRET_PARAMS else part.split("=")[0] + "=***"
            for part in query.split("&")]
    return path + "?" + "&".join(kept)


def _url(server: _Server) -> str:
    host, port = server.server_address[:2]
    return f"http://{host.decode() if isinstance(host, bytes) else host}:{port}"


@dataclass
class Running:
    """The servers of one :func:`start`, with the URLs they serve."""

    servers: list[Any]  # the HTTP servers and the session protocol's, all socketserver servers
    threads: list[threading.Thread]
    urls: dict[str, str]

    def stop(self) -> None:
        for server in self.servers:
            server.shutdown()
        for server in self.servers:
            server.hang_up()
            server.server_close()
        for thread in self.threads:
            thread.join(timeout=30)


def start(settings: Settings, warehouse: Callable[[str | None], Warehouse]) -> Running:
    """Start the servers in threads of this process (a port of 0 leaves that protocol out)."""
    max_body = settings.max_body
    servers: list[tuple[str, _Server]] = []
    if settings.tdengine_port:
        tdengine = TDengineService(warehouse, credentials("tdengine", settings.tdengine or {}, settings.host),
                                   Tokens(), (settings.tdengine or {}).get("child_table_name_tag"), max_body)
        servers.append(("tdengine", _Server((settings.host, settings.tdengine_port), tdengine.handle, max_body,
                                            lambda message: {"code": 0x1104, "desc": message})))
    if settings.iotdb_port:
        iotdb = IoTDBService(lambda: warehouse(None), credentials("iotdb", settings.iotdb or {}, settings.host))
        servers.append(("iotdb", _Server((settings.host, settings.iotdb_port), iotdb.handle, max_body,
                                         lambda message: {"code": 413, "message": message})))
    sessions = _session_server(settings, warehouse)
    threads = []
    for name, server in servers + sessions:
        thread = threading.Thread(target=server.serve_forever, name=f"serve-{name}", daemon=True)
        thread.start()
        threads.append(thread)
    urls = {name: _url(server) for name, server in servers}
    urls.update({name: "{}:{}".format(*server.server_address[:2]) for name, server in sessions})
    return Running([s for _, s in servers + sessions], threads, urls)


def _session_server(settings: Settings, warehouse: Callable[[str | None], Warehouse]) -> list[tuple[str, Any]]:
    """IoTDB's session protocol, when its port is set (Thrift and the generated service come with
    the ``apache-iotdb`` package, imported only then)."""
    if not settings.iotdb_session_port:
        return []
    try:
        from airflow_stream_provider.serve.iotdb_rpc_server import RpcServer
        from airflow_stream_provider.serve.iotdb_session import SessionService
    except ImportError as err:
        raise ValueError(f"serving IoTDB's session protocol needs the apache-iotdb package "
                         f"(pip install 'airflow-stream-provider[iotdb-session]'): {err}") from None
    service = SessionService(lambda: warehouse(None), credentials("iotdb", settings.iotdb or {}, settings.host))
    return [("iotdb-session", RpcServer((settings.host, settings.iotdb_session_port), service, settings.max_body))]


def warehouses(spark: Callable[[], Any] | None = None, root: Path | None = None) -> Callable[[str | None], Warehouse]:
    """A warehouse for each request, with the request's database, sharing one Spark session (the
    stream node's when it runs, else one in this process, made on the first query)."""
    if spark is None:
        from airflow_stream_provider.spark.session import spark_session

        spark = functools.cache(spark_session)
    return lambda database: Warehouse(root, spark=spark, database=database)


@contextmanager
def access_log(folder: Path) -> Iterator[Path]:
    """Send the access log and the servers' errors to ``folder/serve.log`` for the block."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "serve.log"
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    logger = logging.getLogger("airflow_stream_provider.serve")
    logger.addHandler(handler)
    previous = logger.level
    logger.setLevel(logging.INFO)
    try:
        yield path
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)
        handler.close()


def serve_until_stopped(settings: Settings, say: Callable[[str], None] = print) -> int:
    """``airflow-stream serve``: start, print the URLs, and stop cleanly on SIGTERM or SIGINT."""
    from airflow_stream_provider import streams  # noqa: F401  (insert triggers fire on the writes)

    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    with access_log(config.home() / "logs") as path:
        running = start(settings, warehouses())
        for name, url in running.urls.items():
            say(f"serving {name} at {url}")
        say(f"access log: {path}")
        log.info("serving %s", ", ".join(f"{n} at {u}" for n, u in running.urls.items()))
        stopping.wait()
        say("stopping: finishing the requests in flight")
        running.stop()
        log.info("stopped")
    return 0
