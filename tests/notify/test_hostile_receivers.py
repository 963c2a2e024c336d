"""Receivers that misbehave on purpose, as raw-socket servers on 127.0.0.1 and 127.0.0.2: one that
announces a huge frame and trickles it, one that floods, one that redirects to another host.
Delivery must stay bounded in time and memory, and credentials must stay with their host."""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import struct
import threading
import time
import tracemalloc
from collections.abc import Callable

import pytest

from airflow_stream_provider.hooks import bind
from airflow_stream_provider.notify import delivery
from airflow_stream_provider.notify.message import NotifyEvent
from airflow_stream_provider.notify.outbox import Outbox

TIMEOUT = 1.5
#: the most memory one delivery may take while a receiver announces 100 MB or 1 GiB frames; generous,
#: because tracemalloc also counts what other threads of the test process (a Spark gateway) allocate
PEAK = 64 * 2**20
SETTINGS = delivery.Settings(timeout=TIMEOUT, max_backoff=0.2, conn_ids=())
GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def events(n: int) -> list[NotifyEvent]:
    return [NotifyEvent(stream="s1", key=f"k{i}", table_name="s1_0", event_type="ON_TIME",
                        event_time=1_700_000_000_000 + i, trigger_id=f"k{i}", trigger_type="Period", group_id="0",
                        fields={}, result={"n": i}) for i in range(n)]


class RawServer:
    """A TCP server that reads the HTTP request of each connection, records its headers, and
    hands the socket to ``behave`` (after a 101 answer, unless ``behave`` answers itself)."""

    def __init__(self, behave: Callable[[socket.socket, dict[str, str]], None], host: str = "127.0.0.1",
                 upgrade: bool = True) -> None:
        self.behave, self.upgrade = behave, upgrade
        self.requests: list[dict[str, str]] = []
        self.stop = threading.Event()
        self.listener = socket.create_server((host, 0))
        self.listener.settimeout(0.1)
        self.host, self.port = host, self.listener.getsockname()[1]
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    @property
    def url(self) -> str:
        return f"ws://{self.host}:{self.port}/notify"

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self.threads.append(t)
            t.start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                head = b""
                while b"\r\n\r\n" not in head:
                    chunk = conn.recv(4096)
                    if not chunk:
                        return
                    head += chunk
                lines = head.split(b"\r\n\r\n")[0].decode().split("\r\n")
                headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
                self.requests.append(headers)
                if self.upgrade:
                    accept = base64.b64encode(hashlib.sha1((headers["sec-websocket-key"] + GUID).encode()).digest())
                    conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                                 b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n")
                self.behave(conn, headers)
            except OSError:
                pass  # the sender hung up, which is what these tests want

    def close(self) -> None:
        self.stop.set()
        self.listener.close()
        for t in self.threads:
            t.join(1)  # daemon threads: a sender that hung up ends them soon enough


def text_header(length: int, fin: bool = True, opcode: int = 1) -> bytes:
    return bytes([(0x80 if fin else 0) | opcode, 127]) + struct.pack("!Q", length)


def slow(conn: socket.socket, _headers: dict) -> None:
    """Announce a 100 MB text frame, then trickle one byte at a time, never answering the ping."""
    conn.sendall(text_header(100_000_000))
    while True:
        conn.sendall(b"x")
        time.sleep(0.1)


def flood(conn: socket.socket, _headers: dict) -> None:
    """Announce a 1 GiB frame and send it as fast as the socket takes it."""
    conn.sendall(text_header(1 << 30))
    block = b"x" * 65536
    while True:
        conn.sendall(block)


def fragments(conn: socket.socket, _headers: dict) -> None:
    """An endless text message in small fragments, each under any frame cap."""
    conn.sendall(bytes([0x01, 126]) + struct.pack("!H", 60_000) + b"x" * 60_000)
    block = bytes([0x00, 126]) + struct.pack("!H", 60_000) + b"x" * 60_000
    while True:
        conn.sendall(block)


@pytest.fixture
def servers():
    made: list[RawServer] = []

    def make(behave, host: str = "127.0.0.1", upgrade: bool = True) -> RawServer:
        made.append(RawServer(behave, host, upgrade))
        return made[-1]

    yield make
    delivery.close_all()
    for server in made:
        server.close()


def _deliver_measured(box: Outbox, **kwargs) -> tuple[float, int, object]:
    tracemalloc.start()
    started = time.monotonic()
    try:
        result: object = delivery.deliver(box, settings=SETTINGS, sleep=lambda s: None, **kwargs)
    except delivery.DeliveryPaused as err:
        result = err
    elapsed = time.monotonic() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return elapsed, peak, result


@pytest.mark.parametrize("behave", [slow, flood, fragments])
def test_a_hostile_receiver_costs_bounded_time_and_memory_and_messages_are_dropped(tmp_path, servers, behave):
    server = servers(behave)
    box = Outbox(tmp_path / "outbox", [server.url])
    box.enqueue(events(3))
    elapsed, peak, report = _deliver_measured(box, pause=False)
    assert isinstance(report, delivery.DeliveryReport) and report.dropped_events == 3
    # one try and one fresh try, each within the deadline
    assert elapsed < 2 * TIMEOUT + 2, elapsed
    assert peak < PEAK, peak  # the receiver announced 100 MB or 1 GiB
    error = box.stats()["last_error"]
    assert "no confirmation within 1.5s" in error or "frame of" in error, error


