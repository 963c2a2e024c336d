"""Nested windows ``WINDOW(<trigger> AS w_outer, ..., <leaf>)`` and FLUSH_ON_OUTER_CLOSE (TDengine
3.4.2): the statements of TDengine's test_nested_window.py parse to their layers, and the limits of
TDengine's window-plan validator are refused with their position and the WINDOW clause."""

from __future__ import annotations

import pytest

from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.sql import parse

FLUSH = ("CREATE STREAM s WINDOW(STATE_WINDOW(scope) EXTEND(1) AS w_scope, COUNT_WINDOW(3, 1)) FROM src "
         "STREAM_OPTIONS(EVENT_TYPE(WINDOW_CLOSE) | FLUSH_ON_OUTER_CLOSE) INTO r (ts, leaf_rows, outer_rows, "
         "outer_start) AS SELECT _twstart, count(*), w_scope._twrownum, w_scope._twstart FROM %%trows")


def one(text: str) -> m.CreateStream:
    (stmt,) = parse(text)
    assert isinstance(stmt, m.CreateStream)
    return stmt


def test_outer_state_window_with_a_count_leaf_and_flush():
    stmt = one(FLUSH)
    assert stmt.nested
    assert [o.name for o in stmt.outer_windows] == ["w_scope"]
    outer = stmt.outer_windows[0].trigger
    assert isinstance(outer, m.StateWindow) and outer.extend == 1 and str(outer.keys[0]) == "scope"
    assert stmt.trigger == m.CountWindow(3, 1)
    assert stmt.leaf_name is None and stmt.options.flush_on_outer_close
    assert (stmt.outer_windows[0].position.line, stmt.outer_windows[0].position.column) == (1, 24)


@pytest.mark.parametrize(
    ("layers", "outer", "leaf", "leaf_name"),
    [  # the layer pairs of TDengine's nested-window tests
        ("INTERVAL(1h) SLIDING(1h) AS w_outer, STATE_WINDOW(st)",
         [m.IntervalWindow(m.Duration(1, "h"), m.Duration(1, "h"))], m.TriggerKind.STATE_WINDOW, None),
        ("INTERVAL(1h) SLIDING(1h) AS w_outer, EVENT_WINDOW(START WITH marker = 1 END WITH marker = 0)",
         [m.IntervalWindow(m.Duration(1, "h"), m.Duration(1, "h"))], m.TriggerKind.EVENT_WINDOW, None),
        ("SLIDING(10s) AS w_outer, SLIDING(1s) AS w_leaf", [m.SlidingTrigger(m.Duration(10, "s"))],
         m.TriggerKind.SLIDING, "w_leaf"),
        ("STATE_WINDOW(parent) EXTEND(1) AS w_parent, INTERVAL(10s) SLIDING(10s) AS w_leaf", None,
         m.TriggerKind.INTERVAL, "w_leaf"),
        ("COUNT_WINDOW(3) AS w, SESSION(ts, 1m)", [m.CountWindow(3)], m.TriggerKind.SESSION, None),
    ],
)
def test_layers(layers, outer, leaf, leaf_name):
    ts = "w_leaf._tcurrent_ts, w_outer._tcurrent_ts" if leaf is m.TriggerKind.SLIDING else "_twstart"
    stmt = one(f"CREATE STREAM s WINDOW({layers}) FROM src INTO r AS SELECT {ts}, count(*) FROM %%trows")
    if outer is not None:
        assert [o.trigger for o in stmt.outer_windows] == outer
    assert stmt.trigger.keyword is leaf and stmt.leaf_name == leaf_name


def test_eight_layers_are_the_most():
    outers = ", ".join(f"INTERVAL({n}m) SLIDING({n}m) AS w{9 - n}" for n in range(8, 1, -1))
    stmt = one(f"CREATE STREAM s WINDOW({outers}, COUNT_WINDOW(2, 1)) FROM t INTO r AS SELECT _twstart, count(*) "
               "FROM %%trows")
    assert [o.name for o in stmt.outer_windows] == [f"w{i}" for i in range(1, 8)]
    nine = ", ".join(f"INTERVAL({n}m) SLIDING({n}m) AS w{10 - n}" for n in range(9, 1, -1))
    with pytest.raises(StreamDefinitionError, match="has 9 layers; at most 8") as err:
        parse(f"CREATE STREAM s WINDOW({nine}, COUNT_WINDOW(2, 1)) FROM t INTO r AS SELECT _twstart FROM %%trows")
    assert err.value.clause == "WINDOW"


