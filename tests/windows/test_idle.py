"""IDLE_TIMEOUT with IDLE and RESUME events (TDengine 3.4.1), in the live detector's step, on a fake
clock: each call says what the processing time is.

The scenarios are those of TDengine's ``test/cases/18-StreamProcessing/04-Options/test_idle_trigger.py``
and its functional spec (a group idle for the timeout fires IDLE once; its next rows fire RESUME, with
the same trigger id; ``_tidlestart`` is the last rows' processing time, ``_tidleend`` the event's;
groups are idle independently; a group never seen fires nothing; rows just before the timeout keep it
active), with our own rows and times; the expected spans are worked out by hand.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from airflow_stream_provider.sql import parse
from airflow_stream_provider.windows.batch import group_events
from airflow_stream_provider.windows.events import batch_event_rows
from airflow_stream_provider.windows.step import Step
from airflow_stream_provider.windows.trigger_plan import TriggerPlan

S = 1000  # milliseconds of processing time
T0 = 1_760_000_000_000  # the clock when the first rows come, epoch milliseconds


def plan_of(options: str, trigger: str = "SESSION(ts, 1h)") -> TriggerPlan:
    [stmt] = parse(f"CREATE STREAM d.s {trigger} FROM d.meters PARTITION BY tbname STREAM_OPTIONS({options}) "
                   "INTO d.out AS SELECT _tidlestart, _tidleend, count(*) FROM %%trows")
    return TriggerPlan.build(stmt, "d.meters", path="/nowhere", columns=["ts", "v", "tbname"], ts_column="ts")


class Group:
    """One group through the step, as the detector runs it: its state kept between calls, and each
    call's events as the detector writes them."""

    def __init__(self, plan: TriggerPlan, name: str = "d001") -> None:
        self.plan, self.name = plan, name
        self.step = Step(plan, timeouts=True)
        self.state: str | None = None
        self.due: int | None = None  # processing time of the group's next timeout, ms
        self.ts = 1_000_000  # event time of its next row, microseconds

    def rows(self, now: int, n: int = 1) -> pd.DataFrame:
        """The group receives ``n`` rows at processing time ``now``; its events."""
        raw = pd.DataFrame({"ts": [self.ts + i * 1_000_000 for i in range(n)], "v": 1, "tbname": self.name,
                            "_change_type": "insert", "_commit_version": 1})
        self.ts += n * 1_000_000
        return self._advance(raw, now)

    def tick(self, now: int) -> pd.DataFrame:
        """The detector's clock reaches ``now`` with no rows: the group runs if its timeout is due."""
        if self.due is None or self.due > now:
            return batch_event_rows(self.plan, [], {})
        return self._advance(None, now)

    def _advance(self, raw: pd.DataFrame | None, now: int) -> pd.DataFrame:
        done = self.step.advance((self.name,), raw, self.state, now)
        self.state = done.state
        self.due = None if done.timeout_ms is None else now + done.timeout_ms
        found = {kind: (windows if isinstance(windows, pd.DataFrame) else windows.frame(),
                        np.zeros(len(windows), np.int64)) for kind, windows in done.parts}
        return batch_event_rows(self.plan, [self.plan.group_keys((self.name,))], found)


