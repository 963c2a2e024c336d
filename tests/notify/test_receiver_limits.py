"""``airflow-stream receive`` caps message sizes and, with ``--token``, admits only senders that
present it: a real receiver process and delivery's own client."""

from __future__ import annotations

import subprocess
import sys

import pytest

from airflow_stream_provider.notify import delivery, receiver
from tests.notify.conftest import ReceiverProcess


@pytest.fixture
def guarded(tmp_path):
    made: list[ReceiverProcess] = []

    def make(*extra: str) -> ReceiverProcess:
        made.append(ReceiverProcess(tmp_path, extra=extra).start())
        return made[-1]

    yield make
    delivery.close_all()
    for rec in made:
        rec.stop()


def send(url: str, text: str, headers: tuple[str, ...] = ()) -> None:
    rec = delivery.Receiver(url, delivery.Access(headers), timeout=5)
    try:
        rec.send([text])
    finally:
        rec.close()


def test_a_token_admits_only_senders_that_present_it(guarded):
    rec = guarded("--token", "t0ken")
    with pytest.raises(delivery.ReceiverError, match="401"):
        send(rec.url, '{"n": 1}')
    with pytest.raises(delivery.ReceiverError, match="401"):
        send(rec.url, '{"n": 2}', ("Authorization: Bearer wrong",))
    send(rec.url, '{"n": 3}', ("Authorization: Bearer t0ken",))
    assert rec.messages() == [{"n": 3}]


def test_messages_over_the_size_cap_are_refused(guarded):
    rec = guarded("--max-size", "1000")
    send(rec.url, '{"n": "' + "x" * 900 + '"}')
    with pytest.raises(delivery.ReceiverError):
        send(rec.url, '{"n": "' + "x" * 2000 + '"}')
    assert [len(m["n"]) for m in rec.messages()] == [900]


def test_the_default_cap_is_set_and_the_help_tells_of_the_token():
    assert delivery.Settings().max_message_bytes <= receiver.MAX_SIZE
    out = subprocess.run([sys.executable, "-m", "airflow_stream_provider.cli", "receive", "--help"],
                         capture_output=True, text=True, check=True).stdout
    assert "--token" in out and "--max-size" in out
    assert receiver.authorized("Bearer abc", "abc") and not receiver.authorized(None, "abc")
    assert receiver.authorized(None, None)
