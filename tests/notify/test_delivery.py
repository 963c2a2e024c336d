"""Delivery of an outbox to real WebSocket receivers (``airflow-stream receive`` processes)."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from airflow_stream_provider.hooks import bind
from airflow_stream_provider.notify import delivery
from airflow_stream_provider.notify.message import NotifyEvent, validate
from airflow_stream_provider.notify.outbox import Outbox
from tests.notify.conftest import events_of

FAST = delivery.Settings(timeout=5.0, max_backoff=1.0, conn_ids=())


def period_events(n: int, stream: str = "s1", start: int = 0) -> list[NotifyEvent]:
    return [NotifyEvent(stream=stream, key=f"0:{i}", table_name=f"{stream}_0", event_type="ON_TIME",
                        event_time=1_700_000_000_000 + i * 1000, trigger_id=f"0:{i}", trigger_type="Period",
                        group_id="0", fields={}, result={"n": i}) for i in range(start, start + n)]


@pytest.fixture(autouse=True)
def _fresh_pool():
    yield
    delivery.close_all()


def test_three_receivers_get_every_message_in_order(tmp_path, receivers):
    recs = [receivers() for _ in range(3)]
    box = Outbox(tmp_path / "outbox", [r.url for r in recs])
    box.enqueue(period_events(200), max_bytes=4000)
    report = delivery.deliver(box, pause=False, settings=FAST)
    assert report.sent_events == 3 * 200 and report.dropped_events == 0
    for rec in recs:
        msgs = rec.messages()
        for msg in msgs:
            validate(msg)
        assert [ev["result"]["n"] for ev in events_of(msgs)] == list(range(200))
    assert [m["messageId"] for m in recs[0].messages()] == [m["messageId"] for m in recs[2].messages()]
    stats = box.stats()
    assert stats == {"sent": 600, "dropped": 0, "pending": 0, "last_error": None}


def test_a_rebuilt_event_is_not_queued_twice_and_keeps_its_message_id(tmp_path):
    box = Outbox(tmp_path / "outbox", ["ws://127.0.0.1:9/x"])
    first = box.enqueue(period_events(5), now_ms=1)
    assert len(first) == 1 and first[0].events == 5
    assert box.enqueue(period_events(5), now_ms=2) == []  # a rerun after a kill: nothing new
    again = box.enqueue(period_events(7), now_ms=3)  # two new events join
    assert again[0].events == 2
    other = Outbox(tmp_path / "other", ["ws://127.0.0.1:9/x"]).enqueue(period_events(5), now_ms=99)
    assert other[0].message_id == first[0].message_id  # derived from the events, not the time


def window_events(batches: list[int], stream: str = "s1") -> list[NotifyEvent]:
    """One WINDOW_CLOSE per detector batch, keyed as a stream's window events are."""
    return [NotifyEvent(stream=stream, key=f"{b}:0", table_name=f"{stream}_0", event_type="WINDOW_CLOSE",
                        event_time=1_700_000_000_000 + b, trigger_id=f"w{b}", trigger_type="Count", group_id="0",
                        fields={"windowStart": b, "windowEnd": b + 1}, batch=b) for b in batches]


def test_window_events_of_consumed_batches_are_never_queued_again(tmp_path, receivers):
    rec = receivers()
    box = Outbox(tmp_path / "outbox", [rec.url])
    box.enqueue(window_events([7, 11]), now_ms=1)
    box.enqueue(window_events([7, 11, 14, 20]), now_ms=2)
    delivery.deliver(box, pause=False, settings=FAST)
    # a commit of less than was delivered: the message holding batch 20 stays, so 14 and 20 are
    # still found waiting when the next run reads them again
    assert box.prune(consumed_batch=13) == 1
    assert [q.events for q in box.enqueue(window_events([14, 20, 24]), now_ms=3)] == [1]
    delivery.deliver(box, pause=False, settings=FAST)
    assert box.prune(consumed_batch=24) == 2
    # a run that read the progress before batch 24 was consumed queues after the commit: nothing
    assert box.enqueue(window_events([20, 24]), now_ms=4) == []
    assert box.enqueue(window_events([25]), now_ms=5)[0].events == 1
    delivery.deliver(box, pause=False, settings=FAST)
    assert [ev["triggerId"] for ev in events_of(rec.messages())] == ["w7", "w11", "w14", "w20", "w24", "w25"]
    assert box.prune() == 0  # delivered, and batch 25 not yet consumed: it stays
    assert box.prune(consumed_batch=25) == 1


