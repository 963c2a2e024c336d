"""One mode policy for what the project writes under its home (README, "Files and modes"): folders
0750 and files 0640, the umask applied on top; the node's token 0600. Under umask 022 no other user
can read computed results, queued notifications or stream definitions, and a reader in the owner's
group (a DAG processor or api-server under another uid) can read every file the project writes."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from airflow_stream_provider.files import create_text, make_dirs, write_json, write_text
from airflow_stream_provider.notify.outbox import Outbox
from airflow_stream_provider.spark import endpoint
from airflow_stream_provider.streams.run import run as run_stream
from airflow_stream_provider.warehouse import Warehouse
from tests.conftest import sql
from tests.notify.test_delivery import period_events


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_queued_notifications_are_0640(tmp_path, umask_022):
    box = Outbox(tmp_path / "outbox", ["ws://127.0.0.1:9/"])
    (queued,) = box.enqueue(period_events(3), now_ms=1)
    message = tmp_path / "outbox" / f"{queued.seq:012d}.json"
    assert mode(tmp_path / "outbox") == 0o750 and mode(message) == 0o640


def test_the_writers_follow_the_policy_and_the_umask(tmp_path, umask_022):
    deep = make_dirs(tmp_path / "a" / "b" / "c")
    assert [mode(p) for p in (tmp_path / "a", tmp_path / "a" / "b", deep)] == [0o750] * 3
    write_text(deep / "t.sql", "x")
    write_json(deep / "s.json", {"a": 1}, durable=True)
    assert create_text(deep / "n.json", "{}") and not create_text(deep / "n.json", "{}")
    assert {p.name: mode(p) for p in deep.iterdir()} == {"t.sql": 0o640, "s.json": 0o640, "n.json": 0o640}
    os.umask(0o077)  # a stricter umask still applies
    write_text(deep / "t.sql", "y")
    assert mode(deep / "t.sql") == 0o600 and (deep / "t.sql").read_text() == "y"


@pytest.mark.spark
def test_a_stream_run_leaves_nothing_readable_by_others(spark, tmp_path, monkeypatch, umask_022):
    home = tmp_path / "home"  # created by the project
    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(home))
    wh = Warehouse(home / "warehouse", spark=spark)
    sql(wh, """
        CREATE DATABASE power; USE power;
        CREATE STABLE meters (ts TIMESTAMP, v DOUBLE) TAGS (site VARCHAR(16));
        CREATE STREAM avg1m INTERVAL(1m) SLIDING(1m) FROM meters PARTITION BY tbname
          NOTIFY('ws://127.0.0.1:9/') ON (WINDOW_CLOSE) INTO avg1m_out
          AS SELECT _twstart, avg(v) AS a FROM %%trows;
        INSERT INTO m1 USING meters TAGS ('north') VALUES ('2025-01-01 00:00:10', 1) ('2025-01-01 00:01:10', 3);
    """)
    assert run_stream(wh, "power", "avg1m").written == 1  # [00:00, 00:01), queued for a receiver that is down
    endpoint.new_token()

    own = {p for p in home.rglob("*") if p.is_file() and not _written_by_spark(p, home)}
    names = {p.name for p in own}
    # what the review found readable by anyone (outbox messages and state) or by no one else
    # (definitions and subtable records): all present, all 0640
    assert {"stream.json", "avg1m.sql", "m1.json", ".database.json", "outbox.lock"} <= names, sorted(names)
    assert "outbox.json" in names  # the delivery state
    wrong = {str(p.relative_to(home)): oct(mode(p)) for p in own if mode(p) != 0o640 and p.name != "token"}
    assert wrong == {}
    assert mode(home / "node" / "token") == 0o600
    # the folders the project made keep others out of everything below, Delta's files included
    folders = [home, *(p for p in home.iterdir() if p.is_dir())]
    assert {str(p): oct(mode(p)) for p in folders if mode(p) != 0o750} == {}


def _written_by_spark(path: Path, home: Path) -> bool:
    """Delta tables' data and logs, and Spark's scratch space: written by Spark or delta-rs."""
    parts = path.relative_to(home).parts
    return parts[0] == "spark" or "_delta_log" in parts or path.suffix in (".parquet", ".crc") \
        or any(p in ("events", "checkpoint", "_change_data") or p.endswith("_out") for p in parts[:-1])
