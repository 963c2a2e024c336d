"""An Airflow notifier as a receiver: ``NOTIFY('notifier://ops')`` with Airflow's own
``SmtpNotifier`` (the SMTP provider's), as ``airflow-stream.toml`` names it, sending to a real SMTP
server on 127.0.0.1 (a small one in this process): every message one mail, in order, rendered with
the message; ON_FAILURE_PAUSE holding while the server refuses, then the same messageId; a name
with no table, a clear error."""

from __future__ import annotations

import email
import json
import socketserver
import threading

import pytest

from airflow_stream_provider.hooks import bind
from airflow_stream_provider.notify import delivery
from airflow_stream_provider.notify.outbox import Outbox
from airflow_stream_provider.sql import parse
from tests.notify.test_delivery import FAST, period_events


class SmtpServer:
    """An SMTP server that keeps each mail; ``refuse`` answers that many DATA with 451 first."""

    def __init__(self, refuse: int = 0) -> None:
        self.mails: list[email.message.Message] = []
        self.refused = 0
        owner = self

        class Handler(socketserver.StreamRequestHandler):
            def reply(self, line: str) -> None:
                self.wfile.write((line + "\r\n").encode())

            def handle(self) -> None:
                self.reply("220 test SMTP")
                while line := self.rfile.readline().decode():
                    verb = line[:4].upper()
                    if verb in ("EHLO", "HELO"):
                        self.reply("250 test")
                    elif verb == "DATA":
                        self.reply("354 go on")
                        data = []
                        while (row := self.rfile.readline().decode()) not in (".\r\n", ""):
                            data.append(row[1:] if row.startswith("..") else row)
                        if owner.refused < refuse:
                            owner.refused += 1
                            self.reply("451 try again later")
                        else:
                            owner.mails.append(email.message_from_string("".join(data)))
                            self.reply("250 kept")
                    elif verb == "QUIT":
                        self.reply("221 bye")
                        return
                    else:  # MAIL FROM, RCPT TO, RSET, NOOP
                        self.reply("250 ok")

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> SmtpServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def body(mail: email.message.Message) -> dict:
    (part,) = [p for p in mail.walk() if p.get_content_type() == "text/html"]
    return json.loads(part.get_payload(decode=True).decode())


@pytest.fixture
def smtp(tmp_path, monkeypatch):
    def configure(server: SmtpServer) -> None:
        port = server.server.server_address[1]
        monkeypatch.setenv("AIRFLOW_CONN_SMTP_TEST", json.dumps({
            "conn_type": "smtp", "host": "127.0.0.1", "port": port,
            "extra": {"disable_ssl": True, "disable_tls": True, "retry_limit": 0, "timeout": 5}}))

    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(tmp_path))
    (tmp_path / "airflow-stream.toml").write_text('''
[notifiers.ops]
class = "airflow.providers.smtp.notifications.smtp.SmtpNotifier"
smtp_conn_id = "smtp_test"
from_email = "streams@example.com"
to = "ops@example.com"
subject = "{{ message.streams[0].streamName }}: {{ events | length }} event(s)"
html_content = "{{ message_json }}"
''')
    bind()
    yield configure
    delivery.close_all()


def test_a_stream_may_name_a_notifier():
    (stmt,) = parse("CREATE STREAM s INTERVAL(1m) SLIDING(1m) FROM t NOTIFY('notifier://ops') "
                    "ON (WINDOW_CLOSE) INTO o AS SELECT _twstart ts, count(*) n FROM %%trows")
    assert stmt.notify is not None and stmt.notify.urls == ("notifier://ops",)
    with pytest.raises(Exception, match="a notifier is named notifier://<name>"):
        parse("CREATE STREAM s INTERVAL(1m) SLIDING(1m) FROM t NOTIFY('notifier://ops:25/x') "
              "ON (WINDOW_CLOSE) INTO o AS SELECT _twstart ts, count(*) n FROM %%trows")


def test_every_message_is_one_mail_in_order(tmp_path, smtp):
    with SmtpServer() as server:
        smtp(server)
        box = Outbox(tmp_path / "outbox", ["notifier://ops"])
        box.enqueue(period_events(30), max_bytes=2000)
        report = delivery.deliver(box, pause=False, settings=FAST)
    assert report.sent_events == 30 and report.dropped_events == 0 and len(server.mails) == report.sent_messages > 1
    sent = [body(mail) for mail in server.mails]
    assert [e["result"]["n"] for m in sent for e in m["streams"][0]["events"]] == list(range(30))
    first = server.mails[0]
    assert first["To"] == "ops@example.com" and first["From"] == "streams@example.com"
    assert first["Subject"] == f"s1: {len(sent[0]['streams'][0]['events'])} event(s)"


def test_on_failure_pause_holds_while_the_notifier_raises(tmp_path, smtp):
    with SmtpServer(refuse=2) as server:
        smtp(server)
        box = Outbox(tmp_path / "outbox", ["notifier://ops"])
        box.enqueue(period_events(3))
        report = delivery.deliver(box, pause=True, settings=FAST)
    assert server.refused == 2 and report.retries >= 1 and report.dropped_events == 0
    (mail,) = server.mails
    assert [e["result"]["n"] for e in body(mail)["streams"][0]["events"]] == [0, 1, 2]
    assert box.stats()["pending"] == 0


def test_a_notifier_without_a_table_is_a_clear_error(tmp_path, smtp):
    box = Outbox(tmp_path / "outbox", ["notifier://nobody"])
    box.enqueue(period_events(1))
    delivery.deliver(box, pause=False, settings=FAST)
    assert "airflow-stream.toml has no [notifiers.nobody] table (it has ops)" in box.stats()["last_error"]
