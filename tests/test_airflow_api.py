"""The Airflow API client's answer to a busy Airflow: Airflow 3 refuses a backfill with 503 while
its SQLite database is locked by other writers, and creates nothing; the client sends it again.
A small HTTP server on 127.0.0.1 plays the api-server's part, answering as Airflow does."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from airflow_stream_provider.airflow_api import AirflowApi, AirflowApiError

BUSY = {"detail": "Database is locked. Backfill creation is not supported on SQLite under concurrent access. "
                  "Please use PostgreSQL or MySQL."}


def reply(handler: BaseHTTPRequestHandler, status: int, body: dict) -> None:
    """Answer a request with ``body`` as JSON, as the api-server does."""
    data = json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


class Quiet(BaseHTTPRequestHandler):
    """A handler that does not print a line per request."""

    def log_message(self, *args: Any) -> None:
        pass


def serve(handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    """``handler`` served on a free port of 127.0.0.1, in a thread of its own."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def server(answers: list[tuple[int, dict]],
           requests: list[tuple[str, str, str]] | None = None) -> tuple[ThreadingHTTPServer, list[dict]]:
    """An HTTP server on 127.0.0.1 answering each POST with the next of ``answers``; the bodies it
    received, and in ``requests`` each request's method, path and Authorization header."""
    received: list[dict] = []

    class Handler(Quiet):
        def do_POST(self) -> None:
            if requests is not None:
                requests.append(("POST", self.path, self.headers.get("Authorization", "")))
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            reply(self, *answers.pop(0))


    return serve(Handler), received


def test_a_busy_airflow_gets_the_backfill_again():
    httpd, received = server([(503, BUSY), (503, BUSY), (200, {"id": 7})])
    try:
        api = AirflowApi(f"http://127.0.0.1:{httpd.server_port}", token="t")
        start, end = datetime(2025, 1, 1, tzinfo=UTC), datetime(2025, 1, 2, tzinfo=UTC)
        assert api.create_backfill("d", start, end) == {"id": 7}
        assert len(received) == 3 and received[0] == received[2]
        assert received[0]["from_date"] == "2025-01-01T00:00:00+00:00"
    finally:
        httpd.shutdown()


def test_other_refusals_and_a_lasting_503_are_reported():
    httpd, received = server([(409, {"detail": "running"}), (503, BUSY), (503, BUSY)])
    try:
        api = AirflowApi(f"http://127.0.0.1:{httpd.server_port}", token="t")
        start, end = datetime(2025, 1, 1, tzinfo=UTC), datetime(2025, 1, 2, tzinfo=UTC)
        with pytest.raises(AirflowApiError) as info:
            api.create_backfill("d", start, end)
        assert info.value.status == 409 and len(received) == 1  # not sent again
        with pytest.raises(AirflowApiError, match="Database is locked") as info:
            api.create_backfill("d", start, end, attempts=2)
        assert info.value.status == 503 and len(received) == 3
    finally:
        httpd.shutdown()


def stalling_server(stalls: int, stall_s: float) -> tuple[ThreadingHTTPServer, list[str]]:
    """An HTTP server on 127.0.0.1 whose first ``stalls`` requests answer only after ``stall_s``
    seconds, as a busy api-server does, and the others at once; each request's method and path."""
    seen: list[str] = []

    class Handler(Quiet):
        def answer(self) -> None:
            seen.append(f"{self.command} {self.path}")
            if len(seen) <= stalls:
                time.sleep(stall_s)
            reply(self, 200, {"id": len(seen)})

        do_PATCH = do_POST = answer


    return serve(Handler), seen


def test_a_pause_is_sent_again_when_airflow_answers_too_late():
    httpd, seen = stalling_server(stalls=1, stall_s=2.0)
    try:
        api = AirflowApi(f"http://127.0.0.1:{httpd.server_port}", token="t", timeout=0.5)
        assert api.set_paused("d", True) is True
        assert seen == ["PATCH /api/v2/dags/d", "PATCH /api/v2/dags/d"]
    finally:
        httpd.shutdown()


def test_a_pause_that_never_gets_an_answer_says_so_and_a_post_is_not_sent_twice():
    httpd, seen = stalling_server(stalls=10, stall_s=1.5)
    try:
        api = AirflowApi(f"http://127.0.0.1:{httpd.server_port}", token="t", timeout=0.3)
        with pytest.raises(AirflowApiError, match=r"not reachable: timed out \(sent 3 time\(s\), 0.3 s each\)") as info:
            api.set_paused("d", True)
        assert info.value.timed_out and len(seen) == 3
        # a backfill that timed out may have been created: it is not created a second time
        with pytest.raises(AirflowApiError, match=r"timed out \(sent 1 time\(s\)"):
            api.create_backfill("d", datetime(2025, 1, 1, tzinfo=UTC), datetime(2025, 1, 2, tzinfo=UTC))
        assert seen[3:] == ["POST /api/v2/backfills"]
    finally:
        httpd.shutdown()
