"""EVENT_WINDOW with TRUE_FOR(start(...)) / TRUE_FOR(end(...)) (TDengine 3.4.2) in the window core.

Expected windows are worked out by hand from the reference's rules: START WITH must hold row after
row for start(limit) before the window opens (it starts at the streak's first row), END WITH must
hold row after row for end(limit) before it closes (it ends at that streak's first row); a broken
streak counts again; TRUE_FOR's own limit still judges the whole window.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_stream_provider.model.events import TriggerKind
from airflow_stream_provider.windows.core import scan
from airflow_stream_provider.windows.spec import WindowSpec

S = 1_000_000
#: START WITH v > 5 END WITH v < 2, one row a second from 0 s
V = [6, 1, 7, 8, 9, 3, 1, 1, 6, 7, 0]


def rows_of(values: list[int]) -> pd.DataFrame:
    v = np.array(values)
    return pd.DataFrame({"ts": np.arange(len(v), dtype=np.int64) * S, "_start": v > 5, "_end": v < 2, "_f_v": v})


def spec(start=None, end=None, count=None) -> WindowSpec:
    return WindowSpec(TriggerKind.EVENT_WINDOW, start_limit=start, end_limit=end, true_for_count=count,
                      start_fields=("v",), end_fields=("v",))


def closed(values: list[int], **limits) -> list[tuple]:
    got, _ = scan(spec(**limits), rows_of(values), None, final=True)
    return [(w.wstart // S, w.wend // S, w.rows) for w in got[got["closed"]].itertuples(index=False)]


COUNT_2, TWO_SECONDS = (None, 2, None), (2 * S, None, None)


@pytest.mark.parametrize("limits, expected", [
    ({}, [(0, 1, 2), (2, 6, 5), (8, 10, 3)]),  # no streaks: plain event windows
    ({"start": COUNT_2}, [(2, 6, 5), (8, 10, 3)]),  # 6 then 1 at 0-1 s is no streak of two
    ({"start": TWO_SECONDS}, [(2, 6, 5)]),  # 7, 8, 9 hold for 2 s by 4 s; 6, 7 at 8-9 s only 1 s
    ({"end": COUNT_2}, [(0, 6, 7)]),  # 1 at 1 s alone does not close; 1, 1 at 6-7 s closes at 6 s
    ({"start": COUNT_2, "end": COUNT_2}, [(2, 6, 5)]),  # the window at 8 s is open at the end: none
    ({"end": COUNT_2, "count": 6}, [(0, 6, 7)]),  # seven rows meet TRUE_FOR(COUNT 6)...
    ({"end": COUNT_2, "count": 8}, []),  # ...not TRUE_FOR(COUNT 8)
    ({"start": (2 * S, 3, "AND")}, [(2, 6, 5)]),  # 7, 8, 9: three rows over 2 s
    ({"start": (5 * S, 2, "OR")}, [(2, 6, 5), (8, 10, 3)]),
])
def test_streaks_open_and_close_windows(limits, expected):
    assert closed(V, **limits) == expected


def test_a_window_records_the_first_rows_of_its_streaks():
    got, _ = scan(spec(start=COUNT_2, end=COUNT_2), rows_of(V), None, final=True)
    w = got[got["closed"]].iloc[0]
    assert (json.loads(w.open_fields), json.loads(w.close_fields)) == ({"v": 7}, {"v": 1})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), limits=st.sampled_from([{"start": COUNT_2}, {"end": TWO_SECONDS},
                                                            {"start": TWO_SECONDS, "end": COUNT_2, "count": 3}]),
       cuts=st.lists(st.integers(0, 60), max_size=6))
def test_chunked_scan_equals_one_scan(seed, limits, cuts):
    rows = rows_of(np.random.default_rng(seed).integers(0, 10, 60).tolist())
    whole, _ = scan(spec(**limits), rows, None)
    pieces, carry = [], None
    bounds = [0, *sorted(cuts), len(rows)]
    for a, b in zip(bounds, bounds[1:], strict=False):
        got, carry = scan(spec(**limits), rows.iloc[a:b].reset_index(drop=True), carry)
        pieces.append(got)
    chunked = pd.concat(pieces, ignore_index=True)

    def events(frame: pd.DataFrame) -> list[tuple]:
        out = []
        for w in frame.itertuples(index=False):
            if w.opened:
                out.append(("open", w.wstart, w.open_fields))
            if w.closed:
                out.append(("close", w.wstart, w.wend, w.rows, w.open_fields, w.close_fields))
        return sorted(out, key=repr)

    assert events(chunked) == events(whole)
