"""Window aggregates from the Arrow rows of ``%%trows`` (:mod:`airflow_stream_provider.streams.aggregates`):
which queries qualify, each window's rows, and each aggregate, against hand calculations. Spark is the
oracle for the same computations in ``test_local_compute.py``."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest

from airflow_stream_provider.sql.tdengine.parser import parse
from airflow_stream_provider.streams import aggregates
from airflow_stream_provider.streams.fired import TROWS_FROM, TROWS_TO
from airflow_stream_provider.streams.lateral import named

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def _tree(query: str):
    stmt = parse(f"CREATE STREAM d.s INTERVAL(10s) SLIDING(10s) FROM d.m PARTITION BY tbname INTO d.o AS {query}")[0]
    return named(stmt.query.tree)


@pytest.mark.parametrize(("query", "answered"), [
    ("SELECT _twstart ts, count(*) n, sum(v), avg(v), min(v), max(v), count(v) FROM %%trows", True),
    ("SELECT _twstart ts, %%1 m, count(*) n FROM %%trows", True),
    ("SELECT _twstart ts, _twend te FROM %%trows", False),  # no aggregate: a row per row of %%trows
    ("SELECT _twstart ts, count(*) * 2 n FROM %%trows", False),
    ("SELECT _twstart ts, sum(v) s FROM %%trows HAVING count(*) > 1", False),
    ("SELECT _twstart ts, count(DISTINCT v) FROM %%trows", False),
    ("SELECT _twstart ts, stddev(v) FROM %%trows", False),
    ("SELECT _twstart ts, sum(*) FROM %%trows", False),
    ("SELECT _twstart ts, count(*) n FROM d.m", False),
    ("SELECT _twstart ts, count(*) n FROM %%trows GROUP BY tbname", False),
])
def test_which_queries_are_answered_from_the_rows(query, answered):
    assert (aggregates.plan(_tree(query)) is not None) is answered


def _rows() -> pa.Table:
    """Two meters (and one without a name), one row a second; ``v`` with a NULL."""
    at = [T0 + timedelta(seconds=s) for s in (0, 1, 2, 3, 0, 2, 4, 1)]
    return pa.table({
        "ts": pa.array(at, pa.timestamp("ms", tz="UTC")),
        "tbname": pa.array(["a", "a", "a", "a", "b", "b", "b", None]),
        "v": pa.array([1, None, 3, 4, -5, 6, 7, 100], pa.int32()),
        "f": pa.array([0.5, 1.5, None, 2.0, 0.25, 0.125, 1.0, 9.0], pa.float64()),
    })


def _trigger(meter, start: int, end: int) -> dict:
    return {"%%1": meter, TROWS_FROM: T0 + timedelta(seconds=start), TROWS_TO: T0 + timedelta(seconds=end)}


TRIGGERS = [_trigger("a", 0, 2), _trigger("b", 0, 2), _trigger("a", 10, 12), _trigger(None, 0, 5),
            _trigger("a", 1, 3)]


def _slices(rows: pa.Table, triggers=TRIGGERS, *, inclusive=False) -> aggregates.Slices:
    found = aggregates.window_slices(rows, "ts", ["tbname"], triggers, end_inclusive=inclusive,
                                     bounds=(TROWS_FROM, TROWS_TO))
    assert found is not None
    return found


def _values(function: str, column: str | None, rows=None, **kwargs) -> list:
    rows = _rows() if rows is None else rows
    found = aggregates.aggregate(function, None if column is None else rows[column], _slices(rows, **kwargs))
    assert found is not None
    return found.to_pylist()


def test_each_window_counts_the_rows_of_its_group_in_its_span():
    # a [0, 2): a at 0 and 1; b at 0; a [10, 12): none; NULL meter [0, 5): its one row; a [1, 3): 1, 2
    assert _values("count", None) == [2, 1, 0, 1, 2]
    # the window's end included: a at 0, 1, 2; b at 0, 2; a at 1, 2, 3
    assert _values("count", None, inclusive=True) == [3, 2, 0, 1, 3]


def test_aggregates_skip_nulls_and_give_null_for_no_value():
    assert _values("count", "v") == [1, 1, 0, 1, 1]
    assert _values("sum", "v") == [1, -5, None, 100, 3]
    assert _values("avg", "v") == [1.0, -5.0, None, 100.0, 3.0]
    assert _values("min", "v") == [1, -5, None, 100, 3]
    assert _values("max", "v") == [1, -5, None, 100, 3]
    assert _values("sum", "f") == [2.0, 0.25, None, 9.0, 1.5]
    assert _values("avg", "f") == [1.0, 0.25, None, 9.0, 1.5]
    assert _values("max", "f", inclusive=True) == [1.5, 0.25, None, 9.0, 2.0]
    assert _values("min", "ts", inclusive=True)[:2] == [T0, T0]
    assert _values("max", "ts", inclusive=True)[4] == T0 + timedelta(seconds=3)


def test_floating_point_sums_add_in_row_order():
    rows = pa.table({"ts": pa.array([T0 + timedelta(seconds=s) for s in range(3)], pa.timestamp("us", tz="UTC")),
                     "tbname": ["a", "a", "a"], "f": [1e16, 1.0, -1e16]})
    # in order: (1e16 + 1) rounds to 1e16, then 0; a pairwise or exact sum would give 1
    assert _values("sum", "f", rows, triggers=[_trigger("a", 0, 3)]) == [0.0]
    assert math.fsum([1e16, 1.0, -1e16]) == 1.0


def test_values_spark_treats_otherwise_are_left_to_duckdb():
    nan = pa.table({"ts": pa.array([T0, T0 + timedelta(seconds=1)], pa.timestamp("us", tz="UTC")),
                    "tbname": ["a", "a"], "f": [float("nan"), 1.0]})
    slices = _slices(nan, [_trigger("a", 0, 2)])
    assert aggregates.aggregate("max", nan["f"], slices) is None  # Spark orders NaN above every number
    assert aggregates.aggregate("sum", nan["f"], slices).to_pylist()[0] != 0  # NaN: NaN in both
    huge = pa.table({"ts": nan["ts"], "tbname": ["a", "a"], "v": pa.array([2 ** 62, 2 ** 62], pa.int64())})
    assert aggregates.aggregate("sum", huge["v"], _slices(huge, [_trigger("a", 0, 2)])) is None  # overflow
    text = pa.table({"ts": nan["ts"], "tbname": ["a", "a"], "s": ["x", "y"]})
    assert aggregates.aggregate("max", text["s"], _slices(text, [_trigger("a", 0, 2)])) is None
    assert aggregates.aggregate("count", text["s"], _slices(text, [_trigger("a", 0, 2)])).to_pylist() == [2]


def test_a_key_value_of_another_type_is_left_to_duckdb():
    assert aggregates.window_slices(_rows(), "ts", ["tbname"], [_trigger(T0, 0, 2)], end_inclusive=False,
                                    bounds=(TROWS_FROM, TROWS_TO)) is None


def test_evaluate_gives_the_trigger_columns_then_the_items():
    items = aggregates.plan(_tree("SELECT _twstart ts, count(*) n, max(V) top FROM %%trows"))
    assert items is not None
    triggers = pa.table({"__idx": pa.array(range(len(TRIGGERS)), pa.int64()),
                         "_twstart": pa.array([t[TROWS_FROM] for t in TRIGGERS], pa.timestamp("us", tz="UTC"))})
    rows = _rows()
    out = aggregates.evaluate(items, rows, triggers, _slices(rows), lambda name: name)
    assert out is not None
    assert out.to_pylist()[0] == {"__idx": 0, "__c0": T0, "__c1": 2, "__c2": 1}
    assert out["__c1"].to_pylist() == [2, 1, 0, 1, 2]
    assert aggregates.evaluate(aggregates.plan(_tree("SELECT _twstart ts, max(w) FROM %%trows")), rows, triggers,
                               _slices(rows), lambda name: name) is None  # a column %%trows does not have


def test_windows_of_two_keys_match_both_null_safely():
    rows = pa.table({"ts": pa.array([T0 + timedelta(seconds=s) for s in range(6)], pa.timestamp("us", tz="UTC")),
                     "tbname": ["a", "a", "b", "b", "a", "a"],
                     "site": pa.array([1, 2, 1, None, None, 1], pa.int32())})
    triggers = [{"%%1": "a", "%%2": 1, TROWS_FROM: T0, TROWS_TO: T0 + timedelta(seconds=9)},
                {"%%1": "b", "%%2": None, TROWS_FROM: T0, TROWS_TO: T0 + timedelta(seconds=9)},
                {"%%1": "a", "%%2": None, TROWS_FROM: T0, TROWS_TO: T0 + timedelta(seconds=9)},
                {"%%1": "b", "%%2": 2, TROWS_FROM: T0, TROWS_TO: T0 + timedelta(seconds=9)}]
    found = aggregates.window_slices(rows, "ts", ["tbname", "site"], triggers, end_inclusive=True,
                                     bounds=(TROWS_FROM, TROWS_TO))
    assert found is not None
    assert aggregates.aggregate("count", None, found).to_pylist() == [2, 1, 1, 0]  # a/1 at 0 and 5; b/NULL at 3
    assert aggregates.aggregate("max", rows["ts"], found).to_pylist() == [
        T0 + timedelta(seconds=5), T0 + timedelta(seconds=3), T0 + timedelta(seconds=4), None]
    assert aggregates.window_slices(rows, "ts", ["tbname", "meter"], triggers, end_inclusive=True,
                                    bounds=(TROWS_FROM, TROWS_TO)) is None  # a key %%trows does not have
