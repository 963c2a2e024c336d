"""CREATE STREAM refuses a stream whose DAG ids another stream already has.

Ids are injective in the stored (lower-case) names, so a clash needs a definition file that the
store lists under another spelling: here ``streams/d/S.sql``, written by hand, against ``d.s``.
No Spark: the check comes before the stream's query is planned.
"""

from __future__ import annotations

import pytest

from airflow_stream_provider import statements
from airflow_stream_provider.sql import parse
from airflow_stream_provider.streams import lifecycle
from airflow_stream_provider.streams.store import StreamStore
from airflow_stream_provider.warehouse import Warehouse, WarehouseError

TEXT = "CREATE STREAM d.s PERIOD(10s) NOTIFY('ws://127.0.0.1:9/')"


def no_spark():
    raise AssertionError("no Spark needed")


def test_create_refuses_a_stream_whose_dag_id_is_taken(tmp_path):
    wh = Warehouse(tmp_path / "warehouse", spark=no_spark)
    list(statements.run(wh, "CREATE DATABASE d"))
    store = StreamStore(tmp_path)
    (tmp_path / "streams" / "d").mkdir(parents=True)
    (tmp_path / "streams" / "d" / "S.sql").write_text(TEXT.replace("d.s", "d.`S`") + ";\n")
    (stmt,) = parse(TEXT)
    with pytest.raises(WarehouseError, match=r"would have the DAG id stream__d__s of stream d\.S"):
        lifecycle.create(wh, stmt, store)
    assert not store.state_dir("d", "s").exists()


def test_create_accepts_streams_whose_names_differ_only_in_underscores_and_dots(tmp_path):
    wh = Warehouse(tmp_path / "warehouse", spark=no_spark)
    list(statements.run(wh, "CREATE DATABASE a__b; CREATE DATABASE a"))
    store = StreamStore(tmp_path)
    for text in ("CREATE STREAM a__b.c PERIOD(10s) NOTIFY('ws://127.0.0.1:9/')",
                 "CREATE STREAM a.b__c PERIOD(10s) NOTIFY('ws://127.0.0.1:9/')"):
        (stmt,) = parse(text)
        lifecycle.create(wh, stmt, store)
    assert sorted(store.names()) == [("a", "b__c"), ("a__b", "c")]
