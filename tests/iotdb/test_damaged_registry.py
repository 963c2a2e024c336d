"""A damaged ``triggers/registry.json`` refuses only the writes a trigger could match that it
cannot read: IoTDB series writes, with a message naming the file and how to repair it. A TDengine
table's write goes on (with a warning that no trigger fired), and without a registry nothing is
refused (T12 of the review)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from airflow_stream_provider.exceptions import StreamError
from tests.conftest import sql
from tests.iotdb.test_triggers import cli, create, points

pytestmark = pytest.mark.spark

SETUP = ("CREATE DATABASE power; CREATE TABLE power.m1 (ts TIMESTAMP, v DOUBLE); CREATE DATABASE root.ln; "
         "CREATE TIMESERIES root.ln.d1.s1 WITH DATATYPE=INT32, ENCODING=PLAIN")


@pytest.mark.parametrize("damage", ['{"triggers": [{"id": ', '{"triggers": [{"id": "x"}]}', "[]"])
def test_a_damaged_registry_refuses_iotdb_writes_only(wh, damage):
    sql(wh, SETUP)
    create(wh, "rec", "counters.Recorder", "root.ln.**")
    registry = Path(os.environ["AIRFLOW_STREAM_HOME"]) / "triggers" / "registry.json"
    registry.write_text(damage)
    done = cli("sql", "INSERT INTO power.m1 VALUES ('2025-01-01 00:00:00', 1.5)")
    assert done.returncode == 3, done.stderr
    assert f"corrupt state file {registry}" in done.stderr and "no trigger fired" in done.stderr
    assert [row[-1] for row in points(wh, "SELECT v FROM power.m1")] == [1.5]
    refused = cli("sql", "INSERT INTO root.ln.d1(time, s1) VALUES (1, 1)")
    assert refused.returncode == 2
    assert f"corrupt state file {registry}" in refused.stderr
    assert "IoTDB writes are refused until it is repaired" in refused.stderr
    with pytest.raises(StreamError, match="IoTDB writes are refused"):
        sql(wh, "INSERT INTO root.ln.d1(time, s1) VALUES (2, 2)")
    registry.unlink()  # no registry: no trigger, nothing refused
    assert cli("sql", "INSERT INTO root.ln.d1(time, s1) VALUES (3, 3)").returncode == 0
