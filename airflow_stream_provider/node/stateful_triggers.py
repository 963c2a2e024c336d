"""The stream node's host of STATEFUL insert triggers: one instance of each, that every writer calls.

Writers reach it over a TCP port on 127.0.0.1 (written to ``node/triggers.json``), one JSON request
per line and one JSON answer per line; a connection starts with the node's token (``node/token``),
as Spark Connect's does. Requests: ``create`` (a new trigger: ``validate``, ``on_create``), ``drop``
(``on_drop``), ``fire`` (a tablet). When the node starts, it re-creates every registered stateful
trigger and calls its ``restore`` (IoTDB's restore on a DataNode restart).

Any local user can reach the port, so a client is held to limits until it shows the token: its
first line (the hello) is at most :data:`HELLO_BYTES` bytes and must arrive within
``AIRFLOW_STREAM_NODE_HELLO_TIMEOUT`` seconds (default 5), and at most
``AIRFLOW_STREAM_NODE_TRIGGER_CONNECTIONS`` connections (default 64) are open at once, each on a
thread of its own; a connection past the cap, or a hello that is too long, late, malformed or
without the token, gets one refusal line and is closed.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import socket
import socketserver
import threading

from airflow_stream_provider.files import write_json
from airflow_stream_provider.spark import endpoint
from airflow_stream_provider.streams import insert_triggers
from airflow_stream_provider.streams.insert_triggers import Entry, Instance, TriggerError
from airflow_stream_provider.streams.insert_triggers.instance import positive_setting

log = logging.getLogger(__name__)

#: the most bytes the first line of a connection (the hello, with the token) may hold
HELLO_BYTES = 4096


def hello_timeout() -> float:
    """Seconds a new connection has to send its hello (``AIRFLOW_STREAM_NODE_HELLO_TIMEOUT``, default 5)."""
    return positive_setting("AIRFLOW_STREAM_NODE_HELLO_TIMEOUT", "5", "seconds")


def connection_limit() -> int:
    """Connections open at once (``AIRFLOW_STREAM_NODE_TRIGGER_CONNECTIONS``, default 64)."""
    return int(positive_setting("AIRFLOW_STREAM_NODE_TRIGGER_CONNECTIONS", "64"))


class _Server(socketserver.ThreadingTCPServer):
    """A thread per connection, and no more than ``limit`` of them."""

    allow_reuse_address = True
    daemon_threads = True
    request_queue_size = 128  # the listen backlog: writers connecting at once are not made to retry

    def __init__(self, handler: type[socketserver.BaseRequestHandler], limit: int) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.limit = limit
        self.open = 0
        self._count = threading.Lock()

    def verify_request(self, request, client_address) -> bool:
        with self._count:
            if self.open < self.limit:
                self.open += 1
                return True
        with contextlib.suppress(OSError):
            request.settimeout(1)
            request.sendall(_line({"ok": False, "error": f"the stream node refused the trigger connection: too many "
                                                        f"connections ({self.limit}, "
                                                        "AIRFLOW_STREAM_NODE_TRIGGER_CONNECTIONS)"}))
        return False

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._count:
                self.open -= 1


class StatefulHost:
    def __init__(self, token: str | None = None) -> None:
        self.root = insert_triggers.folder().absolute()
        self.instances: dict[str, Instance] = {}
        self.broken: dict[str, str] = {}  # id -> why the instance could not be restored
        self._lock = threading.Lock()
        self._server: socketserver.ThreadingTCPServer | None = None
        self._token = token or endpoint.serving_token()

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> int:
        """Restore the registered stateful triggers, then serve; the port."""
        for entry in insert_triggers.TriggerRegistry(self.root).entries():
            if entry.stateful:
                try:
                    self.instances[entry.id] = Instance.create(entry, self.root, restoring=True)
                    log.info("stateful trigger %s restored", entry.name)
                except TriggerError as err:
                    self.broken[entry.id] = str(err)
                    log.warning("stateful trigger %s could not be restored: %s", entry.name, err)
        host = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                host._serve_connection(self.connection, self.rfile, self.wfile)

        self._server = _Server(Handler, connection_limit())
        port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, name="stateful-triggers", daemon=True).start()
        write_json(endpoint.folder() / "triggers.json", {"port": port})
        return port

    def stop(self) -> None:
        (endpoint.folder() / "triggers.json").unlink(missing_ok=True)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    # --- requests --------------------------------------------------------------------------------

    def _serve_connection(self, sock: socket.socket, rfile, wfile) -> None:
        why = self._refusal(sock, rfile)
        if why is not None:
            _send(wfile, {"ok": False, "error": f"the stream node refused the trigger connection: {why}"})
            return
        sock.settimeout(None)  # a writer keeps its connection open between writes
        _send(wfile, {"ok": True})
        while (request := _read(rfile)) is not None:
            if not isinstance(request, dict):
                _send(wfile, {"error": f"a request is a JSON object, not {type(request).__name__}"})
                continue
            try:
                answer = self.answer(request)
            except Exception as err:  # a bad request must not end the node's server
                answer = {"error": f"the stream node could not serve {request.get('op')!r}: {err}"}
            _send(wfile, answer)

    def _refusal(self, sock: socket.socket, rfile) -> str | None:
        """Why the connection's hello does not let it in; None when it carries the token."""
        deadline = hello_timeout()
        sock.settimeout(deadline)
        try:
            line = rfile.readline(HELLO_BYTES + 1)
        except TimeoutError:
            return f"no hello within {deadline:g} s (AIRFLOW_STREAM_NODE_HELLO_TIMEOUT)"
        except OSError as err:
            return f"the hello could not be read ({err})"
        if len(line) > HELLO_BYTES:
            return f"its first line is longer than {HELLO_BYTES} bytes"
        hello = _parse(line)
        given = hello.get("token") if isinstance(hello, dict) else None
        if not isinstance(given, str) or not hmac.compare_digest(given.encode(), self._token.encode()):
            return "its hello carries no token, or the wrong one"
        return None

    def answer(self, request: dict) -> dict:
        op = request.get("op")
        if op == "fire":
            return self.fire(request["id"], insert_triggers.tablet_from_json(request["tablet"]))
        if op == "create":
            return self._create(Entry.from_json(request["entry"]))
        if op == "drop":
            return self._drop(request["id"])
        return {"error": f"unknown request {op!r}"}

    def _create(self, entry: Entry) -> dict:
        try:
            instance = Instance.create(entry, self.root)
        except TriggerError as err:
            return {"error": str(err)}
        with self._lock:
            self.instances[entry.id] = instance
            self.broken.pop(entry.id, None)
        log.info("stateful trigger %s created", entry.name)
        return {"strategy": instance.strategy().value}

    def _drop(self, trigger_id: str) -> dict:
        with self._lock:
            instance = self.instances.pop(trigger_id, None)
            self.broken.pop(trigger_id, None)
        if instance is None:
            return {}
        log.info("stateful trigger %s dropped", instance.entry.name)
        error = instance.drop()
        return {"error": f"its {error}"} if error else {}

    def fire(self, trigger_id: str, tablet) -> dict:
        """Fire the node's instance of ``trigger_id`` (a writer's request, or the node's own follower of
        attached tables): {"error", "strategy", "timed_out"}."""
        instance = self.instances.get(trigger_id)
        if instance is not None and instance.hung:
            if instance.stuck:
                return {"error": "not fired: its fire of an earlier write has not returned yet", "timed_out": True,
                        "strategy": instance.strategy().value}
            instance = self._replace(instance)
        if instance is None:
            why = self.broken.get(trigger_id) or "the node holds no instance of it (created while the node was down?)"
            return {"error": why}
        error = instance.fire(tablet, insert_triggers.fire_timeout())  # an instance runs one fire at a time
        return {"error": error, "strategy": instance.strategy().value if error else None, "timed_out": instance.hung}

    def _replace(self, instance: Instance) -> Instance | None:
        """A fire that hung, once it has returned, is followed by a new instance (validate,
        on_create, restore: the state it had is what ``restore`` brings back)."""
        try:
            fresh = Instance.create(instance.entry, self.root, restoring=True)
        except TriggerError as err:
            self.broken[instance.entry.id] = str(err)
            self.instances.pop(instance.entry.id, None)
            return None
        self.instances[instance.entry.id] = fresh
        return fresh


def _parse(line: bytes) -> object:
    try:
        return json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None


def _read(rfile) -> object:
    """The next request of a client that showed the token; None when it closed or sent no JSON."""
    line = rfile.readline()
    return _parse(line) if line else None


def _line(payload: dict) -> bytes:
    return (json.dumps(payload) + "\n").encode()


def _send(wfile, payload: dict) -> None:
    with contextlib.suppress(OSError):
        wfile.write(_line(payload))
        wfile.flush()

