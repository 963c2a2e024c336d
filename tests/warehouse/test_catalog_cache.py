"""Kept catalog lookups: a server looks its tables up once, and still sees what this process and
other processes change (tables and subtables created or dropped, columns added).

The other process is a real one running the project's own statements on the same warehouse.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from airflow_stream_provider import statements
from airflow_stream_provider.model import TableName
from airflow_stream_provider.warehouse import Warehouse, catalog


@pytest.fixture
def power(tmp_path, monkeypatch) -> Warehouse:
    monkeypatch.setattr(catalog, "RECENT_S", 0.05)  # folders changed more than 50 ms ago are trusted
    warehouse = Warehouse(tmp_path / "wh")
    list(statements.run(warehouse, "CREATE DATABASE power PRECISION 'ms'; CREATE STABLE power.meters "
                        "(ts TIMESTAMP, v BIGINT) TAGS (site INT); CREATE TABLE power.plain (ts TIMESTAMP, v INT); "
                        "INSERT INTO power.d1 USING power.meters TAGS (1) VALUES (1000, 1)"))
    time.sleep(0.1)
    return warehouse


def _elsewhere(warehouse: Warehouse, text: str) -> None:
    """Run ``text`` in another process on the same warehouse."""
    code = ("import sys\nfrom airflow_stream_provider import statements\nfrom airflow_stream_provider.warehouse "
            "import Warehouse\nlist(statements.run(Warehouse(sys.argv[1]), sys.argv[2]))")
    done = subprocess.run([sys.executable, "-c", code, str(warehouse.catalog.root), text], capture_output=True,
                          text=True, env=os.environ | {"PYTHONPATH": os.pathsep.join(sys.path)}, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def _lookup(warehouse: Warehouse, name: str):
    return Warehouse(warehouse.catalog.root).catalog.lookup(TableName(name), "power")  # a request's own catalog


def test_lookups_are_kept_between_requests_and_forgotten_on_this_process_ddl(power):
    first = _lookup(power, "d1")
    assert first is not None and first.tags == {"site": 1}
    assert _lookup(power, "d1") is first  # kept: the next request's catalog finds the same
    list(statements.run(power, "DROP TABLE power.d1"))
    assert _lookup(power, "d1") is None  # at once, however recent the change
    list(statements.run(power, "INSERT INTO power.d1 USING power.meters TAGS (2) VALUES (1000, 1)"))
    assert _lookup(power, "d1").tags == {"site": 2}


def test_another_process_s_changes_are_seen_on_the_next_lookup(power):
    assert _lookup(power, "d1").tags == {"site": 1}
    assert [c.name for c in _lookup(power, "meters").columns] == ["ts", "v", "tbname", "site"]
    assert _lookup(power, "plain") is not None
    _elsewhere(power, "DROP TABLE power.d1; DROP TABLE power.plain; "
                      "INSERT INTO power.d2 USING power.meters TAGS (7) VALUES (1000, 1)")
    assert _lookup(power, "d1") is None
    assert _lookup(power, "plain") is None
    assert _lookup(power, "d2").tags == {"site": 7}
    time.sleep(0.1)  # kept again, then a column added elsewhere (a schemaless write's new field)
    assert _lookup(power, "d2") is _lookup(power, "d2")
    _line(power, "lp,site=a v=1i 1000000000")
    time.sleep(0.1)
    assert [c.name for c in _lookup(power, "lp").data_columns] == ["_ts", "v"]
    code = ("import sys\nfrom airflow_stream_provider.warehouse import Warehouse\n"
            "from tests.warehouse.test_catalog_cache import _line\n"
            "_line(Warehouse(sys.argv[1]), 'lp,site=a v=2i,extra=0.5 2000000000')")
    done = subprocess.run([sys.executable, "-c", code, str(power.catalog.root)], capture_output=True, text=True,
                          env=os.environ | {"PYTHONPATH": os.pathsep.join(sys.path)}, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert [c.name for c in _lookup(power, "lp").data_columns] == ["_ts", "v", "extra"]


def _line(warehouse: Warehouse, text: str) -> None:
    """Write InfluxDB line protocol ``text`` into ``power`` (nanosecond times)."""
    from airflow_stream_provider.serve import lineproto, schemaless
    from airflow_stream_provider.warehouse import schemaless as writes

    writes.write(warehouse, "power", schemaless.rows_of(lineproto.parse(text), "ns", 0, None))
