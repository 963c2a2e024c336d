"""The computations DuckDB runs in the process equal Spark's, value for value and type for type.

A live batch with few rows is computed without a Spark job (:mod:`airflow_stream_provider.streams.duckdb`),
from the same SQL Spark would run. Spark is the oracle here: each query below is computed both ways for
the same fired windows, over rows with NULLs and negative values, and the results must agree. Queries
with a part DuckDB could read otherwise (a string literal, a function outside the common set) are
left to Spark.
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from airflow_stream_provider.streams import duckdb
from airflow_stream_provider.streams.fire.windows import pending_windows
from airflow_stream_provider.streams.runtime import StreamRuntime
from airflow_stream_provider.streams.store import StreamStore
from tests.conftest import sql

pytestmark = pytest.mark.spark

#: computed in the process: only parts that mean the same in DuckDB and Spark (options, query)
LOCAL = [
    ("", "SELECT _twstart ts, count(*) n, sum(v) s, avg(v) a, min(v) lo, max(v) hi FROM %%trows"),
    ("", "SELECT _twstart ts, _twend te, _twduration d, _twrownum r, count(v) n, sum(v) * 2 + 1 x, avg(f) / 3 y "
         "FROM %%trows"),
    ("STREAM_OPTIONS(PRE_FILTER(v > 3 AND f IS NOT NULL))", "SELECT _twstart ts, count(*) n, sum(f) s FROM %%trows"),
    ("", "SELECT _twstart ts, sum(CASE WHEN v > 5 THEN 1 ELSE 0 END) big, coalesce(max(f), -1.0) top FROM %%trows"),
    ("", "SELECT _twstart ts, cast(sum(v) AS DOUBLE) / count(*) mean, count(DISTINCT v) kinds FROM %%trows"),
    ("", "SELECT _twstart ts, %%1 meter, max(v) - min(v) width, abs(min(f)) m FROM %%trows"),
    ("STREAM_OPTIONS(PRE_FILTER(v BETWEEN 2 AND 7 OR f < 0))", "SELECT _twstart ts, sum(v) s FROM %%trows"),
]
#: left to Spark: a string literal (read in the session's time zone when compared with a time), a
#: function outside the common set, a subtable (read with its name as a string)
SPARK = [
    "SELECT _twstart ts, count(*) n, 'x' label FROM %%trows",
    "SELECT _twstart ts, stddev(v) s FROM %%trows",
    "SELECT _twstart ts, count(*) n FROM lc.d0",
]


@pytest.fixture
def wh(wh):
    rng = np.random.default_rng(5)
    sql(wh, "CREATE DATABASE lc PRECISION 'ms'; USE lc; "
            "CREATE STABLE meters (ts TIMESTAMP, v INT, f DOUBLE) TAGS (site INT); "
            "CREATE TABLE d0 USING meters TAGS (0); CREATE TABLE d1 USING meters TAGS (1); "
            "CREATE TABLE d2 USING meters TAGS (2)")
    return wh, rng


def _rows(rng, second: int) -> str:
    out = []
    for meter in range(3):
        v = "NULL" if rng.random() < 0.15 else str(int(rng.integers(-3, 10)))
        f = "NULL" if rng.random() < 0.15 else f"{rng.normal(0, 5):.3f}"
        out.append(f"d{meter} VALUES ('2025-01-01 00:00:{second:02d}', {v}, {f})")
    return "INSERT INTO " + " ".join(out)


def _fired(wh, name: str, query: str, rng, options: str = ""):
    sql(wh, f"CREATE STREAM lc.{name} INTERVAL(10s) SLIDING(10s) FROM lc.meters PARTITION BY tbname {options} "
            f"INTO lc.out_{name} AS {query}")
    for second in range(0, 41, 2):
        sql(wh, _rows(rng, second))
    store = StreamStore()
    stored = store.get("lc", name)
    state = store.load_state("lc", name)
    runtime = StreamRuntime(wh, stored.statement, "lc", text=stored.text)
    fired, _, _ = pending_windows(runtime, stored, state, lambda _message: None)
    # four windows of ten seconds closed in each of three meters (fewer past a PRE_FILTER)
    assert 9 <= len(fired) <= 12
    return runtime, fired


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12) or (math.isnan(a) and math.isnan(b))
    return a == b


@pytest.mark.parametrize(("options", "query"), LOCAL)
def test_local_results_equal_spark_results(wh, options, query):
    wh, rng = wh
    runtime, fired = _fired(wh, f"s{LOCAL.index((options, query))}", query, rng, options)
    _same_as_spark(wh, runtime, fired, query)


def _same_as_spark(wh, runtime, fired, query: str) -> None:
    """The batch computed in the process equals Spark's computation of it, in every value and type."""
    with wh.scratch():
        found = runtime.duckdb_compute.results(fired)
        assert found is not None, f"{query} should run in the process"
        frame = runtime.compute.frame(fired)
        expected = frame.toArrow()
    got = duckdb.cast_to(found, to_arrow_schema(frame.schema, timezone="UTC"))
    assert got.schema.names == expected.schema.names
    assert [f.type for f in got.schema] == [pa.timestamp(f.type.unit, "UTC") if pa.types.is_timestamp(f.type)
                                            else f.type for f in expected.schema]
    key = expected.schema.names[0]  # __idx: the trigger
    got_rows = sorted(got.to_pylist(), key=lambda r: r[key])
    expected_rows = sorted(expected.to_pylist(), key=lambda r: r[key])
    assert len(got_rows) == len(expected_rows) == len(fired)
    for mine, theirs in zip(got_rows, expected_rows, strict=True):
        assert all(_same(mine[c], theirs[c]) for c in theirs), (mine, theirs)


