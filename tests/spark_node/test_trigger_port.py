"""The node's stateful-trigger port before a client shows the token: a bounded hello, read by a
deadline, from a bounded number of connections; anything else is refused with one clear line
(no JVM: the port's host runs in this process, as the node runs it)."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time

import pytest

from airflow_stream_provider.node.stateful_triggers import HELLO_BYTES, StatefulHost


@pytest.fixture
def port(tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(tmp_path))
    (tmp_path / "node").mkdir()
    monkeypatch.setenv("AIRFLOW_STREAM_NODE_HELLO_TIMEOUT", "2")
    monkeypatch.setenv("AIRFLOW_STREAM_NODE_TRIGGER_CONNECTIONS", "8")
    failures: list[str] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: failures.append(repr(args.exc_value)))
    host = StatefulHost("the-token")
    number = host.start()
    yield number
    host.stop()
    assert failures == []  # no handler thread ended in a traceback


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    return sock


def answer(sock: socket.socket) -> dict:
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return json.loads(data) if data else {}


def test_the_right_token_is_let_in_and_served(port):
    with connect(port) as sock:
        sock.sendall(b'{"token": "the-token"}\n')
        assert answer(sock) == {"ok": True}
        sock.sendall(b'{"op": "nothing"}\n')
        assert answer(sock) == {"error": "unknown request 'nothing'"}
        sock.sendall(b'["not", "an", "object"]\n')
        assert "a request is a JSON object" in answer(sock)["error"]


def test_a_hello_longer_than_the_limit_is_refused_without_reading_it_all(port):
    with connect(port) as sock:
        with contextlib.suppress(OSError):  # the node closed the connection while this was sent
            sock.sendall(b"x" * (HELLO_BYTES * 64))  # no newline: a reader without a limit waits for more
        refused = answer(sock)
    assert refused["ok"] is False and f"longer than {HELLO_BYTES} bytes" in refused["error"]


@pytest.mark.parametrize("hello", [b'["token"]\n', b'"the-token"\n', b'{"token": 7}\n', b"not json\n",
                                   b'{"token": "wrong"}\n'])
def test_a_malformed_or_wrong_hello_is_refused_cleanly(port, hello):
    with connect(port) as sock:
        sock.sendall(hello)
        refused = answer(sock)
    assert refused["ok"] is False and "refused the trigger connection" in refused["error"]


def test_a_client_that_says_nothing_is_closed_after_the_deadline(port):
    with connect(port) as sock:
        began = time.monotonic()
        refused = answer(sock)
        waited = time.monotonic() - began
    assert refused["ok"] is False and "no hello within 2 s" in refused["error"]
    assert 1.5 < waited < 6


def test_connections_past_the_cap_are_refused_at_once_and_threads_stay_bounded(port):
    before = threading.active_count()
    idle = [connect(port) for _ in range(8)]
    time.sleep(0.3)
    try:
        with connect(port) as extra:
            refused = answer(extra)
        assert refused["ok"] is False and "too many connections (8" in refused["error"]
        more = [connect(port) for _ in range(30)]
        time.sleep(0.3)
        assert threading.active_count() <= before + 8 + 2
        for sock in more:
            sock.close()
    finally:
        for sock in idle:
            sock.close()
    time.sleep(2.5)  # the idle ones have been closed by the deadline: a new client gets in
    with connect(port) as sock:
        sock.sendall(b'{"token": "the-token"}\n')
        assert answer(sock) == {"ok": True}


def test_a_stateful_fire_that_timed_out_is_not_waited_for_again_until_it_returns(tmp_path, monkeypatch):
    from airflow_stream_provider import model as m
    from airflow_stream_provider.streams.insert_triggers import Entry, tablet_json

    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(tmp_path))
    monkeypatch.setenv("AIRFLOW_STREAM_TRIGGER_TIMEOUT", "1")
    entry = Entry("id1", "slow", m.TriggerType.STATEFUL, m.TriggerEvent.AFTER_INSERT, m.SeriesPath(("root", "**")),
                  "tests.iotdb.trigger_files.hostile.HangingFire", None, None,
                  (("dir", str(tmp_path)), ("name", "slow")), m.FailureStrategy.OPTIMISTIC, "")
    host = StatefulHost("the-token")
    assert host.answer({"op": "create", "entry": entry.to_json()}) == {"strategy": "OPTIMISTIC"}
    tablet = tablet_json(m.Tablet("root.t.d1", (m.Measurement("s1", m.SeriesType.INT32),), (1,), ((1,),), (1000,)))
    first = host.answer({"op": "fire", "id": "id1", "tablet": tablet})
    assert first["error"] == "fire did not return within 1 s (AIRFLOW_STREAM_TRIGGER_TIMEOUT)" and first["timed_out"]
    began = time.monotonic()
    second = host.answer({"op": "fire", "id": "id1", "tablet": tablet})
    assert time.monotonic() - began < 0.5
    assert second == {"error": "not fired: its fire of an earlier write has not returned yet", "timed_out": True,
                      "strategy": "OPTIMISTIC"}
