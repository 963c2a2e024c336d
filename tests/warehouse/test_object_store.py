"""The warehouse on an S3-compatible object store: a real MinIO server on 127.0.0.1 (built from its Go
module by dev/setup), the tables at ``s3://warehouse/<prefix>``, credentials from the AWS variables.

Spark reads and detects there, and the kernel makes every commit (a DELETE's keys are found by
Spark and deleted by the kernel): concurrent writers lose nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder

from airflow_stream_provider import statements
from airflow_stream_provider.local_servers import Minio
from airflow_stream_provider.processes import free_port
from tests.spark_node.test_node import SCRIPT

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def minio(tmp_path_factory):
    server = Minio(tmp_path_factory.mktemp("minio")).start()
    try:
        yield server
    finally:
        server.stop()


def environ(minio: Minio, home: Path, prefix: str) -> dict[str, str]:
    return os.environ | minio.environ | {"AIRFLOW_STREAM_HOME": str(home),
                                         "AIRFLOW_STREAM_WAREHOUSE": minio.url(prefix)}


def run(env: dict[str, str], *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=timeout)


def objects(minio: Minio, prefix: str) -> list[str]:
    from pyarrow import fs

    filesystem = fs.S3FileSystem(access_key=minio.access_key, secret_key=minio.secret_key, region="us-east-1",
                                 endpoint_override=minio.endpoint.removeprefix("http://"), scheme="http")
    found = filesystem.get_file_info(fs.FileSelector(f"{minio.bucket}/{prefix}", recursive=True))
    return [info.path.removeprefix(f"{minio.bucket}/{prefix}/") for info in found if info.type == fs.FileType.File]


def test_tables_deletes_and_a_stream_with_the_warehouse_on_the_object_store(minio, tmp_path):
    home = tmp_path / "home"
    env = environ(minio, home, "one")
    assert run(env, "node", "start", "--port", str(free_port())).returncode == 0
    try:
        made = run(env, "sql", """
            CREATE DATABASE power; USE power;
            CREATE STABLE meters (ts TIMESTAMP, v DOUBLE) TAGS (site VARCHAR(16));
            INSERT INTO m1 USING meters TAGS ('north') VALUES ('2024-12-31 23:00:00', 99) ('2024-12-31 23:00:01', 98);
            DELETE FROM meters WHERE v = 99;
            CREATE STREAM avg1m INTERVAL(1m) SLIDING(1m) FROM meters PARTITION BY tbname INTO avg_out
              AS SELECT _twstart ts, avg(v) a, count(*) n FROM %%trows;
            INSERT INTO m1 VALUES ('2025-01-01 00:00:10', 1) ('2025-01-01 00:00:50', 3) ('2025-01-01 00:01:30', 8)
              ('2025-01-01 00:02:05', 4)
              m2 USING meters TAGS ('south') VALUES ('2025-01-01 00:00:20', 10) ('2025-01-01 00:01:10', 20);""")
        assert made.returncode == 0, made.stdout + made.stderr
        kept = run(env, "sql", "-d", "power", "--format", "csv", "SELECT v FROM meters WHERE ts < '2025-01-01'")
        assert kept.stdout.strip().splitlines()[1:] == ["98.0"]  # Spark's DELETE, read back
        # by hand, the rows written after the stream: m1 [00:00) holds 1 and 3, [00:01) 8, [00:02)
        # stays open; m2 [00:00) holds 10, [00:01) stays open (no later row of m2)
        want = [("m1", "00:00", 2.0, 2), ("m1", "00:01", 8.0, 1), ("m2", "00:00", 10.0, 1)]
        deadline = time.monotonic() + 180
        got: list[tuple] = []
        while got != want and time.monotonic() < deadline:
            # the node's live detector finds the windows; each run computes what it found so far
            ran = run(env, "run", "power.avg1m", "--until-idle")
            assert ran.returncode == 0, ran.stdout + ran.stderr
            out = run(env, "sql", "-d", "power", "--format", "csv",
                      "SELECT tag_tbname, ts, a, n FROM avg_out ORDER BY tag_tbname, ts")
            assert out.returncode == 0, out.stderr
            got = [(f[0], f[1][11:16], float(f[2]), int(f[3]))
                   for f in (line.split(",") for line in out.stdout.strip().splitlines()[1:])]
        assert got == want
        # the detector's checkpoint is on the object store: a node started afresh carries on from it,
        # finding the windows the next rows close and none of the earlier ones again
        assert run(env, "node", "stop", timeout=120).returncode == 0
        assert run(env, "node", "start", "--port", str(free_port())).returncode == 0
        more = run(env, "sql", "-d", "power",
                   "INSERT INTO m1 VALUES ('2025-01-01 00:03:10', 6) m2 VALUES ('2025-01-01 00:02:30', 30)")
        assert more.returncode == 0, more.stdout + more.stderr
        # by hand: m1 [00:02) closes holding 4, m2 [00:01) holding 20; m1 [00:03) and m2 [00:02) stay open
        want = sorted(want + [("m1", "00:02", 4.0, 1), ("m2", "00:01", 20.0, 1)])
        deadline = time.monotonic() + 180
        while got != want and time.monotonic() < deadline:
            ran = run(env, "run", "power.avg1m", "--until-idle")
            assert ran.returncode == 0, ran.stdout + ran.stderr
            out = run(env, "sql", "-d", "power", "--format", "csv",
                      "SELECT tag_tbname, ts, a, n FROM avg_out ORDER BY tag_tbname, ts")
            got = [(f[0], f[1][11:16], float(f[2]), int(f[3]))
                   for f in (line.split(",") for line in out.stdout.strip().splitlines()[1:])]
        assert got == want
    finally:
        run(env, "node", "stop", timeout=120)
    stored = objects(minio, "one")
    # the stream's event table and checkpoint are on the object store, beside the warehouse's databases
    assert ".streams/power/avg1m/events/_delta_log/00000000000000000000.json" in stored
    assert ".streams/power/avg1m/checkpoint/metadata" in stored
    assert any(name.startswith(".streams/power/avg1m/checkpoint/commits/") for name in stored)
    state = home / "state" / "power" / "avg1m"
    assert (state / "stream.json").is_file() and not (state / "events").exists()
    assert not (state / "checkpoint").exists()
    # across the restart each window closed once: the five closes found, none repeated
    events = DeltaTable(minio.url("one/.streams/power/avg1m/events"), storage_options=minio.environ)
    closes = [row for row in events.to_pyarrow_table().to_pylist() if row["event_type"] == "WINDOW_CLOSE"]
    found = sorted((*json.loads(r["group_keys"]).values(), r["window_start"].strftime("%H:%M")) for r in closes)
    assert found == [(k, t) for k, t, _, _ in want]
    # the sensors' probe reads the committed batch there, in a process with only the AWS variables
    probe = subprocess.run(
        [sys.executable, "-c", "import sys; from airflow_stream_provider.streams.probes import last_commit, "
         "checkpoint_id; print(last_commit(sys.argv[1])[0], checkpoint_id(sys.argv[1]) is not None)",
         minio.url("one/.streams/power/avg1m/checkpoint")], env=env, capture_output=True, text=True, timeout=60)
    assert probe.returncode == 0 and probe.stdout.split()[1] == "True", probe.stdout + probe.stderr
    assert int(probe.stdout.split()[0]) >= 1
    # DROP STREAM removes them there too
    dropped = run(env, "sql", "DROP STREAM power.avg1m")
    assert dropped.returncode == 0, dropped.stdout + dropped.stderr
    assert not [name for name in objects(minio, "one") if name.startswith(".streams/")]
    # the tables, their data files and logs are on the object store, Spark's DELETE commit among them
    assert "power/meters/_delta_log/00000000000000000000.json" in stored
    assert "power/avg_out/_delta_log/00000000000000000000.json" in stored
    assert any(name.startswith("power/meters/") and name.endswith(".parquet") for name in stored)
    # every commit of the table is the kernel's, the DELETE's among them (a MERGE deleting the keys
    # Spark found): S3A writes a log entry with a plain PUT, which could replace a concurrent
    # writer's entry, so Spark commits nothing on an object store
    log = DeltaTable(minio.url("one/power/meters"), storage_options=minio.environ).history()
    assert [e["operation"] for e in log if e["operation"] == "MERGE"]
    assert not [e for e in log if "Spark" in str(e.get("engineInfo", ""))], log
    # only the catalog's records stay in the home
    assert not (home / "warehouse" / "power" / "meters").exists()
    assert (home / "warehouse" / "power" / ".database.json").is_file()


WRITER = textwrap.dedent("""
    import sys
    from airflow_stream_provider import statements
    from airflow_stream_provider.hooks import bind
    from airflow_stream_provider.warehouse import Warehouse

    kind, writer, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    bind()  # the object store's credentials come from an Airflow connection, as in a task
    warehouse = Warehouse(database="power")
    head = f"INSERT INTO s{writer} USING meters TAGS ('site{writer}', {writer}) VALUES "
    base = 1_735_689_600_000
    if kind == "single":
        for i in range(count):
            list(statements.run(warehouse, head + f"({base + i}, {i})"))
    else:
        for b in range(count):
            first = 1_000_000 + b * 500
            list(statements.run(warehouse, head + " ".join(f"({base + i}, {i})" for i in range(first, first + 500))))
