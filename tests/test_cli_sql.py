"""`airflow-stream sql` and `airflow-stream load` through the installed console script."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_stream_provider.cli.commands import main

SCRIPT = Path(sys.executable).with_name("airflow-stream")

SCHEMA = """CREATE DATABASE power;
USE power;
CREATE STABLE meters (ts TIMESTAMP, current FLOAT, voltage INT, phase FLOAT) TAGS (location VARCHAR(24), groupid INT);
INSERT INTO d1001 USING meters TAGS ('California.SanFrancisco', 2)
  VALUES ('2018-10-03 14:38:05.000', 10.3, 219, 0.31) ('2018-10-03 14:38:15.000', 12.6, 218, 0.33);
"""


def run(home: Path, *args: str, timeout: int = 180) -> subprocess.CompletedProcess:
    env = os.environ | {"AIRFLOW_STREAM_HOME": str(home)}
    workdir = home.parent / "workdir"
    workdir.mkdir(exist_ok=True)
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=workdir)


@pytest.fixture
def home(tmp_path):
    path = tmp_path / "home"
    path.mkdir()
    (path / "schema.sql").write_text(SCHEMA)
    result = run(path, "sql", "-f", str(path / "schema.sql"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "ok: created database power (precision ms)",
        "ok: using database power",
        "ok: created supertable power.meters",
        "ok: 2 rows written to power.d1001",
    ]
    return path


def test_an_error_names_the_statement_exits_2_and_keeps_earlier_statements(home):
    script = home / "more.sql"
    script.write_text("USE power;\nINSERT INTO d1001 VALUES ('2018-10-03 14:38:25', 1.0, 220, 0.1);\n"
                      "INSERT INTO d1001 VALUES ('2018-10-03 14:38:35', 1.0, 'x', 0.1);\n"
                      "INSERT INTO d1001 VALUES ('2018-10-03 14:38:45', 1.0, 222, 0.1);\n")
    result = run(home, "sql", "-f", str(script))
    assert result.returncode == 2
    assert result.stderr.splitlines()[0] == (
        "error: statement 3 (INSERT d1001) at line 3, col 1: power.d1001: column voltage (INT): 'x' is not an integer")
    assert "ok: 1 row written to power.d1001" in result.stdout
    # statement 2 stays committed, statement 4 never ran: read the table without Spark
    from deltalake import DeltaTable, QueryBuilder

    table = DeltaTable(str(home / "warehouse" / "power" / "meters"))
    got = pa.table(QueryBuilder().register("m", table).execute("SELECT voltage FROM m ORDER BY voltage").read_all())
    assert got.column("voltage").to_pylist() == [218, 219, 220]


def test_a_syntax_error_runs_nothing(home):
    result = run(home, "sql", "-d", "power", "INSERT INTO d1001 VALUES (1000, 1, 1, 1); INSERT INTO d1001 VALUES (")
    assert result.returncode == 2
    assert "line 1, col" in result.stderr and "nothing was executed" in result.stderr
    from deltalake import DeltaTable

    assert DeltaTable(str(home / "warehouse" / "power" / "meters")).version() == 1  # create + one insert


@pytest.mark.spark
def test_select_prints_table_csv_and_json_with_iso_timestamps(home, spark, monkeypatch, capsys):
    query = "SELECT tbname, location, ts, current, voltage FROM power.meters ORDER BY ts"
    table = run(home, "sql", query)
    assert table.returncode == 0, table.stderr
    assert table.stdout.splitlines() == [
        "tbname | location                | ts                            | current | voltage",
        "-------+-------------------------+-------------------------------+---------+--------",
        "d1001  | California.SanFrancisco | 2018-10-03T14:38:05.000+00:00 |    10.3 |     219",
        "d1001  | California.SanFrancisco | 2018-10-03T14:38:15.000+00:00 |    12.6 |     218",
        "(2 rows)",
    ]
    # the other formats through the command's entry point in this process, on the suite's Spark session
    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(home))
    capsys.readouterr()

    def command(*args: str) -> subprocess.CompletedProcess:
        code = main(list(args))
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out, err)

    both = command("sql", "--format", "csv", f"{query}; SELECT count(*) AS n FROM power.d1001")
    assert both.returncode == 0, both.stderr
    first, second = both.stdout.split("n\n")[0], both.stdout.split("n\n")[1]
    records = list(csv.DictReader(io.StringIO(first)))
    assert records[0] == {"tbname": "d1001", "location": "California.SanFrancisco",
                          "ts": "2018-10-03T14:38:05.000+00:00", "current": "10.3", "voltage": "219"}
    assert second.strip() == "2"
    as_json = command("sql", "--format", "json", "-d", "power", "SELECT ts, voltage FROM d1001 WHERE voltage > 218")
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout) == [{"ts": "2018-10-03T14:38:05.000+00:00", "voltage": 219}]
    # csv and json keep standard output for the rows: statement notes go to standard error
    assert "ok:" not in both.stdout and "ok:" not in as_json.stdout
    # Spark ran in this working directory and left nothing there
    assert list((home.parent / "workdir").iterdir()) == []


def test_load_parquet_and_csv_into_supertable_and_subtable(home):
    parquet = home / "more.parquet"
    pq.write_table(pa.table({
        "ts": pa.array([1538548695000, 1538548705000], pa.int64()),  # epoch ms, the database precision
        "voltage": pa.array([221, 222], pa.int32()),
        "tbname": ["d1001", "d2001"],
        "location": ["ignored", "Tokyo"],
        "groupid": pa.array([0, 5], pa.int32()),
    }), parquet)
    result = run(home, "load", str(parquet), "INTO", "power.meters")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok: 2 rows loaded into power.meters in ")
    assert "2 rows checked against power.meters" in result.stderr

    path = home / "d2001.csv"
    path.write_text("ts,current,voltage\n2018-10-03 14:38:25.500,1.5,230\n2018-10-03T14:38:35Z,2.5,231\n")
    result = run(home, "load", str(path), "INTO", "power.d2001")
    assert result.returncode == 0, result.stderr

    from deltalake import DeltaTable, QueryBuilder

    table = DeltaTable(str(home / "warehouse" / "power" / "meters"))
    got = pa.table(QueryBuilder().register("m", table).execute(
        "SELECT tbname, location, groupid, voltage, CAST(ts AS VARCHAR) AS ts FROM m ORDER BY voltage").read_all())
    assert got.to_pylist() == [
        {"tbname": "d1001", "location": "California.SanFrancisco", "groupid": 2, "voltage": 218,
         "ts": "2018-10-03T14:38:15Z"},
        {"tbname": "d1001", "location": "California.SanFrancisco", "groupid": 2, "voltage": 219,
         "ts": "2018-10-03T14:38:05Z"},
        {"tbname": "d1001", "location": "California.SanFrancisco", "groupid": 2, "voltage": 221,
         "ts": "2018-10-03T06:38:15Z"},
        {"tbname": "d2001", "location": "Tokyo", "groupid": 5, "voltage": 222, "ts": "2018-10-03T06:38:25Z"},
        {"tbname": "d2001", "location": "Tokyo", "groupid": 5, "voltage": 230, "ts": "2018-10-03T14:38:25.500Z"},
        {"tbname": "d2001", "location": "Tokyo", "groupid": 5, "voltage": 231, "ts": "2018-10-03T14:38:35Z"},
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("ts,current,voltage\n2018-10-03 14:38:25,1.5,high\n", "column voltage (INT) in bad.csv"),
        ("ts,current,volts\n2018-10-03 14:38:25,1.5,230\n",
         "bad.csv has column 'volts', which power.meters does not have"),
        ("current,voltage\n1.5,230\n", "bad.csv lacks column ts"),
        ("ts,voltage,VOLTAGE\n2018-10-03 14:38:25,230,231\n", "bad.csv has column 'VOLTAGE' twice"),
        ("ts,current,voltage\n2018-10-03 14:38:25,1.5,230,7\n", "load into power.d1001"),
        ("ts,current,voltage\nsoon,1.5,230\n", "column ts (TIMESTAMP) in bad.csv"),
    ],
)
def test_bad_files_name_table_and_column_and_load_nothing(home, content, message):
    path = home / "bad.csv"
    path.write_text(content)
    result = run(home, "load", str(path), "INTO", "power.d1001")
    assert result.returncode == 2
    assert message in result.stderr
    from deltalake import DeltaTable

    assert DeltaTable(str(home / "warehouse" / "power" / "meters")).version() == 1