Q = " FROM t INTO r AS SELECT _twstart, count(*) FROM %%trows"
# (WINDOW(...) and what follows, words of the message, clause, column of the error)
REFUSED = [
    ("WINDOW(COUNT_WINDOW(3, 2) AS w_outer, COUNT_WINDOW(2, 1))" + Q, "overlaps: an outer COUNT_WINDOW", "WINDOW", 24),
    ("WINDOW(INTERVAL(10m) SLIDING(5m) AS w, COUNT_WINDOW(2))" + Q, "overlaps: an outer INTERVAL", "WINDOW", 24),
    ("WINDOW(STATE_WINDOW(a) AS w, COUNT_WINDOW(2))" + Q, "needs EXTEND(1)", "WINDOW", 24),
    ("WINDOW(STATE_WINDOW(a) EXTEND(1) TRUE_FOR(1s) AS w, COUNT_WINDOW(2))" + Q, "no TRUE_FOR and no ZEROTH_STATE",
     "WINDOW", 24),
    ("WINDOW(EVENT_WINDOW(START WITH a > 1 END WITH a < 0) TRUE_FOR(5s) AS w, COUNT_WINDOW(2))" + Q,
     "an outer EVENT_WINDOW takes no TRUE_FOR", "WINDOW", 24),
    ("WINDOW(PERIOD(1m) AS w, COUNT_WINDOW(2))" + Q, "PERIOD cannot be a layer", "WINDOW", 24),
    ("WINDOW(INTERVAL(1m) SLIDING(1m), COUNT_WINDOW(2))" + Q, "needs a name", "WINDOW", 24),
    ("WINDOW(INTERVAL(1m) SLIDING(1m) AS w, SESSION(ts, 1s) AS W)" + Q, "window name W is given to two layers",
     "WINDOW", 74),
    ("WINDOW(INTERVAL(1m) SLIDING(1m) AS w)" + Q, "give an outer layer and a leaf", "WINDOW", 17),
    ("WINDOW(WINDOW(SESSION(ts, 1s) AS a, COUNT_WINDOW(2)) AS w, COUNT_WINDOW(2))" + Q, "not another WINDOW",
     "WINDOW", 24),
    # the query: a table named as a layer; a layer's placeholder that its trigger does not give
    ("WINDOW(INTERVAL(1m) SLIDING(1m) AS q, COUNT_WINDOW(2, 1)) FROM t INTO r AS SELECT _twstart, count(*) FROM t q "
     "WHERE ts >= _twstart AND ts <= _twend", "q names a window layer", "WINDOW", None),
    ("WINDOW(INTERVAL(1m) SLIDING(1m) AS w, COUNT_WINDOW(2)) FROM t INTO r AS SELECT w._tcurrent_ts FROM %%trows",
     "w._tcurrent_ts: a window layer gives the placeholders of its INTERVAL trigger", "AS", None),
    # the options
    ("WINDOW(INTERVAL(1m) SLIDING(1m) AS w, COUNT_WINDOW(2)) FROM t STREAM_OPTIONS(IGNORE_NODATA_TRIGGER)" + Q[7:],
     "IGNORE_NODATA_TRIGGER applies to PERIOD, SLIDING and INTERVAL", "IGNORE_NODATA_TRIGGER", None),
    ("WINDOW(COUNT_WINDOW(4) AS w, SESSION(ts, 1s)) FROM t STREAM_OPTIONS(DELETE_RECALC)" + Q[7:],
     "every COUNT_WINDOW to slide by 1", "DELETE_RECALC", None),
    ("INTERVAL(1m) SLIDING(1m) FROM t STREAM_OPTIONS(FLUSH_ON_OUTER_CLOSE)" + Q[7:], "has no nested windows",
     "FLUSH_ON_OUTER_CLOSE", None),
]


@pytest.mark.parametrize(("rest", "words", "clause", "column"), REFUSED)
def test_refused(rest, words, clause, column):
    with pytest.raises(StreamDefinitionError) as err:
        parse("CREATE STREAM s " + rest)
    assert words in err.value.message and err.value.clause == clause
    assert err.value.line == 1
    if column is not None:
        assert err.value.column == column


def test_the_statement_reads_back():
    stmt = one(FLUSH)
    assert [str(o) for o in stmt.outer_windows] == ["STATE_WINDOW(scope) EXTEND(1) AS w_scope"]


def test_idle_timeout_and_max_delay_are_refused_with_nested_windows_where_the_window_clause_is():
    for option in ("IDLE_TIMEOUT(10s) | EVENT_TYPE(IDLE)", "MAX_DELAY(5s)"):
        with pytest.raises(StreamDefinitionError, match="with nested windows") as err:
            one("CREATE STREAM s\n  WINDOW(COUNT_WINDOW(4) AS w, COUNT_WINDOW(2)) FROM t "
                f"STREAM_OPTIONS({option}) INTO r AS SELECT count(*) FROM %%trows")
        assert (err.value.line, err.value.column, err.value.clause) == (2, 3, "WINDOW")
