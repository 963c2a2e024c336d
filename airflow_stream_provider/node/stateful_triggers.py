"""The stream node's host of STATEFUL insert triggers: one instance of each, that every writer calls.

Writers reach it over a TCP port on 127.0.0.1 (written to ``node/triggers.json``), one JSON request
per line and one JSON answer per line; a connection starts with the node's token (``node/token``),
as Spark Connect's does. Requests: ``create`` (a new trigger: ``validate``, ``on_create``), ``drop``
(``on_drop``), ``fire`` (a tablet). When the node starts, it re-creates every registered stateful
trigger and calls its ``restore`` (IoTDB's restore on a DataNode restart).
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import socketserver
import threading

from airflow_stream_provider.files import write_json
from airflow_stream_provider.spark import endpoint
from airflow_stream_provider.streams import insert_triggers
from airflow_stream_provider.streams.insert_triggers import Entry, Instance, TriggerError

log = logging.getLogger(__name__)


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
                host._serve_connection(self.rfile, self.wfile)

        socketserver.ThreadingTCPServer.allow_reuse_address = True
        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
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

    def _serve_connection(self, rfile, wfile) -> None:
        hello = _read(rfile)
        if hello is None or not hmac.compare_digest(str(hello.get("token", "")), self._token):
            _send(wfile, {"ok": False, "error": "the stream node refused the trigger connection: wrong token"})
            return
        _send(wfile, {"ok": True})
        while (request := _read(rfile)) is not None:
            try:
                answer = self.answer(request)
            except Exception as err:  # a bad request must not end the node's server
                answer = {"error": f"the stream node could not serve {request.get('op')!r}: {err}"}
            _send(wfile, answer)

    def answer(self, request: dict) -> dict:
        op = request.get("op")
        if op == "fire":
            return self._fire(request["id"], insert_triggers.tablet_from_json(request["tablet"]))
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

    def _fire(self, trigger_id: str, tablet) -> dict:
        instance = self.instances.get(trigger_id)
        if instance is None:
            why = self.broken.get(trigger_id) or "the node holds no instance of it (created while the node was down?)"
            return {"error": why}
        error = instance.fire(tablet, insert_triggers.fire_timeout())  # an instance runs one fire at a time
        if error and instance.hung:
            self._replace(instance)
        return {"error": error, "strategy": instance.strategy().value if error else None}

    def _replace(self, instance: Instance) -> None:
        """A fire that hung leaves its thread behind: later fires get a new instance (validate,
        on_create, restore: the state it had is what ``restore`` brings back)."""
        try:
            fresh = Instance.create(instance.entry, self.root, restoring=True)
        except TriggerError as err:
            self.broken[instance.entry.id] = str(err)
            self.instances.pop(instance.entry.id, None)
            return
        self.instances[instance.entry.id] = fresh


def _read(rfile) -> dict | None:
    line = rfile.readline()
    if not line:
        return None
    try:
        return json.loads(line)
    except json.JSONDecodeError:
        return None


def _send(wfile, payload: dict) -> None:
    with contextlib.suppress(OSError):
        wfile.write((json.dumps(payload) + "\n").encode())
        wfile.flush()

