"""CREATE STREAM ... ROLLUP BY against the catalog (TDengine 3.4.2), without Spark.

TDengine's syntax page: the tag "must be a VARCHAR or NCHAR tag column on the trigger supertable";
``stream_rollup_basic.py`` refuses a child table as the trigger table ("super table"). A statement that
fails those checks is refused with its position: nothing is recorded and no output table is made. One
that passes them is created, even over a subtable whose path is illegal: as in TDengine's
``stream_rollup_expand.py``, that fails the stream when it runs (``tests/streams/test_rollup_streams.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_stream_provider import statements
from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.model import TableName
from airflow_stream_provider.warehouse import Warehouse

SETUP = ["CREATE DATABASE r", "USE r",
         "CREATE STABLE meters (ts TIMESTAMP, current FLOAT) TAGS (location NCHAR(64), gid INT)",
         "CREATE TABLE t1 USING meters TAGS ('A.B.C', 1)", "CREATE TABLE t2 USING meters TAGS ('A.B.D', 2)",
         "CREATE TABLE plain (ts TIMESTAMP, v INT)"]
QUERY = "INTO o AS SELECT _twstart, count(*) FROM %%trows"


@pytest.fixture
def home(tmp_path, monkeypatch) -> Warehouse:
    def no_spark():
        raise AssertionError("CREATE STREAM ... ROLLUP BY asked for Spark")

    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(tmp_path))
    wh = Warehouse(Path(tmp_path) / "warehouse", spark=no_spark)
    for text in SETUP:
        list(statements.run(wh, text))
    return wh


@pytest.mark.parametrize(("text", "words"), [
    ("CREATE STREAM s INTERVAL(1h) SLIDING(1h) FROM t1 ROLLUP BY location " + QUERY,
     "rolls up a tag of a super table; r.t1 is a subtable"),
    ("CREATE STREAM s INTERVAL(1h) SLIDING(1h) FROM plain ROLLUP BY v " + QUERY,
     "r.plain is a regular table"),
    ("CREATE STREAM s INTERVAL(1h) SLIDING(1h) FROM meters ROLLUP BY gid " + QUERY,
     "the tag is INT; a rollup path is a VARCHAR or NCHAR tag"),
    ("CREATE STREAM s INTERVAL(1h) SLIDING(1h) FROM meters ROLLUP BY current " + QUERY,
     "r.meters has no tag current"),
])
def test_create_refuses_with_the_rollup_clause_and_records_nothing(home, text, words):
    with pytest.raises(StreamDefinitionError) as info:
        list(statements.run(home, text))
    err = info.value
    assert words in str(err)
    assert err.clause == "ROLLUP BY"
    assert (err.line, err.column) == (1, text.index("ROLLUP BY") + 1)
    shown = list(statements.run(home, "SHOW STREAMS"))[0].table.to_pylist()
    assert shown == []
    assert home.catalog.lookup(TableName("o"), "r") is None
