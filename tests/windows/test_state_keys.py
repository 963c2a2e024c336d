"""STATE_WINDOW of several keys, EXTEND and ZEROTH_STATE (TDengine 3.3.8 / 3.4.x) in the window core.

The expected windows are worked out by hand from TDengine's stream reference (the table of partly
NULL runs under EXTEND 0/1/2, EXTEND's boundaries, ZEROTH_STATE's all-keys rule) and from the
scenarios of its tests (test_state_window_multi_col.py), on data of our own.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_stream_provider.model.events import TriggerKind
from airflow_stream_provider.windows.core import scan
from airflow_stream_provider.windows.spec import WindowSpec

S = 1_000_000
N = None


def rows_of(keys: list[tuple]) -> pd.DataFrame:
    """One row a second from 0 s, with the keys given (None: NULL)."""
    width = len(keys[0])
    frame = pd.DataFrame({"ts": np.arange(len(keys), dtype=np.int64) * S})
    for k in range(width):
        frame["_state" if k == 0 else f"_state{k}"] = pd.Series([row[k] for row in keys], dtype=object)
    return frame


def windows(keys: list[tuple], **spec) -> list[tuple]:
    """(start, end, rows, state) of each closed window, times in microseconds."""
    got, _ = scan(WindowSpec(TriggerKind.STATE_WINDOW, state_keys=len(keys[0]), **spec), rows_of(keys), None,
                  final=True)
    return [(w.wstart, w.wend, w.rows, w.cur_state) for w in got[got["closed"]].itertuples(index=False)]


# the four sequences of TDengine's table of partly NULL runs; the middle row is the run
A, B, C, D = [(1, 10), (1, N), (1, 20)], [(1, "a"), (1, N), (2, "a")], [(1, "a"), (N, "b"), (1, "b")], \
    [(1, "a"), (N, "b"), (2, "a")]
BEFORE, AFTER, ALONE = "before", "after", "alone"
RUNS = [  # sequence, EXTEND, where the middle row goes
    (A, 0, BEFORE), (A, 1, BEFORE), (A, 2, AFTER),
    (B, 0, BEFORE), (B, 1, BEFORE), (B, 2, ALONE),
    (C, 0, AFTER), (C, 1, ALONE), (C, 2, AFTER),
    (D, 0, ALONE), (D, 1, ALONE), (D, 2, ALONE),
]


@pytest.mark.parametrize("keys, extend, goes", RUNS)
def test_a_partly_null_run_joins_the_window_tdengine_says(keys, extend, goes):
    first, middle, last = keys
    lone = tuple(middle)
    by_place = {
        BEFORE: [(0, 1 * S, 2, first), (2 * S, 2 * S, 1, last)],
        AFTER: [(0, 0, 1, first), (1 * S, 2 * S, 2, last)],
        ALONE: [(0, 0, 1, first), (1 * S, 1 * S, 1, lone), (2 * S, 2 * S, 1, last)],
    }
    expected = by_place[goes]
    if extend == 1:  # each window but the last ends just before the next one
        expected = [(s, (expected[i + 1][0] - 1) if i + 1 < len(expected) else e, r, k)
                    for i, (s, e, r, k) in enumerate(expected)]
    if extend == 2:  # each window but the first starts just after the previous one's last row
        expected = [((expected[i - 1][1] + 1) if i else s, e, r, k) for i, (s, e, r, k) in enumerate(expected)]
    assert windows(keys, extend=extend) == expected


@pytest.mark.parametrize("extend, goes", [(0, BEFORE), (1, BEFORE), (2, ALONE)])
def test_all_null_rows_inside_a_partly_null_run_go_with_it(extend, goes):
    # (1,'a') -> (1,NULL) -> (NULL,NULL) -> (1,NULL) -> (2,'a'): the reference's example; the all-NULL
    # row takes no part (it is not counted), the two partly NULL rows decide together
    keys = [(1, "a"), (1, N), (N, N), (1, N), (2, "a")]
    got = windows(keys, extend=extend)
    if goes == BEFORE:
        assert [(s, r, k) for s, _, r, k in got] == [(0, 3, (1, "a")), (4 * S, 1, (2, "a"))]
        assert got[0][1] == (4 * S - 1 if extend == 1 else 3 * S)
    else:
        assert got == [(0, 0, 1, (1, "a")), (1, 3 * S, 2, (1, None)), (3 * S + 1, 4 * S, 1, (2, "a"))]


# TDengine's multi-column scenario (int and bool keys, ten rows a second apart), values of our own
TEN = [(7, True), (7, True), (7, False), (8, False), (8, False), (8, True), (7, True), (7, True), (7, True),
       (7, True)]


@pytest.mark.parametrize("extend, expected", [
    (0, [(0, 1, 2), (2, 2, 1), (3, 4, 2), (5, 5, 1), (6, 9, 4)]),
    (1, [(0, 2 - 1e-6, 2), (2, 3 - 1e-6, 1), (3, 5 - 1e-6, 2), (5, 6 - 1e-6, 1), (6, 9, 4)]),
    (2, [(0, 1, 2), (1 + 1e-6, 2, 1), (2 + 1e-6, 4, 2), (4 + 1e-6, 5, 1), (5 + 1e-6, 9, 4)]),
])
def test_any_key_changing_cuts_a_window_and_extend_moves_its_bounds(extend, expected):
    got = windows(TEN, extend=extend)
    assert [(round(s / S, 6), round(e / S, 6), r) for s, e, r, _ in got] == [
        (round(s, 6), round(e, 6), r) for s, e, r in expected]
    assert [k for *_, k in got] == [(7, True), (7, False), (8, False), (8, True), (7, True)]


@pytest.mark.parametrize("zeroth, states", [
    ((7, True), [(7, False), (8, False), (8, True)]),  # every key must equal its zero value
    ((7, None), [(8, False), (8, True)]),  # NO_ZEROTH: the second key takes no part
    ((None, False), [(7, True), (8, True), (7, True)]),
])
def test_zeroth_state_drops_the_windows_whose_keys_all_equal_it(zeroth, states):
    assert [k for *_, k in windows(TEN, zeroth=zeroth)] == states


def test_an_unknown_key_is_never_the_zero_state():
    # (1,'a') -> (NULL,'b') -> (2,'a'): the middle row is a window of its own, its first key unknown
    keys = [(1, "a"), (N, "b"), (2, "a")]
    assert [k for *_, k in windows(keys, zeroth=(None, "b"))] == [(1, "a"), (2, "a")]
    assert [k for *_, k in windows(keys, zeroth=(0, "b"))] == [(1, "a"), (None, "b"), (2, "a")]


def test_zeroth_state_of_one_key_and_true_for_together():
    keys = [(0,), (0,), (5,), (5,), (5,), (0,), (6,)]
    assert [(r, k) for _, _, r, k in windows(keys, zeroth=(0,), true_for_count=2)] == [(3, 5)]


# --- a live scan, batch by batch, decides the windows of one scan ------------------------------

SPECS = [{"extend": e, "zeroth": z} for e in (0, 1, 2) for z in (None, (1, None))]


def random_keys(rng: np.random.Generator, n: int) -> list[tuple]:
    out = []
    for _ in range(n):
        a = None if rng.random() < 0.15 else int(rng.integers(0, 3))
        b = None if rng.random() < 0.15 else ["x", "y"][int(rng.integers(0, 2))]
        out.append((a, b))
    return out


def events_of(frame: pd.DataFrame) -> list[tuple]:
    out = []
    for w in frame.itertuples(index=False):
        if w.opened:
            out.append(("open", w.wstart, w.cur_state, w.prev_state))
        if w.closed:
            out.append(("close", w.wstart, w.wend, w.rows, w.cur_state, w.next_state))
    return sorted(out, key=repr)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), index=st.integers(0, len(SPECS) - 1),
       cuts=st.lists(st.integers(0, 80), max_size=6))
def test_chunked_scan_equals_one_scan(seed, index, cuts):
    spec = WindowSpec(TriggerKind.STATE_WINDOW, state_keys=2, **SPECS[index])
    rows = rows_of(random_keys(np.random.default_rng(seed), 80))
    whole, _ = scan(spec, rows, None, final=True)
    pieces, carry = [], None
    bounds = [0, *sorted(cuts), len(rows)]
    for i, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False)):
        got, carry = scan(spec, rows.iloc[a:b].reset_index(drop=True), carry, final=i == len(bounds) - 2)
        pieces.append(got)
    assert events_of(pd.concat(pieces, ignore_index=True)) == events_of(whole)
