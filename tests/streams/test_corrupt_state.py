"""Corrupt state files: each gives a project error naming the
file (exit 2 from the CLI, never a traceback), a broken stream is listed as ``failed`` with the
reason while the others list as usual, and unreadable outbox messages are quarantined.

Nothing here starts Spark: tables, streams and listings need only Delta logs and the files."""

from __future__ import annotations

import json

import pytest

from airflow_stream_provider import statements
from airflow_stream_provider.cli import main
from airflow_stream_provider.exceptions import CorruptStateError
from airflow_stream_provider.model import TableName
from airflow_stream_provider.notify.message import NotifyEvent
from airflow_stream_provider.notify.outbox import Outbox
from airflow_stream_provider.streams.status import ins_stream_tasks, ins_streams
from airflow_stream_provider.streams.store import StreamStore
from airflow_stream_provider.warehouse import Warehouse


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(tmp_path))
    monkeypatch.setenv("AIRFLOW_STREAM_NOTIFY_CONN_IDS", "none")
    wh = Warehouse(tmp_path / "warehouse")
    list(statements.run(wh, """CREATE DATABASE plant; USE plant;
        CREATE STABLE sensors (ts TIMESTAMP, temp DOUBLE) TAGS (hall VARCHAR(16));
        CREATE TABLE s7 USING sensors TAGS ('north');
        CREATE STREAM hot INTERVAL(5m) SLIDING(5m) FROM sensors PARTITION BY tbname
          NOTIFY('ws://127.0.0.1:9/hot') ON (WINDOW_CLOSE);
        CREATE STREAM tick PERIOD(10m) NOTIFY('ws://127.0.0.1:9/tick');
        CREATE STREAM idle PERIOD(1h) NOTIFY('ws://127.0.0.1:9/idle')"""))
    return tmp_path


def listing(home) -> dict[str, dict]:
    return {r["stream_name"]: r for r in ins_streams(Warehouse(home / "warehouse")).to_pylist()}


def cli(capsys, *argv: str) -> tuple[int, str]:
    rc = main(list(argv))
    out = capsys.readouterr()
    assert "Traceback" not in out.err + out.out
    return rc, out.err + out.out


def events(n: int, start: int = 0) -> list[NotifyEvent]:
    return [NotifyEvent(stream="plant.tick", key=f"t{i}", table_name="tick", event_type="ON_TIME",
                        event_time=1_700_000_000_000 + i, trigger_id=f"t{i}", trigger_type="Period", group_id="0",
                        fields={}, result={"i": i}) for i in range(start, start + n)]


@pytest.mark.parametrize("content, problem", [(None, "not valid JSON"), (b"", "empty"), (b"[1, 2]", "list"),
                                              (b'{"created": "yesterday"}', "wrong kind")])
def test_a_broken_stream_json_names_the_file_and_fails_only_its_stream(home, capsys, content, problem):
    path = home / "state" / "plant" / "tick" / "stream.json"
    path.write_bytes(path.read_bytes()[:40] if content is None else content)
    with pytest.raises(CorruptStateError, match=problem) as info:
        StreamStore().load_state("plant", "tick")
    assert info.value.path == path
    rows = listing(home)
    assert rows["tick"]["status"] == "failed" and str(path) in rows["tick"]["last_error"]
    assert rows["hot"]["status"] == rows["idle"]["status"] == "running"
    tasks = ins_stream_tasks(Warehouse(home / "warehouse")).to_pylist()
    assert {(t["stream_name"], t["status"]) for t in tasks if t["stream_name"] == "tick"} == {("tick", "failed")}
    rc, text = cli(capsys, "sql", "SHOW plant.STREAMS")
    assert rc == 0 and "3 streams in plant" in text
    rc, text = cli(capsys, "run", "plant.tick", "--until-idle")
    assert rc == 2 and f"corrupt state file {path}" in text


def test_a_garbage_definition_lists_as_failed(home):
    (home / "streams" / "plant" / "idle.sql").write_text("CREATE STREAM garbage", encoding="utf-8")
    rows = listing(home)
    assert rows["idle"]["status"] == "failed" and rows["idle"]["last_error"]
    assert rows["hot"]["status"] == "running"


def test_an_unreadable_outbox_message_is_quarantined_and_later_runs_proceed(home, tmp_path):
    box = Outbox(tmp_path / "outbox", ["ws://127.0.0.1:9/tick"])
    queued = box.enqueue(events(2)) + box.enqueue(events(2, start=2))  # one message each
    assert len(queued) == 2
    bad = box.directory / f"{queued[0].seq:012d}.json"
    bad.write_text("not json at all", encoding="utf-8")
    pending = box.pending("ws://127.0.0.1:9/tick")
    assert [q.seq for q in pending] == [queued[1].seq]  # the readable one still goes
    assert not bad.exists() and (box.directory / "quarantine" / bad.name).read_text() == "not json at all"
    stats = box.stats()
    assert stats["pending"] == 2
    assert "1 unreadable message(s)" in stats["last_error"] and bad.name in stats["last_error"]
    again = box.enqueue(events(1, start=9))  # new messages take new numbers, never a quarantined one's
    assert again[0].seq > queued[1].seq
    fields_missing = box.directory / f"{again[0].seq:012d}.json"
    fields_missing.write_text(json.dumps({"seq": again[0].seq}), encoding="utf-8")
    assert [q.seq for q in box.pending("ws://127.0.0.1:9/tick")] == [queued[1].seq]
    assert (box.directory / "quarantine" / fields_missing.name).exists()


def test_a_garbage_outbox_json_names_the_file_and_fails_only_its_stream(home):
    folder = home / "state" / "plant" / "tick" / "outbox"
    folder.mkdir(parents=True)
    (folder / "outbox.json").write_text("\x00garbage{", encoding="utf-8")
    box = Outbox(folder, ["ws://127.0.0.1:9/tick"])
    with pytest.raises(CorruptStateError, match="outbox.json"):
        box.stats()
    with pytest.raises(CorruptStateError, match="outbox.json"):
        box.enqueue(events(1))
    rows = listing(home)
    assert rows["tick"]["status"] == "failed" and "outbox.json" in rows["tick"]["last_error"]
    assert rows["idle"]["status"] == "running"


def test_a_bad_database_file_names_the_file(home, capsys):
    path = home / "warehouse" / "plant" / ".database.json"
    path.write_text("{", encoding="utf-8")
    with pytest.raises(CorruptStateError, match="not valid JSON") as info:
        Warehouse(home / "warehouse").catalog.precision("plant")
    assert info.value.path == path
    rc, text = cli(capsys, "sql", "SHOW plant.STREAMS")
    assert rc == 2 and str(path) in text
    path.write_text('{"created": "2025-01-01"}', encoding="utf-8")
    rc, text = cli(capsys, "sql", "SHOW plant.STREAMS")
    assert rc == 2 and "has no precision" in text


def test_a_truncated_subtable_file_names_the_file(home, capsys):
    path = home / "warehouse" / "plant" / ".subtables" / "s7.json"
    path.write_bytes(path.read_bytes()[:12])
    with pytest.raises(CorruptStateError, match="s7.json"):
        Warehouse(home / "warehouse").catalog.lookup(TableName("s7"), "plant")
    rc, text = cli(capsys, "sql", "-d", "plant", "INSERT INTO s7 VALUES ('2025-01-01 00:00:00', 21.5)")
    assert rc == 2 and f"corrupt state file {path}" in text