@pytest.mark.parametrize("behave", [slow, flood])
def test_on_failure_pause_keeps_the_messages_of_a_hostile_receiver(tmp_path, servers, behave):
    server = servers(behave)
    box = Outbox(tmp_path / "outbox", [server.url])
    box.enqueue(events(4))
    elapsed, peak, result = _deliver_measured(box, pause=True, give_up_after=2 * TIMEOUT)
    assert isinstance(result, delivery.DeliveryPaused)
    assert elapsed < 3 * TIMEOUT + 3 and peak < PEAK, (elapsed, peak)
    assert box.stats()["pending"] == 4 and box.stats()["dropped"] == 0


def test_a_big_frame_ends_the_connection_before_its_payload_is_read(tmp_path, servers):
    server = servers(flood)
    rec = delivery.Receiver(server.url, delivery.Access(), timeout=30)
    started = time.monotonic()
    with pytest.raises(delivery.ReceiverError, match=f"frame of {1 << 30} bytes"):
        rec.send(["{}"])
    assert time.monotonic() - started < 5  # refused at the header, long before the 30 s deadline


def test_closing_a_connection_to_a_trickling_receiver_takes_about_a_second(servers):
    def trickle_small(conn: socket.socket, _headers: dict) -> None:
        conn.sendall(bytes([0x81, 126]) + struct.pack("!H", 60_000))  # under the cap, sent 1 byte at a time
        while True:
            conn.sendall(b"x")
            time.sleep(0.1)

    server = servers(trickle_small)
    rec = delivery.Receiver(server.url, delivery.Access(), timeout=30)
    rec._connect()
    started = time.monotonic()
    rec.close()  # the closing handshake reads frames until the peer's close: 60,000 bytes at 10/s
    assert time.monotonic() - started < 3


# --- credentials -------------------------------------------------------------------------


def _conn(monkeypatch, **fields) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_STREAM_WS_HOSTILE_TEST", json.dumps({"conn_type": "stream_ws", **fields}))


@pytest.fixture
def with_connection():
    bind()
    yield delivery.Settings(timeout=TIMEOUT, max_backoff=0.2, conn_ids=("stream_ws_hostile_test",))


def test_a_redirect_is_not_followed_and_credentials_stay_with_their_host(tmp_path, servers, monkeypatch,
                                                                           with_connection):
    other = servers(lambda conn, h: None, host="127.0.0.2")

    def redirect(conn: socket.socket, _headers: dict) -> None:
        conn.sendall(f"HTTP/1.1 302 Found\r\nLocation: {other.url}\r\nContent-Length: 0\r\n\r\n".encode())

    first = servers(redirect, upgrade=False)
    _conn(monkeypatch, host="127.0.0.1", port=first.port, login="alice", password="s3cret-for-A-only",
          extra={"allow_plaintext": True})
    box = Outbox(tmp_path / "outbox", [first.url])
    box.enqueue(events(2))
    report = delivery.deliver(box, pause=False, settings=with_connection)
    assert report.dropped_events == 2 and report.sent_events == 0
    assert "Redirect" in box.stats()["last_error"]
    assert first.requests and all(r["authorization"].startswith("Basic ") for r in first.requests)
    assert other.requests == []  # never contacted, so never given the credentials


def test_credentials_without_a_host_are_refused(tmp_path, servers, monkeypatch, with_connection):
    server = servers(lambda conn, h: None)
    _conn(monkeypatch, password="token-for-anyone")
    box = Outbox(tmp_path / "outbox", [server.url])
    box.enqueue(events(1))
    with pytest.raises(delivery.CredentialsRefused, match="names no host"):
        delivery.deliver(box, pause=False, settings=with_connection)
    assert server.requests == [] and box.stats()["pending"] == 1
    _conn(monkeypatch, extra={"verify": True})  # no credentials: serving every host is fine
    assert delivery.access_for(server.url, with_connection.conn_ids).headers == ()


def test_credentials_go_over_plaintext_only_when_the_connection_allows_it(tmp_path, servers, monkeypatch,
                                                                          with_connection):
    server = servers(lambda conn, h: None)
    _conn(monkeypatch, host="127.0.0.1", login="alice", password="pw")
    box = Outbox(tmp_path / "outbox", [server.url])
    box.enqueue(events(1))
    with pytest.raises(delivery.CredentialsRefused, match="only over wss://.*allow_plaintext"):
        delivery.deliver(box, pause=False, settings=with_connection)
    assert server.requests == []
    secure = delivery.access_for(f"wss://127.0.0.1:{server.port}/n", with_connection.conn_ids)
    assert secure.headers == ("Authorization: Basic YWxpY2U6cHc=",)  # alice:pw, over TLS
    _conn(monkeypatch, host="127.0.0.1", login="alice", password="pw", extra={"allow_plaintext": True})
    assert delivery.access_for(server.url, with_connection.conn_ids).headers == ("Authorization: Basic YWxpY2U6cHc=",)


def test_errors_show_no_user_password_nor_query():
    assert delivery._safe("ws://admin:s3cret@h:1/p?t=1") == "ws://h:1/p"
    assert delivery._safe("wss://[::1]:8/x") == "wss://[::1]:8/x"
