"""Schemaless writes on the warehouse (the Delta Lake kernel, no Spark): TDengine's rules for
tables and columns, one commit per supertable, retries that overwrite, and bad input that writes
nothing. Expected rows are the lines written, read back from the Delta tables."""

from __future__ import annotations

import pytest
from deltalake import DeltaTable

from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import StreamError
from airflow_stream_provider.serve import lineproto, schemaless
from airflow_stream_provider.warehouse import Warehouse
from airflow_stream_provider.warehouse import schemaless as writes
from airflow_stream_provider.warehouse.catalog import TableInfo


@pytest.fixture
def wh(tmp_path, monkeypatch) -> Warehouse:
    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(tmp_path))
    warehouse = Warehouse(tmp_path / "warehouse")
    warehouse.catalog.create_database("farm", "ms", False)
    return warehouse


def write(wh: Warehouse, text: str, precision: str = "ms", name_tag: str | None = None) -> int:
    return writes.write(wh, "farm", schemaless.rows_of(lineproto.parse(text), precision, 0, name_tag))


def info(wh: Warehouse, name: str) -> TableInfo:
    found = wh.catalog.lookup(m.TableName(name), "farm")
    assert isinstance(found, TableInfo)
    return found


def rows(wh: Warehouse, name: str) -> list[dict]:
    table = DeltaTable(str(info(wh, name).path)).to_pyarrow_table()
    return sorted(table.to_pylist(), key=lambda r: (r["tbname"], r["_ts"]))


def version(wh: Warehouse, name: str) -> int:
    return DeltaTable(str(info(wh, name).path)).version()


def test_one_commit_per_supertable_and_a_retry_overwrites(wh):
    body = "weather,location=north t=1,h=2i 1000\nweather,location=south t=3,h=4i 2000\nsoil,plot=a m=0.5 1000"
    assert write(wh, body) == 3
    first = version(wh, "weather"), version(wh, "soil")
    assert write(wh, body) == 3  # sent again after a timeout
    assert (version(wh, "weather"), version(wh, "soil")) == (first[0] + 1, first[1] + 1)
    assert sorted((r["location"], r["t"], r["h"]) for r in rows(wh, "weather")) == [("north", 1.0, 2),
                                                                                     ("south", 3.0, 4)]
    assert len(rows(wh, "soil")) == 1


def test_new_fields_and_tags_become_columns_and_strings_widen(wh):
    write(wh, 'st,t1=3 c1=3i64,c5="pass" 1000')
    write(wh, 'st,t1=3,t9=x c1=3i64,c5="passit",c6=true 2000')
    columns = {c.name: str(c.dtype) for c in info(wh, "st").columns}
    assert (columns["c5"], columns["c6"], columns["t9"]) == ("VARCHAR(6)", "BOOL", "NCHAR(1)")
    assert [r["c6"] for r in sorted(rows(wh, "st"), key=lambda r: r["_ts"])] == [None, True]
    # a new tag on an existing subtable: the subtable keeps the tags it was created with
    assert len({r["tbname"] for r in rows(wh, "st")}) == 2


@pytest.mark.parametrize("body", [
    "weather,location=north t=1i 5000",  # t is DOUBLE: a BIGINT value is a type conflict
    "weather,location=north t=1 5000\nweather,location=north t=oops 6000",  # a bad value on line 2
    "weather,location=north h=1 5000",  # h is BIGINT: a DOUBLE value
    "weather,location=north location=1 5000",  # a field named as a tag
    "weather,tbname=x t=1 5000",  # tbname is reserved
    "we/../ather,location=north t=1 5000",  # a name breaking the name rule
])
def test_bad_input_writes_nothing(wh, body):
    write(wh, "weather,location=north t=1,h=2i 1000")
    before = version(wh, "weather"), rows(wh, "weather")
    with pytest.raises((StreamError, lineproto.ProtocolError)):
        write(wh, body)
    assert (version(wh, "weather"), rows(wh, "weather")) == before


def test_a_request_into_two_supertables_is_undone_when_the_second_fails(wh):
    write(wh, "a,k=1 v=1 1000\nb,k=1 v=1i 1000")
    before = rows(wh, "a"), rows(wh, "b")
    with pytest.raises(StreamError):  # b.v is BIGINT: refused before anything is written
        write(wh, "a,k=1 v=2 2000\nb,k=1 v=2.5 2000")
    assert (rows(wh, "a"), rows(wh, "b")) == before


def test_name_tag_and_missing_database(wh):
    write(wh, "cpu,tname=host.1,zone=a load=1 1000", name_tag="tname")
    assert [r["tbname"] for r in rows(wh, "cpu")] == ["host_1"]
    assert "tname" not in {c.name for c in info(wh, "cpu").columns}
    with pytest.raises(writes.DatabaseMissing):
        writes.write(wh, "nowhere", schemaless.rows_of(lineproto.parse("m,a=b v=1 1"), "ms", 0))
    with pytest.raises(StreamError, match="not a supertable"):
        wh.catalog.create_table("farm", "plain", info(wh, "cpu").columns[:2], if_not_exists=False)
        write(wh, "plain,k=1 v=1 1000")