""")


def test_concurrent_writers_on_the_object_store_lose_nothing(minio, tmp_path):
    """Four processes commit at once to one table on the object store, as the local concurrency test
    does: each commit is a conditional PUT of the next log entry, so a writer that loses the race
    retries on the new version instead of overwriting it."""
    singles, batches = 60, 8
    home = tmp_path / "home"
    # the credentials in an Airflow connection, none in AWS variables
    env = {k: v for k, v in environ(minio, home, "race").items() if not k.startswith("AWS_")} | {
        "AIRFLOW_CONN_WAREHOUSE_STORE": json.dumps({
            "conn_type": "aws", "login": minio.access_key, "password": minio.secret_key,
            "extra": {"endpoint_url": minio.endpoint, "region_name": "us-east-1"}}),
        "AIRFLOW_STREAM_STORAGE_CONN_ID": "warehouse_store"}
    made = run(env, "sql", "CREATE DATABASE power; CREATE STABLE power.meters (ts TIMESTAMP, v BIGINT) "
                           "TAGS (site VARCHAR(16), writer INT)")
    assert made.returncode == 0, made.stderr
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    writers = [subprocess.Popen([sys.executable, str(script), kind, str(w), str(count)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for kind, count in (("single", singles), ("batch", batches)) for w in (1, 2)]
    for process in writers:
        _out, err = process.communicate(timeout=900)
        assert process.returncode == 0, err[-3000:]

    table = DeltaTable(minio.url("race/power/meters"), storage_options=minio.environ)
    rows = pa.table(QueryBuilder().register("m", table).execute(
        "SELECT tbname, CAST(ts AS BIGINT) AS ts_us, v FROM m").read_all()).to_pylist()
    expected = set(range(singles)) | set(range(1_000_000, 1_000_000 + batches * 500))
    assert len(rows) == 2 * len(expected)
    assert len({(r["tbname"], r["ts_us"]) for r in rows}) == len(rows), "a key was written twice"
    for w in (1, 2):
        assert {r["v"] for r in rows if r["tbname"] == f"s{w}"} == expected
    # every writer's commits are in the log: 2 x 60 single-row and 2 x 8 batch commits, plus the
    # CREATE, each at its own version
    assert table.version() >= 2 * (singles + batches)


def test_an_unusable_location_or_connection_is_refused_clearly(monkeypatch, tmp_path):
    from airflow_stream_provider import storage
    from airflow_stream_provider.spark.session import object_store_conf
    from airflow_stream_provider.warehouse import Warehouse

    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(tmp_path))
    monkeypatch.setenv("AIRFLOW_STREAM_WAREHOUSE", "hdfs://namenode/warehouse")
    with pytest.raises(storage.StorageError, match="write s3://bucket/prefix"):
        Warehouse()
    monkeypatch.setenv("AIRFLOW_STREAM_WAREHOUSE", "s3://")
    with pytest.raises(storage.StorageError, match="write s3://bucket/prefix"):
        Warehouse()
    monkeypatch.setenv("AIRFLOW_STREAM_WAREHOUSE", "s3://bucket/prefix/")
    monkeypatch.setenv("AIRFLOW_STREAM_STORAGE_CONN_ID", "nowhere")
    monkeypatch.setattr(storage, "_read_connection", None)
    with pytest.raises(storage.StorageError, match="cannot read Airflow connections"):
        Warehouse()
    monkeypatch.delenv("AIRFLOW_STREAM_STORAGE_CONN_ID")
    monkeypatch.setenv("AIRFLOW_STREAM_S3_JARS", str(tmp_path / "empty"))
    with pytest.raises(storage.StorageError, match="S3A jars .* run dev/setup"):
        object_store_conf()  # what every Spark session of this process would be built with


def test_the_sensor_probes_read_tables_on_the_object_store(minio, tmp_path, monkeypatch):
    """The deferrable sensors' checks (in the triggerer, without Spark) see a table's versions and
    latest event time on the object store; they set AWS_ALLOW_HTTP for an http:// endpoint themselves."""
    from airflow_stream_provider.streams.probes import latest_version, max_event_time
    from airflow_stream_provider.warehouse import Warehouse

    for key, value in environ(minio, tmp_path / "home", "probes").items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ALLOW_HTTP")
    url = minio.url("probes/power/m")
    assert latest_version(url) is None  # no table yet
    wh = Warehouse(tmp_path / "home" / "warehouse")
    list(statements.run(wh, "CREATE DATABASE power; CREATE TABLE power.m (ts TIMESTAMP, v DOUBLE); "
                            "INSERT INTO power.m VALUES ('2025-01-01 00:00:10', 1); "
                            "INSERT INTO power.m VALUES ('2025-01-01 00:02:30', 2)"))
    monkeypatch.delenv("AWS_ALLOW_HTTP")  # the probes set it again: they must not depend on the catalog
    assert latest_version(url) == 2  # CREATE, then two commits
    assert max_event_time(url, "ts") == datetime(2025, 1, 1, 0, 2, 30, tzinfo=UTC)


def test_a_prefix_holds_the_tables_of_one_home(minio, tmp_path, monkeypatch):
    """The first home to use a prefix claims it; another home naming the same prefix is refused, by the
    CLI too, before it writes anything: each would keep records of tables the other drops or replaces."""
    from airflow_stream_provider import storage

    for key, value in environ(minio, tmp_path / "a", "owned").items():
        monkeypatch.setenv(key, value)
    first = storage.table_store(tmp_path / "a" / "warehouse")
    assert storage.table_store(tmp_path / "a" / "warehouse") == first  # the same home again: accepted
    assert "owned/.catalog.json" in [f"owned/{name}" for name in objects(minio, "owned")]
    with pytest.raises(storage.StorageError, match="holds the tables of another stream home"):
        storage.table_store(tmp_path / "b" / "warehouse")
    refused = run(environ(minio, tmp_path / "b", "owned"), "sql", "CREATE DATABASE other")
    assert refused.returncode != 0 and "give each home a prefix of its own" in refused.stderr.lower(), refused.stderr
    assert objects(minio, "owned") == [".catalog.json"]  # the refused home wrote nothing there
