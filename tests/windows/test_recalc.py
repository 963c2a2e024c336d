"""Late rows, updates and deletes on a running detector: every window ends up as batch mode sees
the final table, through WINDOW_INVALIDATION and recomputed WINDOW_CLOSE events, each exactly once.

The oracle is batch mode over the final table (itself checked against Spark's window functions and
the brute-force reference). The event log is folded in order: a close adds a window, an
invalidation removes exactly the window it names; a second close of a live window fails.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from airflow_stream_provider.windows import detector
from airflow_stream_provider.windows.batch import detect
from tests.windows.test_detector import (
    TRIGGERS,
    S,
    events_table,
    make_rows,
    setup,
    write,
)

pytestmark = pytest.mark.spark

# the window types that recalculate; SESSION with a gap the random rows (1 to 5 s apart) exceed
RECALCULATING = {**{k: TRIGGERS[k] for k in ("interval", "state", "event")}, "session": "SESSION(ts, 3s)"}


def utc(value) -> pd.Timestamp:
    stamp = pd.Timestamp(value)
    return stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")


def fold(events: pd.DataFrame) -> dict[str, tuple]:
    """The closed windows an event log leaves standing, by trigger id."""
    live: dict[str, tuple] = {}
    for e in events.sort_values(["batch_id", "seq"]).itertuples(index=False):
        window = (utc(e.window_start), utc(e.window_end), int(e.row_count))
        if e.event_type == "WINDOW_CLOSE":
            assert e.trigger_id not in live, f"window {window} closed twice without an invalidation"
            live[e.trigger_id] = window
        elif e.event_type == "WINDOW_INVALIDATION":
            assert live.get(e.trigger_id) == window, f"invalidation of {window}, which is not standing"
            del live[e.trigger_id]
    return live


def closes(frame: pd.DataFrame) -> dict[str, tuple]:
    closed = frame[frame["event_type"] == "WINDOW_CLOSE"]
    return {t: (utc(s), utc(e), int(n)) for t, s, e, n in
            zip(closed["trigger_id"], closed["window_start"], closed["window_end"], closed["row_count"])}


def run(spark, plan, opts) -> pd.DataFrame:
    detector.Detector(plan, dataclasses.replace(opts, max_files_per_trigger=1)).run_available()
    return events_table(opts)


def delete(spark, info, rows: pd.DataFrame) -> None:
    cond = " OR ".join(f"(tbname = '{t}' AND ts = timestamp_micros({int(ts)}))"
                       for t, ts in zip(rows["tbname"], rows["ts"]))
    spark.sql(f"DELETE FROM delta.`{info.path}` WHERE {cond}")


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 10_000), kind=st.sampled_from(sorted(RECALCULATING)), commits=st.integers(3, 6),
       updates=st.integers(0, 6))
# d2's first row waits for the watermark when its earlier rows arrive: no window of it was ever due
@example(seed=9144, kind="interval", commits=3, updates=0)
def test_late_rows_and_updates_converge_to_batch_windows(spark, tmp_path_factory, seed, kind, commits, updates):
    tmp = tmp_path_factory.mktemp("recalc")
    wh, info, plan, opts = setup(spark, tmp, "l", RECALCULATING[kind], "STREAM_OPTIONS(WATERMARK(2s))")
    rows = make_rows(seed, n=60)
    rng = np.random.default_rng(seed)
    # rows arrive in any order, far behind the watermark
    rows = rows.iloc[rng.permutation(len(rows))].reset_index(drop=True)
    cuts = sorted(rng.choice(np.arange(1, len(rows)), size=commits - 1, replace=False).tolist())
    for a, b in zip([0, *cuts], [*cuts, len(rows)]):
        write(info, rows.iloc[a:b])
    for _ in range(updates):  # rewrite existing timestamps with new values, one commit each
        changed = rows.iloc[rng.choice(len(rows), size=3, replace=False)].copy()
        changed["current"] = rng.uniform(0, 20, len(changed)).round(1).astype("float32")
        changed["voltage"] = rng.integers(219, 222, len(changed)).astype("int32")
        write(info, changed)
    streamed = run(spark, plan, opts)
    batch = detect(spark.read.format("delta").load(plan.path), plan).toPandas()
    assert closes(batch)
    assert fold(streamed) == closes(batch)


@pytest.mark.parametrize("seed", [7, 2026])
def test_sub_event_windows_converge_to_batch_windows_after_late_rows_and_updates(spark, tmp_path, seed):
    """Sub-event windows (TDengine 3.4.0): a parent and its sub-windows, recalculated as any window."""
    trigger = "EVENT_WINDOW(START WITH (current > 15, current > 8) END WITH current < 3)"
    wh, info, plan, opts = setup(spark, tmp_path, "l", trigger, "STREAM_OPTIONS(WATERMARK(2s))")
    rows = make_rows(seed, n=60)
    rng = np.random.default_rng(seed)
    rows = rows.iloc[rng.permutation(len(rows))].reset_index(drop=True)
    for part in np.array_split(np.arange(len(rows)), 4):
        write(info, rows.iloc[part])
    changed = rows.iloc[rng.choice(len(rows), size=6, replace=False)].copy()
    changed["current"] = rng.uniform(0, 20, len(changed)).round(1).astype("float32")
    write(info, changed)
    streamed = run(spark, plan, opts)
    batch = detect(spark.read.format("delta").load(plan.path), plan).toPandas()
    assert (batch["window_ordinal"] > 0).any()  # the rows make sub-windows, not only plain windows
    assert fold(streamed) == closes(batch)


def test_late_row_invalidates_and_recloses_with_the_same_trigger_id(spark, tmp_path):
    """INTERVAL(10s) SLIDING(10s): rows at 1 s and 25 s close [0, 10) with one row; a row at 5 s arriving after
    that is a recalculation: the old window is invalidated and closes again with two rows."""
    wh, info, plan, opts = setup(spark, tmp_path, "i", "INTERVAL(10s) SLIDING(10s)")
    d1 = pd.DataFrame({"ts": [1 * S, 25 * S], "current": [1.0, 2.0], "voltage": [220, 220],
                       "tbname": "d1", "location": "SF"})
    write(info, d1)
    first = run(spark, plan, opts)
    write(info, d1.iloc[:1].assign(ts=5 * S))
    events = run(spark, plan, opts)
    late = events[events["batch_id"] == events["batch_id"].max()].sort_values("seq")
    start = pd.Timestamp(0, tz="UTC")
    assert list(late["event_type"]) == ["WINDOW_INVALIDATION", "WINDOW_CLOSE"]
    old, new = late.iloc[0], late.iloc[1]
    assert old["trigger_id"] == new["trigger_id"] == first.loc[first["window_start"] == start, "trigger_id"].item()
    assert (old["row_count"], new["row_count"]) == (1, 2)


def test_updates_of_a_state_are_recalculated(spark, tmp_path):
    """STATE_WINDOW(voltage): 220, 220, 221, 221 then 225 closes [0 s, 1 s] and [2 s, 3 s]; rewriting
    the row at 1 s to 221 moves the boundary: [0 s, 0 s] and [1 s, 3 s] replace them."""
    wh, info, plan, opts = setup(spark, tmp_path, "u", "STATE_WINDOW(voltage)")
    d1 = pd.DataFrame({"ts": [0, 1 * S, 2 * S, 3 * S, 4 * S], "current": 1.0, "voltage": [220, 220, 221, 221, 225],
                       "tbname": "d1", "location": "SF"})
    write(info, d1)
    first = run(spark, plan, opts)
    write(info, d1.iloc[[1]].assign(voltage=221))
    events = run(spark, plan, opts)

    def at(s: int) -> pd.Timestamp:
        return pd.Timestamp(s, unit="s", tz="UTC")

    standing = fold(events)
    assert sorted(standing.values()) == [(at(0), at(0), 1), (at(1), at(3), 3)]
    # the window starting at 0 s keeps its trigger id; the one at 1 s is new
    assert {w: t for t, w in standing.items()}[(at(0), at(0), 1)] in set(first["trigger_id"])
    assert {w: t for t, w in standing.items()}[(at(1), at(3), 3)] not in set(first["trigger_id"])
    states = events[events["event_type"] == "WINDOW_CLOSE"].sort_values(["batch_id", "seq"])
    assert [json.loads(v) for v in states["cur_state"]][-2:] == [220, 221]


def test_an_update_of_a_key_of_several_moves_the_extended_boundary(spark, tmp_path):
    """STATE_WINDOW(voltage, current > 10) EXTEND(2) (TDengine 3.4.x): (220, T) at 0 s and 1 s, (221, T)
    at 2 s and 3 s, then 225 closes [0 s, 1 s] and [1.001 s, 3 s] (a millisecond after the window before).
    Rewriting the voltage at 1 s to NULL leaves a partly NULL row that agrees with both neighbours;
    under EXTEND(2) it joins the window after: [0 s, 0 s] and [0.001 s, 3 s] replace them."""
    wh, info, plan, opts = setup(spark, tmp_path, "k", "STATE_WINDOW(voltage, current > 10) EXTEND(2)")
    d1 = pd.DataFrame({"ts": np.arange(5) * S, "current": 12.0,
                       "voltage": pd.Series([220, 220, 221, 221, 225], dtype=object), "tbname": "d1", "location": "SF"})
    write(info, d1)
    first = run(spark, plan, opts)
    ms = pd.Timedelta(1, "ms")
    at = [pd.Timestamp(s, unit="s", tz="UTC") for s in range(4)]
    assert sorted(closes(first).values()) == [(at[0], at[1], 2), (at[1] + ms, at[3], 2)]
    write(info, d1.iloc[[1]].assign(voltage=pd.Series([None], index=[1], dtype=object)))
    events = run(spark, plan, opts)
    batch = detect(spark.read.format("delta").load(plan.path), plan).toPandas()
    expected = [(at[0], at[0], 1), (at[0] + ms, at[3], 3)]
    assert sorted(fold(events).values()) == sorted(closes(batch).values()) == expected
    states = events[events["event_type"] == "WINDOW_CLOSE"].sort_values(["batch_id", "seq"])
    assert [json.loads(v) for v in states["cur_state"]][-2:] == [[220, True], [221, True]]


def test_deletes_recalculate_only_with_delete_recalc(spark, tmp_path):
    trigger = "SESSION(ts, 3s)"
    for options, recalculated in (("", False), ("STREAM_OPTIONS(DELETE_RECALC)", True)):
        wh, info, plan, opts = setup(spark, tmp_path / str(recalculated), "d", trigger, options)
        rows = make_rows(3, n=40).sort_values("ts", kind="stable")
        write(info, rows)
        before = run(spark, plan, opts)
        assert len(before)
        gone = rows[rows["tbname"] == "d1"].iloc[5:15]
        delete(spark, info, gone)
        events = run(spark, plan, opts)
        assert len(events) >= len(before)
        batch = detect(spark.read.format("delta").load(plan.path), plan).toPandas()
        if recalculated:
            assert fold(events) == closes(batch)
        else:
            assert fold(events) == fold(before)  # deletes are ignored without DELETE_RECALC
            assert fold(events) != closes(batch)


def test_ignore_disorder_and_count_windows_drop_late_rows(spark, tmp_path):
    for name, trigger, options in (("o", TRIGGERS["state"], "STREAM_OPTIONS(IGNORE_DISORDER)"),
                                   ("c", TRIGGERS["count"], "")):
        wh, info, plan, opts = setup(spark, tmp_path / name, name, trigger, options)
        rows = make_rows(5, n=40)
        early, late = rows[rows["ts"] <= rows["ts"].median()], rows[rows["ts"] > rows["ts"].median()]
        write(info, late)
        before = run(spark, plan, opts)
        write(info, early)  # all behind the decided time
        after = run(spark, plan, opts)
        assert len(after) == len(before)
        expected = detect(spark.createDataFrame(late), plan).toPandas()
        assert fold(after) == closes(expected)
