"""The rules of TDengine's engine before 3.3.7, group by group, without Spark: what rows a window
counts (expired rows, rewrites, deletes, recounts from the table), when it is written (AT_ONCE,
WINDOW_CLOSE, MAX_DELAY, CONTINUOUS_WINDOW_CLOSE), and a randomized comparison of the whole with
an oracle written from the rules alone (``../shared/reference/legacy-semantics.md``)."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.windows.legacy_memory import Driver, MemoryTable, S, legacy_plan

COLUMNS = ("ts", "v")


def count_sum(rows: pd.DataFrame) -> tuple:
    return len(rows), int(rows["v"].sum()) if len(rows) else 0


def stream(window: str, options: str = "trigger at_once") -> str:
    return f"create stream s {options} into o as select _wstart, count(*), sum(v) from t {window}"


def driver(window: str, options: str = "trigger at_once", columns=COLUMNS, key=("ts",)) -> tuple[Driver, MemoryTable]:
    table = MemoryTable(columns, key)
    return Driver(legacy_plan(stream(window, options), columns, key), table, count_sum), table


def write(table: MemoryTable, *rows: tuple[int, int]) -> int:
    """One INSERT of (second, value) rows."""
    return table.write({"ts": t * S, "v": v} for t, v in rows)


def output(d: Driver) -> dict[int, tuple]:
    return {start // S: value for start, value in sorted(d.output.items())}


# --- what a window counts ------------------------------------------------------------------------


def test_a_rewrite_is_one_more_row_with_ignore_update_1_and_replaces_the_row_with_0():
    for options, expected in (("trigger at_once ignore update 1", (3, 6)), ("trigger at_once ignore update 0", (1, 3))):
        d, t = driver("interval(10s)", options)
        for value in (1, 2, 3):
            write(t, (13, value))
            d.run()
        assert output(d) == {10: expected}, options


def test_an_expired_row_is_dropped_with_ignore_expired_1_and_recounted_with_0():
    for options, expected in (("trigger at_once ignore expired 1", {10: (1, 1), 20: (1, 2)}),
                              ("trigger at_once ignore expired 0", {10: (2, 6), 20: (1, 2)})):
        d, t = driver("interval(10s)", options)
        write(t, (13, 1))
        write(t, (23, 2))
        d.run()
        write(t, (15, 5))  # its window [10, 20) closed when 23 came
        d.run()
        assert output(d) == expected, options


def test_a_late_row_into_an_open_window_is_not_expired():
    d, t = driver("interval(10s)", "trigger at_once ignore expired 1")
    write(t, (13, 1), (17, 2))
    d.run()
    write(t, (15, 5))  # [10, 20) is still open: 17 - 0 < 20
    d.run()
    assert output(d) == {10: (3, 8)}


def test_a_dropped_row_stays_out_of_its_open_session_when_the_session_is_written_again():
    """IGNORE EXPIRED 1, SESSION: a late row before the watermark is dropped even though its session
    is open; the session written again later still counts without it."""
    d, t = driver("session(ts, 10s)", "trigger at_once ignore expired 1")
    write(t, (10, 1), (14, 1))
    d.run()
    write(t, (12, 100))  # before the watermark (14): expired, dropped
    d.run()
    write(t, (16, 1))  # the open session grows and is written again
    d.run()
    assert output(d) == {10: (3, 3)}
    assert d.state and '"dropped": 1' in d.state


@pytest.mark.parametrize("options", ["trigger at_once ignore update 1",
                                     "trigger at_once ignore update 1 watermark 1m"],
                         ids=["closed", "waiting for the watermark"])
def test_a_delete_recounts_its_window_from_the_table_dropping_counted_rewrites(options):
    """IGNORE UPDATE 1 counts a rewrite twice, until a delete in the window recounts it from the
    table, whether the window has closed or still waits for the watermark."""
    d, t = driver("interval(10s)", options)
    write(t, (11, 1), (12, 2))
    write(t, (11, 5))  # 11 counted twice: 1 and 5
    d.run()
    assert output(d) == {10: (3, 8)}
    t.delete(lambda row: row["ts"] == 12 * S)
    d.run()
    assert output(d) == {10: (1, 5)}


def test_expiry_is_judged_by_each_source_tables_latest_row():
    """ignoreExpiredData.sim step 3, in one group of a supertable: the first rows of a table are
    never expired, however late for the group."""
    table = MemoryTable(("ts", "v", "tbname"), ("tbname", "ts"))
    plan = legacy_plan(stream("interval(10s)", "trigger at_once ignore expired 1"), ("ts", "v", "tbname"),
                       ("tbname", "ts"))
    d = Driver(plan, table, count_sum)
    table.write([{"ts": 11 * S, "v": 1, "tbname": "a"}])
    d.run()
    table.write([{"ts": 1 * S, "v": 1, "tbname": "b"}])  # late for the group, new for b
    d.run()
    table.write([{"ts": 0 * S, "v": 1, "tbname": "b"}])  # b's second row is older than b's latest: expired
    d.run()
    assert output(d) == {0: (1, 1), 10: (1, 1)}


def test_one_write_is_judged_as_a_whole_whatever_the_micro_batches():
    """The same writes fed one by one or in one micro-batch give the same windows."""
    writes = [[(13, 1)], [(23, 2), (5, 9)], [(13, 4)], [(2, 1), (33, 3)]]
    results = []
    for one_batch in (False, True):
        d, t = driver("interval(10s)", "trigger at_once ignore expired 1 ignore update 1")
        for rows in writes:
            write(t, *rows)
            if not one_batch:
                d.run()
        d.run()
        results.append(output(d))
    # by hand: 5 and then 2 fall into [0, 10), closed since 13, and are older than the table's latest
    # row: dropped; the rewrite of 13 comes when [10, 20) has closed (at 23): dropped too
    assert results[0] == results[1] == {10: (1, 1), 20: (1, 2), 30: (1, 3)}


# --- when a window is written --------------------------------------------------------------------


def test_window_close_writes_closed_windows_and_at_once_open_ones_too():
    """windowClose.sim step 2: the open window is written by AT_ONCE (and MAX_DELAY), not WINDOW_CLOSE."""
    for window in ("interval(10s)", "session(ts, 10s)", "state_window(v)"):
        for options, count in (("trigger window_close", 1), ("trigger at_once", 2)):
            d, t = driver(window, options)
            for second, value in ((13, 1), (13.001, 1), (13.002, 1), (33, 2)):
                t.write([{"ts": int(second * S), "v": value}])
            d.run()
            assert len(d.output) == count, (window, options)


def test_max_delay_writes_an_open_window_once_after_the_delay_and_again_only_after_new_rows():
    """windowClose.sim steps 3 to 7: MAX_DELAY writes an open window when its delay has passed and
    does not write it again while no row comes."""
    d, t = driver("interval(10s)", "trigger max_delay 5s")
    write(t, (13, 1))
    write(t, (23, 2))
    events = d.run(now=0)
    assert list(events["event_type"]) == ["WINDOW_CLOSE"]  # [10, 20) closed; [20, 30) waits for its delay
    assert d.run(now=4 * S).empty
    assert list(d.run(now=5 * S)["event_type"]) == ["MAX_DELAY"]
    assert d.run(now=20 * S).empty and d.run(now=40 * S).empty  # no new rows: not again
    write(t, (24, 1))
    assert list(d.run(now=41 * S)["event_type"]) == ["MAX_DELAY"]  # the delay since the last write passed
    write(t, (25, 1))
    assert d.run(now=42 * S).empty  # within the delay: it waits...
    assert list(d.run(now=46 * S)["event_type"]) == ["MAX_DELAY"]  # ...then writes the window as it stands
    assert output(d) == {10: (1, 1), 20: (3, 4)}


def test_max_delay_says_when_to_be_woken():
    d, t = driver("interval(10s)", "trigger max_delay 5s")
    write(t, (13, 1))
    d.run(now=100 * S)
    group_state = d.state
    assert '"dirty": true' in group_state


def test_continuous_window_close_recalculates_changed_windows_on_its_period():
    d, t = driver("interval(10s)", "trigger continuous_window_close recalculate 1h ignore expired 0")
    write(t, (13, 1))
    write(t, (23, 2))
    d.run(now=0)
    assert output(d) == {10: (1, 1)}
    write(t, (15, 5))  # late into the closed window: not at once
    d.run(now=60 * S)
    assert output(d) == {10: (1, 1)}
    t.delete(lambda row: row["ts"] == 23 * S)  # the open window loses its row
    d.run(now=3599 * S)
    assert output(d) == {10: (1, 1)}
    d.run(now=3601 * S)  # the period passed: the changed windows are recalculated
    assert output(d) == {10: (2, 6)}


def test_at_once_retracts_a_session_that_merged_into_another():
    d, t = driver("session(ts, 5s)", "trigger at_once ignore expired 0")
    write(t, (10, 1))
    write(t, (20, 1))
    d.run()
    assert output(d) == {10: (1, 1), 20: (1, 1)}
    write(t, (15, 1))  # bridges both sessions
    d.run()
    assert output(d) == {10: (3, 3)}


def test_an_event_window_is_written_once_its_end_condition_held():
    table = MemoryTable(("ts", "v"))
    plan = legacy_plan("create stream s trigger at_once into o as select _wstart, count(*) from t "
                       "event_window start with v = 0 end with v = 9", ("ts", "v"))
    d = Driver(plan, table, count_sum)
    write(table, (10, 0), (11, 1))
    d.run()
    assert d.output == {}
    write(table, (12, 9))
    d.run()
    assert output(d) == {10: (3, 10)}


# --- randomized: AT_ONCE = WINDOW_CLOSE = an oracle of the rules -----------------------------------


@dataclass(frozen=True)
class Rules:
    window: str  # "interval" (10 s) or "session" (gap 5 s)
    ignore_expired: bool
    ignore_update: bool
    watermark: int  # seconds


def oracle(rules: Rules, commits: list[tuple[str, object]], tables: dict[str, int]) -> dict[int, tuple]:
    """The windows after ``commits``, by the rules alone: each group keeps the rows it accepted; a
    write is judged against what was there before it; a reset takes the table's rows of the windows
    holding it again."""
    accepted: list[dict] = []
    table: dict[tuple, dict] = {}
    latest: dict[str, int] = {}
    top: int | None = None

    def windows(rows: list[dict]) -> list[tuple[int, int, list[dict]]]:
        """(start, last time in it, rows) of every window over ``rows``."""
        ordered = sorted(rows, key=lambda r: r["ts"])
        if rules.window == "interval":
            found: dict[int, list[dict]] = {}
            for r in ordered:
                found.setdefault(r["ts"] // 10 * 10, []).append(r)
            return [(s, s + 9, rs) for s, rs in sorted(found.items())]
        out: list[tuple[int, int, list[dict]]] = []
        for r in ordered:
            if out and r["ts"] - out[-1][1] <= 5:
                out[-1] = (out[-1][0], r["ts"], [*out[-1][2], r])
            else:
                out.append((r["ts"], r["ts"], [r]))
        return out

    def closed(t: int, watermark: int) -> bool:
        return t // 10 * 10 + 10 <= watermark if rules.window == "interval" else t < watermark

    for kind, payload in commits:
        before = {k: dict(v) for k, v in table.items()}
        seen = dict(latest)
        watermark = None if top is None else top - rules.watermark
        shape = windows(accepted)
        resets: list[int] = []
        if kind == "delete":
            lo, hi = payload
            for key in [k for k, r in table.items() if lo <= r["ts"] <= hi]:
                resets.append(table.pop(key)["ts"])
        else:
            last: dict[tuple, dict] = {}
            for row in payload:
                last[(row["tb"], row["ts"])] = row
            for key, row in last.items():
                table[key] = row
            for key, row in last.items():
                t, tb = row["ts"], row["tb"]
                expired = watermark is not None and tb in seen and t <= seen[tb] and closed(t, watermark)
                if expired and rules.ignore_expired:
                    continue
                if expired or (key in before and not rules.ignore_update):
                    resets.append(t)
                else:
                    accepted.append(row)
                latest[tb] = max(latest.get(tb, t), t)
                top = t if top is None else max(top, t)
        for t in resets:
            spans = [(s, e) for s, e, _ in shape if s <= t <= e] or [(t, t)]
            for s, e in spans:
                accepted = [r for r in accepted if not s <= r["ts"] <= e]
                accepted += [r for r in table.values() if s <= r["ts"] <= e]
    return {s: (len(rs), sum(r["v"] for r in rs)) for s, _, rs in windows(accepted)}


commit = st.one_of(
    st.tuples(st.just("write"), st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 59), st.integers(0, 9)),
                                         min_size=1, max_size=4)),
    st.tuples(st.just("delete"), st.tuples(st.integers(0, 59), st.integers(0, 6))),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(window=st.sampled_from(["interval", "session"]), ignore_expired=st.booleans(),
       ignore_update=st.booleans(), watermark=st.sampled_from([0, 5]),
       commits=st.lists(commit, min_size=1, max_size=10), seed=st.integers(0, 2**16))
def test_at_once_equals_window_close_equals_the_oracle(window, ignore_expired, ignore_update, watermark, commits,
                                                       seed):
    """Random writes, rewrites and deletes over two source tables of one group, fed in random
    micro-batches: once everything has closed, AT_ONCE and WINDOW_CLOSE wrote the same windows,
    and those of the oracle."""
    rules = Rules(window, ignore_expired, ignore_update, watermark)
    clause = "interval(10s)" if window == "interval" else "session(ts, 5s)"
    options = (f"ignore expired {int(ignore_expired)} ignore update {int(ignore_update)} "
               f"watermark {watermark}s" if watermark else f"ignore expired {int(ignore_expired)} "
               f"ignore update {int(ignore_update)}")
    columns, key = ("ts", "v", "tbname"), ("tbname", "ts")
    history = [(kind, [{"tb": tb, "ts": t, "v": v} for tb, t, v in payload] if kind == "write" else
                (payload[0], payload[0] + payload[1])) for kind, payload in commits]
    history.append(("write", [{"tb": "a", "ts": 10_000, "v": 0}]))  # closes every window before it
    outputs = []
    for mode in ("at_once", "window_close"):
        table = MemoryTable(columns, key)
        plan = legacy_plan(f"create stream s trigger {mode} {options} into o as select _wstart, count(*), sum(v) "
                           f"from t {clause}", columns, key)
        d = Driver(plan, table, count_sum)
        batches = random.Random(seed)
        for kind, payload in history:
            if kind == "write":
                table.write({"ts": r["ts"] * S, "v": r["v"], "tbname": r["tb"]} for r in payload)
            else:
                lo, hi = payload
                table.delete(lambda row, lo=lo, hi=hi: lo * S <= row["ts"] <= hi * S)
            if batches.random() < 0.5:
                d.run()
        d.run()
        outputs.append({s: v for s, v in output(d).items() if s < 10_000 - 10})
    assert outputs[0] == outputs[1]
    expected = oracle(rules, history[:-1], {})
    assert outputs[0] == {s: v for s, v in expected.items() if v[0]}


def test_force_window_close_closes_wall_clock_windows_once_with_fill():
    """FORCE_WINDOW_CLOSE (reference 003; forcewindowclose.sim, streamFwcIntervalFill.sim): each
    window is written once, when the wall clock passes its end, with the rows there then; an empty
    one is filled; a row arriving after its window closed changes nothing; windows the clock passed
    while nothing ran are written at the next call."""
    d, t = driver("interval(10s) fill(prev)", "trigger force_window_close")
    write(t, (3, 1))
    d.run(now=5 * S)  # the clock is in [0, 10): nothing closed yet
    assert d.output == {}
    write(t, (7, 2))
    d.run(now=10 * S)
    assert output(d) == {0: (2, 3)}
    write(t, (8, 5))  # too late for [0, 10), which closed at 10
    d.run(now=20 * S)
    assert output(d) == {0: (2, 3), 10: (0, 0)}  # [10, 20) is empty (FILL(PREV) fills it in the computation)
    events = d.run(now=45 * S)  # 20, 30 and 40 passed since
    assert list(pd.to_datetime(events["window_start"]).map(lambda x: x.value // 1000 // S)) == [20, 30]
    assert all(events["event_type"] == "WINDOW_CLOSE")