def test_on_failure_pause_waits_for_a_receiver_that_comes_up(tmp_path, receivers):
    rec = receivers(start=False)
    box = Outbox(tmp_path / "outbox", [rec.url])
    box.enqueue(period_events(300), max_bytes=2000)
    result: dict = {}

    def run() -> None:
        result["report"] = delivery.deliver(box, pause=True, settings=FAST)

    sender = threading.Thread(target=run)
    sender.start()
    time.sleep(2.5)
    assert sender.is_alive(), "ON_FAILURE_PAUSE must hold while the receiver is down"
    assert box.stats()["pending"] == 300
    rec.start()
    sender.join(60)
    assert not sender.is_alive()
    report = result["report"]
    assert report.retries >= 1 and report.dropped_events == 0
    got = [ev["result"]["n"] for ev in events_of(rec.messages())]
    assert got == list(range(300))  # every event, in order, none lost
    assert box.stats()["dropped"] == 0 and box.stats()["pending"] == 0


def test_without_the_option_failed_sends_are_dropped_and_counted(tmp_path, receivers):
    rec = receivers(start=False)
    box = Outbox(tmp_path / "outbox", [rec.url])
    box.enqueue(period_events(40))
    report = delivery.deliver(box, pause=False, settings=FAST)
    assert (report.sent_events, report.dropped_events) == (0, 40)
    stats = box.stats()
    assert stats["dropped"] == 40 and stats["pending"] == 0 and "ConnectionRefused" in stats["last_error"]
    rec.start()
    box.enqueue(period_events(10, start=40))
    report = delivery.deliver(box, pause=False, settings=FAST)
    assert report.sent_events == 10
    assert [ev["result"]["n"] for ev in events_of(rec.messages())] == list(range(40, 50))


def test_on_failure_pause_gives_up_only_when_told(tmp_path):
    box = Outbox(tmp_path / "outbox", ["ws://127.0.0.1:9/nobody"])
    box.enqueue(period_events(3))
    with pytest.raises(delivery.DeliveryPaused, match="1 message"):
        delivery.deliver(box, pause=True, settings=FAST, give_up_after=1.5)
    assert box.stats()["pending"] == 3 and box.stats()["dropped"] == 0


def test_oversized_batches_are_split(tmp_path, receivers):
    rec = receivers()
    box = Outbox(tmp_path / "outbox", [rec.url])
    big = [NotifyEvent(stream="s1", key=f"k{i}", table_name="t", event_type="ON_TIME", event_time=1,
                       trigger_id=f"k{i}", trigger_type="Period", group_id="0", fields={},
                       result={"text": "x" * 300, "i": i})
           for i in range(60)]
    queued = box.enqueue(big, max_bytes=2048)
    assert len(queued) > 10
    delivery.deliver(box, pause=False, settings=FAST)
    texts = rec.texts()
    assert len(texts) == len(queued)
    assert all(len(t.encode()) <= 2048 for t in texts)
    assert [ev["result"]["i"] for ev in events_of(rec.messages())] == list(range(60))


_SENDER = """
import sys
from airflow_stream_provider.notify import delivery
from airflow_stream_provider.notify.outbox import Outbox
box = Outbox(sys.argv[1], [sys.argv[2]])
delivery.deliver(box, pause=True, settings=delivery.Settings(timeout=5, max_backoff=1, conn_ids=()))
"""


