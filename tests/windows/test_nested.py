"""Nested windows in the window core (TDengine 3.4.2): the scenarios of TDengine's
test_nested_window.py with our own rows, the expected windows worked out by hand below each case."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from airflow_stream_provider import model as m
from airflow_stream_provider.sql import parse
from airflow_stream_provider.windows.core import scan
from airflow_stream_provider.windows.nested import layer_rows, scan_nested
from airflow_stream_provider.windows.spec import WindowSpec

S = 1_000_000  # one second in microseconds


def specs(window: str) -> tuple[list[WindowSpec], WindowSpec]:
    (stmt,) = parse(f"CREATE STREAM s WINDOW({window}) FROM t INTO r AS SELECT _twstart, count(*) FROM %%trows")
    assert isinstance(stmt, m.CreateStream)
    return [WindowSpec.from_trigger(o.trigger) for o in stmt.outer_windows], WindowSpec.from_trigger(stmt.trigger)


def closed(found: pd.DataFrame, *outer: str) -> list[tuple]:
    w = found[found["closed"].astype(bool)].sort_values(["wstart", "wend"])
    return [tuple(int(v) for v in row) for row in w[["wstart", "wend", "rows", *outer]].itertuples(index=False)]


def frame(**columns) -> pd.DataFrame:
    df = pd.DataFrame(columns)
    df["ts"] = (df["ts"] * S).astype(np.int64)
    return df


# an outer STATE_WINDOW(scope) EXTEND(1) around COUNT_WINDOW(3, 1): north at 10 s, 20 s, 30 s, south at 40 s
SCOPES = frame(ts=[10, 20, 30, 40], _state=["north", "north", "north", "south"], _valid=[True] * 4)


def test_outer_close_drops_the_open_leaves():
    outer, leaf = specs("STATE_WINDOW(scope) EXTEND(1) AS w_scope, COUNT_WINDOW(3, 1)")
    found = scan_nested(outer, leaf, SCOPES)
    # north closes when south begins (its end reaches to just before 40 s): of its leaves only the
    # full one, 10-30 s, closed; those from 20 s and 30 s are short of 3 rows and go with north
    assert closed(found, "outer0_wstart", "outer0_wend", "outer0_rows") == [(10 * S, 30 * S, 3, 10 * S, 40 * S - 1, 3)]
    # south is open, and so is its one leaf
    open_ = found[~found["closed"].astype(bool)]
    assert open_[["wstart", "rows", "outer0_wstart", "outer0_closed"]].values.tolist() == [[40 * S, 1, 40 * S, False]]


def test_flush_on_outer_close_closes_the_open_leaves():
    outer, leaf = specs("STATE_WINDOW(scope) EXTEND(1) AS w_scope, COUNT_WINDOW(3, 1)")
    found = scan_nested(outer, leaf, SCOPES, flush=True)
    # north's three leaves close with it: 10-30 s (3 rows), 20-30 s (2), 30 s (1); _twrownum of w_scope is 3
    assert closed(found, "outer0_wstart", "outer0_rows") == [
        (10 * S, 30 * S, 3, 10 * S, 3), (20 * S, 30 * S, 2, 10 * S, 3), (30 * S, 30 * S, 1, 10 * S, 3)]


def test_a_leaf_never_crosses_an_outer_bound():
    outer, leaf = specs("INTERVAL(1m) SLIDING(1m) AS w_outer, STATE_WINDOW(st)")
    rows = frame(ts=[50, 55, 65, 70], _state=[1, 1, 1, 2])
    # directly, st = 1 holds from 50 s to 65 s: one window of three rows, closed by st = 2 at 70 s
    direct, _ = scan(leaf, rows, None)
    assert closed(direct) == [(50 * S, 65 * S, 3)]
    # nested, the minute [0, 60 s) ends it at 55 s: the minute closed (the group is at 70 s) while
    # its leaf was open, so the leaf goes with it; in [60 s, 120 s) st = 1 at 65 s closes at 70 s
    assert closed(scan_nested(outer, leaf, rows), "outer0_wstart", "outer0_rows") == [(65 * S, 65 * S, 1, 60 * S, 2)]
    # with FLUSH_ON_OUTER_CLOSE the leaf 50-55 s closes with its minute
    assert closed(scan_nested(outer, leaf, rows, flush=True), "outer0_wstart") == [
        (50 * S, 55 * S, 2, 0), (65 * S, 65 * S, 1, 60 * S)]


# rows inside one hour: st 5, 5, 6, 6, 7, 7 and marker 0, 1, 2, 0, 0, 0 every 2 s
HOUR = frame(ts=[0, 2, 4, 6, 8, 10], _state=[5, 5, 6, 6, 7, 7], _valid=[True] * 6,
             _start=[False, True, False, False, False, False], _end=[True, False, False, True, True, True])


@pytest.mark.parametrize(
    ("leaf_text", "expected"),
    [  # inside one open outer hour the leaves are the direct windows
        ("STATE_WINDOW(st)", [(0, 2 * S, 2), (4 * S, 6 * S, 2)]),  # 7 is still open
        ("COUNT_WINDOW(2, 2)", [(0, 2 * S, 2), (4 * S, 6 * S, 2), (8 * S, 10 * S, 2)]),
        ("EVENT_WINDOW(START WITH marker = 1 END WITH marker = 0)", [(2 * S, 6 * S, 3)]),  # opens at 2 s, ends at 6 s
    ],
)
def test_leaves_inside_one_outer_window_equal_the_direct_windows(leaf_text, expected):
    outer, leaf = specs(f"INTERVAL(1h) SLIDING(1h) AS w_outer, {leaf_text}")
    nested = scan_nested(outer, leaf, HOUR)
    direct, _ = scan(leaf, HOUR, None)
    assert closed(nested) == closed(direct) == expected
    assert set(nested["outer0_wstart"]) == {0} and not nested["outer0_closed"].any()


def test_two_state_layers_read_their_own_keys():
    outer, leaf = specs("STATE_WINDOW(site) EXTEND(1) AS w_site, STATE_WINDOW(mode)")
    rows = frame(ts=[0, 1, 2, 3, 4], **{"_state@0": list("aaabb"), "_state@1": list("xxyyy")})
    assert layer_rows(rows, 1)["_state"].tolist() == list("xxyyy")
    # site a holds 0-2 s and closes at 3 s; mode x (0-1 s) closes at 2 s inside it, mode y splits:
    # 2 s in site a (open when a closes), 3-4 s in site b (open)
    assert closed(scan_nested(outer, leaf, rows)) == [(0, S, 2)]
    assert closed(scan_nested(outer, leaf, rows, flush=True)) == [(0, S, 2), (2 * S, 2 * S, 1)]


def test_final_closes_every_layer():
    outer, leaf = specs("COUNT_WINDOW(3) AS w_batch, COUNT_WINDOW(2)")
    rows = frame(ts=[1, 2, 3, 4, 5], _valid=[True] * 5)
    # batches of 3 rows: [1, 2, 3] and [4, 5]; pairs inside them: [1, 2], [3], [4, 5]
    assert closed(scan_nested(outer, leaf, rows, final=True), "outer0_wstart", "outer0_rows") == [
        (S, 2 * S, 2, S, 3), (3 * S, 3 * S, 1, S, 3), (4 * S, 5 * S, 2, 4 * S, 2)]
    # not final: [1, 2, 3] is closed, [3] is short of a pair when it closes and is dropped
    assert closed(scan_nested(outer, leaf, rows)) == [(S, 2 * S, 2), (4 * S, 5 * S, 2)]


def test_no_rows_no_windows():
    outer, leaf = specs("INTERVAL(1m) SLIDING(1m) AS w, COUNT_WINDOW(2)")
    found = scan_nested(outer, leaf, frame(ts=[], _valid=[]))
    assert found.empty and "outer0_wstart" in found.columns