def spans(events: pd.DataFrame) -> list[tuple[str, int, int]]:
    """(event type, idle start, idle end) of the idle events, times in ms after T0."""
    idle = events[events["event_type"].isin(["IDLE", "RESUME"])]
    return [(e, int(s.value // 1_000_000) - T0, int(t.value // 1_000_000) - T0)
            for e, s, t in zip(idle["event_type"], idle["window_start"], idle["window_end"], strict=True)]


def test_a_group_without_rows_for_the_timeout_fires_idle_once():
    group = Group(plan_of("IDLE_TIMEOUT(3s) | EVENT_TYPE(IDLE)"))
    assert spans(group.rows(T0)) == []
    assert group.due == T0 + 3 * S  # the timeout the detector sets
    assert spans(group.tick(T0 + 2999)) == []
    fired = group.tick(T0 + 3 * S)
    assert spans(fired) == [("IDLE", 0, 3 * S)]
    assert fired["row_count"].isna().all() and fired["trigger_type"].tolist() == ["Session"]
    assert group.due is None  # an idle group waits for rows, not for the clock
    assert spans(group.tick(T0 + 60 * S)) == []


def test_resume_shares_the_idle_trigger_id_and_the_next_idle_has_its_own():
    group = Group(plan_of("IDLE_TIMEOUT(2s) | EVENT_TYPE(IDLE | RESUME)"))
    group.rows(T0)
    idle = group.tick(T0 + 2 * S)
    resume = group.rows(T0 + 5 * S)
    assert spans(idle) == [("IDLE", 0, 2 * S)]
    assert spans(resume) == [("RESUME", 0, 5 * S)]  # _tidlestart: the last rows before the idle span
    assert idle["trigger_id"].tolist() == resume["trigger_id"].tolist()
    again = group.tick(T0 + 7 * S)
    assert spans(again) == [("IDLE", 5 * S, 7 * S)]
    assert again["trigger_id"].iloc[0] != idle["trigger_id"].iloc[0]
    cycles = [spans(group.rows(T0 + 10 * S)), spans(group.tick(T0 + 12 * S)), spans(group.rows(T0 + 15 * S))]
    assert cycles == [[("RESUME", 5 * S, 10 * S)], [("IDLE", 10 * S, 12 * S)], [("RESUME", 10 * S, 15 * S)]]


def test_groups_are_idle_independently():
    plan = plan_of("IDLE_TIMEOUT(3s) | EVENT_TYPE(IDLE)")
    groups = {name: Group(plan, name) for name in ("d001", "d002", "d003")}
    for g in groups.values():
        g.rows(T0)
    fired = []
    for second in range(1, 6):  # d002 and d003 receive a row every second, d001 none
        now = T0 + second * S
        fired += [(name, *span) for name, g in groups.items() for span in spans(g.tick(now))]
        groups["d002"].rows(now)
        groups["d003"].rows(now)
    assert fired == [("d001", "IDLE", 0, 3 * S)]
    ids = {g.tick(T0 + 10 * S)["group_id"].iloc[0] for name, g in groups.items() if name != "d001"}
    assert len(ids) == 2  # the other two go idle later, each in its own group


def test_rows_just_before_the_timeout_keep_the_group_active():
    group = Group(plan_of("IDLE_TIMEOUT(5m) | EVENT_TYPE(IDLE | RESUME)"))
    group.rows(T0)
    assert spans(group.rows(T0 + 299 * S)) == []  # 4m59s: still active, the timer starts again
    assert group.due == T0 + 599 * S
    assert spans(group.tick(T0 + 300 * S)) == []
    assert spans(group.tick(T0 + 599 * S)) == [("IDLE", 299 * S, 599 * S)]


def test_event_type_chooses_which_of_the_two_are_reported():
    only_idle = Group(plan_of("IDLE_TIMEOUT(2s) | EVENT_TYPE(IDLE)"))
    only_idle.rows(T0)
    assert spans(only_idle.tick(T0 + 2 * S)) == [("IDLE", 0, 2 * S)]
    assert spans(only_idle.rows(T0 + 5 * S)) == []
    only_resume = Group(plan_of("IDLE_TIMEOUT(2s) | EVENT_TYPE(RESUME)"))
    only_resume.rows(T0)
    assert spans(only_resume.tick(T0 + 2 * S)) == []  # idle all the same: RESUME follows it
    assert spans(only_resume.rows(T0 + 5 * S)) == [("RESUME", 0, 5 * S)]


def test_rows_after_a_timeout_nobody_saw_fire_idle_then_resume():
    """The detector was stopped past the timeout: the group's next batch reports both, at once."""
    group = Group(plan_of("IDLE_TIMEOUT(3s) | EVENT_TYPE(IDLE | RESUME)"))
    group.rows(T0)
    fired = group.rows(T0 + 10 * S)
    assert spans(fired) == [("IDLE", 0, 10 * S), ("RESUME", 0, 10 * S)]
    assert fired["trigger_id"].nunique() == 1


def test_window_events_go_on_beside_idle_events():
    """IDLE closes no window: WINDOW_CLOSE still follows the window's rules (the spec's 4.3.1)."""
    group = Group(plan_of("IDLE_TIMEOUT(2s) | EVENT_TYPE(WINDOW_CLOSE | IDLE | RESUME)", "COUNT_WINDOW(2)"))
    first = group.rows(T0, n=3)  # one window of two rows closes, a third row opens the next
    assert first["event_type"].tolist() == ["WINDOW_CLOSE"]
    assert spans(group.tick(T0 + 2 * S)) == [("IDLE", 0, 2 * S)]
    resumed = group.rows(T0 + 4 * S)
    assert resumed["event_type"].tolist() == ["RESUME", "WINDOW_CLOSE"]
    assert resumed["row_count"].tolist()[1] == 2


def test_without_idle_timeout_no_group_is_ever_idle():
    [stmt] = parse("CREATE STREAM d.s SESSION(ts, 1h) FROM d.meters PARTITION BY tbname NOTIFY('ws://h:1') "
                   "ON (WINDOW_CLOSE)")
    plan = TriggerPlan.build(stmt, "d.meters", path="/nowhere", columns=["ts", "v", "tbname"], ts_column="ts")
    group = Group(plan)
    group.rows(T0)
    assert group.due is None
    assert spans(group.rows(T0 + 3600 * S)) == []


def test_batch_mode_finds_the_windows_and_no_idle_events():
    """Idleness is processing time: a batch over the same rows (a recalculation) finds windows only."""
    plan = plan_of("IDLE_TIMEOUT(1s) | EVENT_TYPE(WINDOW_CLOSE | IDLE | RESUME)", "COUNT_WINDOW(2)")
    rows = pd.DataFrame({"ts": [1_000_000 * i for i in range(1, 6)], "v": 1, "tbname": "d001"})
    events = group_events(plan, rows, key=("d001",))  # rows 1-2 and 3-4 close, row 5 waits
    assert events["event_type"].tolist() == ["WINDOW_CLOSE", "WINDOW_CLOSE"]


@pytest.mark.parametrize("text, timeout", [("IDLE_TIMEOUT(1s)", 1_000_000), ("IDLE_TIMEOUT(5m)", 300_000_000),
                                           ("IDLE_TIMEOUT(10d)", 864_000_000_000),
                                           ("IDLE_TIMEOUT(1000a)", 1_000_000)])
def test_timeouts_within_the_limits_are_planned(text, timeout):
    assert plan_of(f"{text} | EVENT_TYPE(IDLE)").idle_timeout == timeout


def test_the_live_detector_fires_idle_and_resume_on_a_real_table(tmp_path):
    """The live detector on its own thread over a Delta table (no Spark): meter d1 stops reporting
    while d2 goes on; d1 alone goes idle after 2 s of wall-clock time, and resumes with its next row
    under the IDLE's trigger id."""
    import time

    from airflow_stream_provider.windows import detector, live
    from tests.windows.test_detector import events_table, setup, write

    wh, info, plan, opts = setup(None, tmp_path, "idle", "SESSION(ts, 1h)",
                                 "STREAM_OPTIONS(IDLE_TIMEOUT(2s)) NOTIFY('ws://h:1') ON (IDLE | RESUME)")
    base = 1_000_000_000

    def reading(meter: str, i: int) -> pd.DataFrame:
        return pd.DataFrame({"ts": [base + i * 1_000_000], "current": [1.0], "voltage": [220], "tbname": [meter],
                             "location": ["SF"]})

    def idle_events() -> pd.DataFrame:
        events = events_table(opts).sort_values(["batch_id", "seq"])
        return events[events["event_type"].isin(["IDLE", "RESUME"])]

    query = live.LiveDetector(detector.Detector(plan, opts), name="idle", idle_s=0.2).start()
    try:
        write(info, pd.concat([reading("d1", 0), reading("d2", 0)]))
        started = time.time()
        i = 1
        while time.time() < started + 60 and not len(idle_events()):
            assert query.isActive, query.exception()
            write(info, reading("d2", i))  # d2 keeps reporting, four times a second
            i += 1
            time.sleep(0.25)
        fed_until = time.time()
        write(info, reading("d1", i))  # d1 is back
        while time.time() < fed_until + 60 and (idle_events()["event_type"] == "RESUME").sum() < 1:
            assert query.isActive, query.exception()
            time.sleep(0.2)
    finally:
        query.stop()
    events = idle_events()
    meters = events["group_keys"].map(lambda k: json.loads(k)["tbname"])
    d1, d2 = events[meters == "d1"], events[meters == "d2"]
    assert d1["event_type"].tolist() == ["IDLE", "RESUME"]
    assert d1["trigger_id"].nunique() == 1 and d1["window_start"].nunique() == 1
    idle, resume = d1.iloc[0], d1.iloc[1]
    assert pd.Timedelta(seconds=2) <= idle["window_end"] - idle["window_start"] < pd.Timedelta(seconds=30)
    assert resume["window_end"] >= pd.Timestamp(fed_until, unit="s", tz="UTC")
    assert d1["row_count"].isna().all()
    # d2 was fed all along: if it went idle at all, it was after its last row
    assert (d2["window_start"] >= pd.Timestamp(fed_until - 0.25, unit="s", tz="UTC")).all()
