"""NODELAY_CREATE_SUBTABLE (TDengine 3.4.1): every known group's output subtable exists right after CREATE.

TDengine's stream syntax page: "Specifies that the calculation output subtables/normal-table for each
group are created immediately when the stream is created. By default, output subtables/normal-table are
created only when the first calculated data is written." The groups known at CREATE are the distinct
PARTITION BY values (tbname, tags) of the trigger table's subtables. No row is written: the subtables
are empty until their group's first window fires.
"""

from __future__ import annotations

import pytest

from airflow_stream_provider.exceptions import StreamDefinitionError
from tests.conftest import sql

pytestmark = pytest.mark.spark

# three subtables, two of them with the same tag values: 3 groups by tbname, 2 by (gid, site)
SETUP = """CREATE DATABASE nd; USE nd;
           CREATE STABLE meters (ts TIMESTAMP, v INT) TAGS (gid INT, site VARCHAR(16));
           CREATE TABLE d1 USING meters TAGS (1, 'north');
           CREATE TABLE d2 USING meters TAGS (2, 'south');
           CREATE TABLE d3 USING meters TAGS (1, 'north');"""
QUERY = "AS SELECT _twstart ts, count(*) n FROM %%trows"


def _children(wh, stable: str) -> list[str]:
    rows = sql(wh, "SHOW TABLES")[0].table.to_pylist()
    return sorted(r["table_name"] for r in rows if r["stable_name"] == stable)


def test_subtables_by_tbname_exist_with_their_tags_and_no_rows(wh):
    sql(wh, SETUP)
    text = ("CREATE STREAM s1 INTERVAL(1m) SLIDING(1m) FROM meters PARTITION BY tbname INTO out1 "
            "NODELAY_CREATE_SUBTABLE OUTPUT_SUBTABLE(concat('o_', tbname)) TAGS (dev VARCHAR(16) AS tbname) " + QUERY)
    (result,) = sql(wh, text)
    assert "3 output subtables created" in result.message
    assert _children(wh, "out1") == ["o_d1", "o_d2", "o_d3"]
    assert sql(wh, "SELECT count(*) c FROM out1")[0].table.to_pylist() == [{"c": 0}]
    for name, dev in (("o_d1", "d1"), ("o_d2", "d2"), ("o_d3", "d3")):
        assert wh.catalog.lookup(_name(name), "nd").tags == {"dev": dev}
    shown = sql(wh, "SHOW CREATE STREAM s1")[0].table.to_pylist()[0]["sql"]
    assert "INTO out1 NODELAY_CREATE_SUBTABLE OUTPUT_SUBTABLE" in shown


def test_tag_groups_are_the_distinct_tag_values(wh):
    sql(wh, SETUP)
    sql(wh, "CREATE STREAM s2 INTERVAL(1m) SLIDING(1m) FROM meters PARTITION BY gid, site INTO out2 "
            "NODELAY_CREATE_SUBTABLE " + QUERY)
    children = _children(wh, "out2")
    assert len(children) == 2  # d1 and d3 share (1, 'north')
    assert sorted((t["gid"], t["site"]) for t in (wh.catalog.lookup(_name(c), "nd").tags for c in children)) == [
        (1, "north"), (2, "south")]
    north = next(c for c in children if wh.catalog.lookup(_name(c), "nd").tags["gid"] == 1)
    # the group's first window, [00:00, 00:01) closed by the row at 00:01:05, goes to the subtable made at CREATE
    from airflow_stream_provider.streams.run import run

    sql(wh, "INSERT INTO d1 VALUES ('2025-01-01 00:00:05', 1) ('2025-01-01 00:01:05', 2)")
    assert run(wh, "nd", "s2").written == 1
    assert _children(wh, "out2") == children
    assert sql(wh, "SELECT tbname, n FROM out2")[-1].table.to_pylist() == [{"tbname": north, "n": 1}]


def test_without_the_option_subtables_wait_for_results(wh):
    sql(wh, SETUP)
    sql(wh, "CREATE STREAM s3 INTERVAL(1m) SLIDING(1m) FROM meters PARTITION BY tbname INTO out3 " + QUERY)
    assert _children(wh, "out3") == []


def test_a_value_column_group_is_refused_by_name(wh):
    sql(wh, SETUP)
    with pytest.raises(StreamDefinitionError) as info:
        sql(wh, "CREATE STREAM s4 INTERVAL(1m) SLIDING(1m) FROM meters PARTITION BY v INTO out4 "
                "NODELAY_CREATE_SUBTABLE " + QUERY)
    assert info.value.clause == "NODELAY_CREATE_SUBTABLE"
    assert "PARTITION BY v is not a tag or tbname" in str(info.value)
    assert sql(wh, "SHOW STREAMS")[0].table.num_rows == 0


def _name(name: str):
    from airflow_stream_provider.model import TableName

    return TableName(name)