#: placeholders and plain aggregates of %%trows: computed from the Arrow rows, without DuckDB's query
AGGREGATES = [
    ("", "SELECT _twstart ts, _twend te, count(*) n FROM %%trows"),
    ("", "SELECT _twstart ts, %%1 meter, count(f) c, sum(f) s, avg(f) a, min(f) lo, max(f) hi FROM %%trows"),
    ("", "SELECT _twstart ts, count(V) c, sum(v) s, avg(v) a, min(ts) first_at, max(ts) last_at FROM %%trows"),
    ("STREAM_OPTIONS(PRE_FILTER(v > 3 AND f IS NOT NULL))", "SELECT _twstart ts, count(*) n, avg(f) a FROM %%trows"),
]


@pytest.mark.parametrize(("options", "query"), AGGREGATES)
def test_window_aggregates_from_the_rows_equal_spark_results(wh, options, query, monkeypatch):
    wh, rng = wh
    runtime, fired = _fired(wh, f"a{AGGREGATES.index((options, query))}", query, rng, options)
    queried = duckdb.run

    def no_lateral(sql, tables):  # PRE_FILTER may still run in DuckDB; the windows' query may not
        assert "__triggers" not in tables, f"{query} should be computed from the rows"
        return queried(sql, tables)

    monkeypatch.setattr(duckdb, "run", no_lateral)
    _same_as_spark(wh, runtime, fired, query)


@pytest.mark.parametrize("query", SPARK)
def test_queries_with_parts_duckdb_reads_otherwise_go_to_spark(wh, query):
    wh, rng = wh
    runtime, fired = _fired(wh, f"p{SPARK.index(query)}", query, rng)
    with wh.scratch():
        assert runtime.duckdb_compute.results(fired) is None
        assert runtime.compute.frame(fired).count() == len(fired)


def test_many_rows_go_to_spark(wh, monkeypatch):
    wh, rng = wh
    runtime, fired = _fired(wh, "many", LOCAL[0][1], rng)
    monkeypatch.setattr(duckdb, "LOCAL_ROWS", 5)  # a window holds 5 or 6 rows of its meter
    with wh.scratch():
        assert runtime.duckdb_compute.results(fired) is None


#: PERIOD queries over a whole table (TDengine's own example first): computed in the process, the
#: table's files scanned by DuckDB
TABLES = [
    "SELECT cast(_tlocaltime / 1000000 AS TIMESTAMP) ts, count(*) n FROM lc.meters",
    "SELECT cast(_tlocaltime / 1000000 AS TIMESTAMP) ts, count(v) c, sum(v) s, avg(f) a, min(f) lo, max(ts) last "
    "FROM lc.meters WHERE v > 2 OR f IS NULL",
    "SELECT cast(_tlocaltime / 1000000 AS TIMESTAMP) ts, cast(_tlocaltime / 7 AS BIGINT) seventh, count(*) n, "
    "sum(v * site) w FROM lc.meters",
]
#: PERIOD instants in nanoseconds: whole milliseconds and halves (Spark truncates ``1.5`` to 1 where
#: DuckDB's own cast rounds it to 2) on both sides of the epoch (truncated toward zero, not floored)
INSTANTS = [1_735_689_600_123_500_000, 1_735_689_610_000_000_000, 1_735_689_620_000_999_999, -1_500_000]


def _period(wh, name: str, query: str, rng):
    from airflow_stream_provider.streams.fired import Fired

    sql(wh, f"CREATE STREAM lc.{name} PERIOD(10s) INTO lc.out_{name} AS {query}")
    for second in range(0, 41, 2):
        sql(wh, _rows(rng, second))
    stored = StreamStore().get("lc", name)
    runtime = StreamRuntime(wh, stored.statement, "lc", text=stored.text)
    return runtime, [Fired(i, {"_tlocaltime": t, "_tgrpid": 0}) for i, t in enumerate(INSTANTS)]


@pytest.mark.parametrize("query", TABLES)
def test_queries_over_whole_tables_computed_in_the_process_equal_spark_results(wh, query):
    wh, rng = wh
    runtime, fired = _period(wh, f"t{TABLES.index(query)}", query, rng)
    _same_as_spark(wh, runtime, fired, query)


#: over a whole table, left to Spark: a cast to an integer of a value of a type unknown before the
#: query runs (a sum: DuckDB's cast rounds a fraction Spark truncates), and one that leaves the
#: integer's range (DuckDB fails; Spark gives the error)
TABLES_SPARK = [
    "SELECT cast(_tlocaltime / 1000000 AS TIMESTAMP) ts, cast(sum(f) AS BIGINT) n FROM lc.meters",
    "SELECT cast(_tlocaltime / 1000000 AS TIMESTAMP) ts, cast(_tlocaltime / 1000 AS INT) n FROM lc.meters",
]


