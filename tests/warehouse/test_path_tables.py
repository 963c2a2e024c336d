"""Path tables in query text: only Delta tables inside the warehouse, refused before any Spark runs.

The warehouse here has a Spark "session" that fails the test when asked for, so every refusal is
shown to happen at parse/translate time, with nothing run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlglot import exp

from airflow_stream_provider import statements
from airflow_stream_provider.sql import parse
from airflow_stream_provider.warehouse import Warehouse, WarehouseError
from airflow_stream_provider.warehouse.resolve import delta_table

SCRIPT = Path(sys.executable).with_name("airflow-stream")


def no_spark():
    raise AssertionError("a Spark session was asked for")


@pytest.fixture
def wh(tmp_path, monkeypatch) -> Warehouse:
    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(tmp_path))
    warehouse = Warehouse(tmp_path / "warehouse", spark=no_spark)
    list(statements.run(warehouse, "CREATE DATABASE power; USE power; "
                                   "CREATE STABLE meters (ts TIMESTAMP, v INT) TAGS (g INT)"))
    return warehouse


@pytest.mark.parametrize(("query", "message"), [
    ("SELECT * FROM csv.`/etc/passwd`", "files are not read through other data sources"),
    ("SELECT * FROM text.`/etc/hostname`", "files are not read through other data sources"),
    ("SELECT * FROM parquet.`/etc`", "files are not read through other data sources"),
    ("SELECT * FROM binaryFile.`/etc/hostname`", "files are not read through other data sources"),
    ("SELECT * FROM json.`/tmp/x.json` AS j", "files are not read through other data sources"),
    ("SELECT * FROM meters WHERE v IN (SELECT 1 FROM orc.`/tmp/x`)", "files are not read through other"),
    ("SELECT * FROM delta.`/tmp`", "a Delta path must lie inside the warehouse"),
    ("SELECT * FROM delta.`{root}/../..`", "a Delta path must lie inside the warehouse"),
    ("SELECT * FROM delta.`{root}`", "a Delta path must lie inside the warehouse"),
])
def test_select_refuses_path_tables_outside_the_warehouse(wh, query, message):
    with pytest.raises(WarehouseError, match=message):
        list(statements.run(wh, query.format(root=wh.catalog.root)))


def test_delete_where_refuses_a_file_in_a_subquery(wh):
    with pytest.raises(WarehouseError, match="files are not read"):
        list(statements.run(wh, "DELETE FROM meters WHERE v IN (SELECT 1 FROM text.`/etc/hostname`)"))


def test_stream_query_reading_a_file_is_refused_at_create(wh):
    with pytest.raises(WarehouseError, match="files are not read"):
        list(statements.run(wh, "CREATE STREAM s INTERVAL(10s) SLIDING(10s) FROM meters INTO s_out AS "
                                "SELECT _twstart, count(*) AS n FROM parquet.`/etc`"))
    assert not list(wh.catalog.root.glob("power/s_out*")), "no output table"
    assert not (Path(os.environ["AIRFLOW_STREAM_HOME"]) / "streams" / "power" / "s.sql").exists()


def test_delta_tables_of_the_warehouse_and_the_projects_own_references_pass(wh, tmp_path):
    inside = parse(f"SELECT * FROM delta.`{wh.catalog.root / 'power' / 'meters'}`")[0]
    wh.check_path_tables(inside.query.tree)
    # the project's own references (stream state, outside the warehouse) carry delta_table's mark
    wh.check_path_tables(exp.select("1").from_(delta_table(tmp_path / "state" / "events")))
    # the same text typed by a user has no mark
    typed = parse(f"SELECT 1 FROM delta.`{tmp_path / 'state' / 'events'}`")[0].query.tree
    with pytest.raises(WarehouseError, match="inside the warehouse"):
        wh.check_path_tables(typed)


def test_cli_exits_2_and_starts_no_spark(tmp_path):
    home = tmp_path / "home"
    env = os.environ | {"AIRFLOW_STREAM_HOME": str(home)}
    result = subprocess.run([str(SCRIPT), "sql", "SELECT * FROM csv.`/etc/passwd` LIMIT 2"],
                            capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 2, result.stderr
    assert "csv.`/etc/passwd`: queries read tables by name" in result.stderr
    assert "root:" not in result.stdout
    assert not (home / "spark").exists()  # no local Spark session was started