def test_a_sender_killed_mid_delivery_resends_with_identical_ids(tmp_path, receivers):
    rec = receivers()
    box = Outbox(tmp_path / "outbox", [rec.url])
    queued = box.enqueue(period_events(6000), max_bytes=400)  # a few events per message
    ids = [q.message_id for q in queued]
    sender = subprocess.Popen([sys.executable, "-c", _SENDER, str(box.directory), rec.url])
    deadline = time.monotonic() + 60
    while len(rec.texts()) < len(ids) // 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    os.kill(sender.pid, signal.SIGKILL)
    sender.wait(10)
    assert box.stats()["pending"] > 0, "the kill came too late to interrupt the delivery"
    delivery.deliver(box, pause=True, settings=FAST)  # the restart
    received = rec.messages()
    by_id: dict[str, set[str]] = {}
    for msg in received:
        by_id.setdefault(msg["messageId"], set()).add(json.dumps(msg, sort_keys=True))
    assert set(by_id) == set(ids)  # every message arrived
    assert all(len(texts) == 1 for texts in by_id.values())  # a duplicate is the same message
    first_seen = list(dict.fromkeys(m["messageId"] for m in received))
    assert first_seen == ids  # and the first arrivals are in order


def test_wss_verifies_certificates_unless_a_connection_names_the_ca(tmp_path, receivers, monkeypatch):
    cert, key = _self_signed(tmp_path)
    rec = receivers(tls=(cert, key))
    box = Outbox(tmp_path / "outbox", [rec.url])
    box.enqueue(period_events(2))
    settings = delivery.Settings(timeout=5.0, max_backoff=1.0, conn_ids=("stream_ws_test",))
    report = delivery.deliver(box, pause=False, settings=settings)
    assert report.dropped_events == 2 and "CERTIFICATE_VERIFY_FAILED" in box.stats()["last_error"]
    delivery.close_all()
    monkeypatch.setenv("AIRFLOW_CONN_STREAM_WS_TEST", json.dumps(
        {"conn_type": "stream_ws", "host": "localhost", "extra": {"ca_bundle": str(cert)}}))
    box.enqueue(period_events(2, start=2))
    report = delivery.deliver(box, pause=False, settings=settings)
    assert report.sent_events == 2
    assert [ev["result"]["n"] for ev in events_of(rec.messages())] == [2, 3]


def test_credentials_come_from_a_stream_ws_connection(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_STREAM_WS_A", json.dumps(
        {"conn_type": "stream_ws", "host": "recv.example", "port": 9000, "login": "ann", "password": "s3cret",
         "extra": {"headers": {"X-Api-Key": "k1"}, "allow_plaintext": True}}))  # credentials over ws://
    monkeypatch.setenv("AIRFLOW_CONN_STREAM_WS_B", json.dumps(  # credentials need a host
        {"conn_type": "stream_ws", "host": "other.example", "password": "tok"}))
    a = delivery.access_for("ws://recv.example:9000/n", ("stream_ws_a", "stream_ws_b"))
    assert "X-Api-Key: k1" in a.headers and "Authorization: Basic YW5uOnMzY3JldA==" in a.headers  # ann:s3cret
    b = delivery.access_for("wss://other.example:9000/n", ("stream_ws_missing", "stream_ws_a", "stream_ws_b"))
    assert b.headers == ("Authorization: Bearer tok",)
    none = delivery.access_for("wss://other.example:1/n", ("stream_ws_missing",))
    assert none.headers == () and none.sslopt["cert_reqs"].name == "CERT_REQUIRED"


def test_naming_connections_without_a_credentials_lookup_is_an_error():
    """Delivery never imports Airflow: without the hooks' lookup registered it cannot read a
    connection, and says so instead of sending without the connection's credentials."""
    delivery.use_credentials(None)
    try:
        with pytest.raises(delivery.CredentialsUnavailable, match="stream_ws_a.*hooks.bind"):
            delivery.access_for("ws://recv.example:9000/n", ("stream_ws_a",))
        assert delivery.access_for("wss://recv.example:9000/n", ()).sslopt["cert_reqs"].name == "CERT_REQUIRED"
    finally:
        bind()


def _self_signed(folder):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path