@pytest.mark.parametrize("query", TABLES_SPARK)
def test_whole_table_queries_duckdb_cannot_compute_as_spark_go_to_spark(wh, query):
    wh, rng = wh
    runtime, fired = _period(wh, f"u{TABLES_SPARK.index(query)}", query, rng)
    with wh.scratch():
        assert runtime.duckdb_compute.results(fired[:3]) is None


def test_large_tables_go_to_spark(wh, monkeypatch):
    wh, rng = wh
    runtime, fired = _period(wh, "big", TABLES[0], rng)
    monkeypatch.setattr(duckdb, "LOCAL_TABLE_ROWS", 62)  # three meters, 21 seconds: 63 rows
    with wh.scratch():
        assert runtime.duckdb_compute.results(fired) is None
    monkeypatch.setattr(duckdb, "LOCAL_TABLE_ROWS", 63)
    with wh.scratch():
        assert runtime.duckdb_compute.results(fired) is not None


def test_spark_casts_to_integers_are_truncations_in_duckdb():
    types = (("__triggers", (("a", "bigint"), ("d", "double"))),)
    found = duckdb.duckdb_sql("SELECT CAST(`__t`.`a` / 10 AS BIGINT) x, CAST(`__t`.`d` AS INT) y "
                             "FROM `__triggers` `__t`", types)
    assert found is not None
    rows = pa.table({"a": pa.array([15, -15, 19], pa.int64()), "d": [-3.5, 2.5, 0.999]})
    # Spark truncates toward zero: 1.5 -> 1, -1.5 -> -1, 1.9 -> 1; -3.5 -> -3, 2.5 -> 2, 0.999 -> 0
    # (DuckDB's cast alone rounds: 2, -2, 2; -4, 2, 1)
    assert duckdb.run(found, {"__triggers": rows}).to_pylist() == [
        {"x": 1, "y": -3}, {"x": -1, "y": 2}, {"x": 1, "y": 0}]
    # a value of an unknown type, a decimal literal (Spark divides decimals with a precision of its
    # own), a time from a fraction: left to Spark
    assert duckdb.duckdb_sql("SELECT CAST(`__t`.`a` / 10 AS BIGINT) FROM `__triggers` `__t`") is None
    assert duckdb.duckdb_sql("SELECT CAST(`__t`.`a` / 1.5 AS BIGINT) FROM `__triggers` `__t`", types) is None
    assert duckdb.duckdb_sql("SELECT TIMESTAMP_MILLIS(`__t`.`d`) FROM `__triggers` `__t`", types) is None
    assert "EPOCH_MS(" in (duckdb.duckdb_sql("SELECT TIMESTAMP_MILLIS(`__t`.`a`) FROM `__triggers` `__t`", types) or "")


#: output subtables and tags named without expressions are found in the process, as Spark finds them
OUTPUT_GROUPS = [
    ("out_g0", "CREATE STREAM lc.g0 INTERVAL(10s) SLIDING(10s) FROM lc.meters PARTITION BY tbname, site "
               "INTO lc.out_g0 AS SELECT _twstart ts, count(*) n FROM %%trows", True),
    ("out_g1", "CREATE STREAM lc.g1 INTO lc.out_g1 AS SELECT _wstart, count(*) n FROM lc.meters "
               "PARTITION BY tbname INTERVAL(10s)", True),
    ("out_g2", "CREATE STREAM lc.g2 INTERVAL(10s) SLIDING(10s) FROM lc.meters PARTITION BY tbname "
               "INTO lc.out_g2 OUTPUT_SUBTABLE(concat('m_', tbname)) AS SELECT _twstart ts, count(*) n FROM %%trows",
     False),
]


@pytest.mark.parametrize(("table", "create", "plain"), OUTPUT_GROUPS)
def test_output_subtables_and_tags_without_spark_equal_spark(wh, table, create, plain):
    from airflow_stream_provider.streams.write import _plain_group_rows, _spark_group_rows

    wh, rng = wh
    sql(wh, create)
    for second in range(0, 41, 2):
        sql(wh, _rows(rng, second))
    store = StreamStore()
    name = create.split()[2].split(".")[1]
    stored = store.get("lc", name)
    runtime = StreamRuntime(wh, stored.statement, "lc", text=stored.text)
    fired, _, _ = pending_windows(runtime, stored, store.load_state("lc", name), lambda _message: None)
    seen = {}
    for f in fired:
        seen.setdefault(f.group_id, f)
    assert len(seen) == 3  # the three meters
    plan = runtime.output_plan
    found = _plain_group_rows(runtime, plan, seen)
    if not plain:
        assert found is None  # OUTPUT_SUBTABLE is an expression: Spark evaluates it
        return
    with wh.scratch():
        expected = _spark_group_rows(runtime, plan, seen)
    assert sorted(found) == sorted(expected)
    assert all(len(row) == 2 + len(plan.tags) for row in found)
