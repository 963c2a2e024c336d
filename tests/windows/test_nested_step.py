"""The live detector's step for nested windows (TDengine 3.4.2): rows fed a batch at a time report
each leaf window once, and the same windows as one scan of all the rows; the expected windows are
worked out by hand below each case."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from airflow_stream_provider import model as m
from airflow_stream_provider.sql import parse
from airflow_stream_provider.windows.nested_step import NestedStep
from airflow_stream_provider.windows.trigger_plan import TriggerPlan

S = 1_000_000  # one second in microseconds


def plan(window: str, options: str = "") -> TriggerPlan:
    (stmt,) = parse(f"CREATE STREAM s WINDOW({window}) FROM t {options} INTO r AS SELECT _twstart, count(*) "
                    "FROM %%trows")
    assert isinstance(stmt, m.CreateStream)
    return TriggerPlan.build(stmt, "t", path="/nowhere", columns=["ts", "scope", "v"], ts_column="ts")


def feed(p: TriggerPlan, batches: list[list[tuple]]) -> list[list[tuple]]:
    """Each batch's reported windows: (kind, start s, end s, rows, opened, closed, outer start s)."""
    step, state, out = NestedStep(p, timeouts=False), None, []
    for version, rows in enumerate(batches):
        raw = pd.DataFrame(rows, columns=["ts", "scope", "v"])
        raw["ts"] = (raw["ts"] * S).astype(np.int64)
        raw["_change_type"], raw["_commit_version"] = "insert", version
        done = step.advance((), raw, state, 0)
        state = done.state
        out.append([(kind, int(w.wstart) // S, int(w.wend) // S, int(w.rows), bool(w.opened), bool(w.closed),
                     json.loads(w.outer)[0][0] // S) for kind, frame in done.parts for w in frame.itertuples()])
    return out


def closes(reported: list[list[tuple]]) -> list[list[tuple]]:
    return [[w for w in batch if w[5]] for batch in reported]


def test_flushed_leaves_are_reported_once_as_their_outer_window_closes():
    p = plan("STATE_WINDOW(scope) EXTEND(1) AS w_scope, COUNT_WINDOW(3, 1)",
             "STREAM_OPTIONS(FLUSH_ON_OUTER_CLOSE)")
    reported = feed(p, [[(10, "A", 1)], [(20, "A", 2)], [(30, "A", 3)], [(40, "B", 4)], [(50, "B", 5)]])
    # each leaf opens at its first row, reported in that row's batch only (from 10 s, 20 s, 30 s;
    # B's from 40 s and 50 s)
    assert [[w[1] for w in batch if w[4]] for batch in reported] == [[10], [20], [30], [40], [50]]
    reported = closes(reported)
    # A's three rows fill the leaf from 10 s at 30 s; B at 40 s closes A, and with it its two short
    # leaves (20-30 s, 2 rows; 30 s, 1 row); nothing more closes at 50 s, nothing is reported twice
    assert reported == [[], [], [("windows", 10, 30, 3, False, True, 10)],
                        [("windows", 20, 30, 2, False, True, 10), ("windows", 30, 30, 1, False, True, 10)], []]


def test_the_state_keeps_only_the_open_outer_window():
    p = plan("INTERVAL(1m) SLIDING(1m) AS w_min, COUNT_WINDOW(2)")
    step = NestedStep(p, timeouts=False)
    raw = pd.DataFrame({"ts": np.array([10, 20, 70, 80, 130]) * S, "scope": "a", "v": 1})
    raw["_change_type"], raw["_commit_version"] = "insert", 0
    done = step.advance((), raw, None, 0)
    # the minutes [0, 60 s) and [60 s, 120 s) closed (the group is at 130 s), each with its pair;
    # only the row of the open minute [120 s, 180 s) is kept
    assert [(int(w.wstart) // S, int(w.rows)) for _, f in done.parts for w in f.itertuples() if w.closed] == [
        (10, 2), (70, 2)]
    assert json.loads(done.state)["rows"]["ts"] == [130 * S]
