"""Delivery of an outbox to a real HTTP endpoint by POST (a ``http.server`` in this process): every
message once and in order, ON_FAILURE_PAUSE holding through answers of 503 until the endpoint takes
them, redirects never followed, and the same ids when a message is sent again."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from airflow_stream_provider.notify import delivery
from airflow_stream_provider.notify.message import validate
from airflow_stream_provider.notify.outbox import Outbox
from airflow_stream_provider.sql import parse
from tests.notify.test_delivery import FAST, period_events


class Endpoint:
    """An HTTP server on 127.0.0.1 that records each POST body; ``refuse`` answers that many
    requests with 503 first, ``redirect`` answers every request with a 307 to another path."""

    def __init__(self, refuse: int = 0, redirect: bool = False) -> None:
        self.bodies: list[dict] = []
        self.paths: list[str] = []
        self.refused: list[str] = []  # the messageId of each refused POST
        self.refuse = refuse
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                owner.paths.append(self.path)
                if redirect:
                    self.send_response(307)
                    self.send_header("Location", "/elsewhere")
                elif owner.refuse > 0:
                    owner.refuse -= 1
                    owner.refused.append(json.loads(body)["messageId"])
                    self.send_response(503)
                else:
                    assert self.headers["Content-Type"] == "application/json"
                    owner.bodies.append(json.loads(body))
                    self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/notify"

    def __enter__(self) -> Endpoint:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(autouse=True)
def _fresh_pool():
    yield
    delivery.close_all()


def events(bodies: list[dict]) -> list[int]:
    return [e["result"]["n"] for b in bodies for s in b["streams"] for e in s["events"]]


def test_a_stream_may_notify_an_http_endpoint():
    (stmt,) = parse("CREATE STREAM s INTERVAL(1m) SLIDING(1m) FROM t NOTIFY('https://h:8443/hook') "
                    "ON (WINDOW_CLOSE) INTO o AS SELECT _twstart ts, count(*) n FROM %%trows")
    assert stmt.notify is not None and stmt.notify.urls == ("https://h:8443/hook",)


def test_every_message_is_posted_once_in_order(tmp_path):
    with Endpoint() as endpoint:
        box = Outbox(tmp_path / "outbox", [endpoint.url])
        box.enqueue(period_events(120), max_bytes=2000)
        report = delivery.deliver(box, pause=False, settings=FAST)
    assert report.sent_events == 120 and report.dropped_events == 0
    for body in endpoint.bodies:
        validate(body)
    assert events(endpoint.bodies) == list(range(120))
    assert len({b["messageId"] for b in endpoint.bodies}) == len(endpoint.bodies) == report.sent_messages > 1
    assert box.stats() == {"sent": 120, "dropped": 0, "pending": 0, "last_error": None}


def test_on_failure_pause_holds_through_refusals_and_resends_with_the_same_ids(tmp_path):
    with Endpoint(refuse=3) as endpoint:
        box = Outbox(tmp_path / "outbox", [endpoint.url])
        box.enqueue(period_events(5))
        report = delivery.deliver(box, pause=True, settings=FAST)
    assert report.retries >= 1 and report.dropped_events == 0
    assert events(endpoint.bodies) == list(range(5)) and box.stats()["pending"] == 0
    # the one message, refused three times, went with the same id each time
    assert endpoint.refused == [endpoint.bodies[0]["messageId"]] * 3 and len(endpoint.bodies) == 1


def test_without_the_option_a_refused_message_is_dropped_and_a_redirect_is_not_followed(tmp_path):
    with Endpoint(redirect=True) as endpoint:
        box = Outbox(tmp_path / "outbox", [endpoint.url])
        box.enqueue(period_events(4))
        report = delivery.deliver(box, pause=False, settings=FAST)
    assert (report.sent_events, report.dropped_events) == (0, 4)
    assert set(endpoint.paths) == {"/notify"}  # never /elsewhere
    assert "HTTP 307" in box.stats()["last_error"]
