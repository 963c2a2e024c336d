"""The soak with faults (``bench/soak``) for 90 s of feed: twelve streams over our own table fed with
late rows, updates and deletes (and rows that three concurrent clients write through
``airflow-stream serve``'s REST endpoint), and two over an attached Delta table that a separate
delta-rs process appends to, MERGEs into and deletes from meanwhile, while the stream node, the
scheduler, the triggerer, a task process and the WebSocket receiver are each killed with SIGKILL at
least once and restarted; afterwards every output and notification equals the oracle's (over each
table's final snapshot), nothing twice, no stream failed, and VERIFY STREAM of every window stream finds no
difference but the invalidated results TDengine keeps. With start-up and the catch-up, about four
minutes.

The seed comes from ``SOAK_SEED`` when set, else at random, and is printed: ``SOAK_SEED=<seed>`` (or
``python -m bench.soak --minutes 1.5 --seed <seed>``) writes the same rows and kills at the same moments,
though the processes' own timing differs from run to run.
"""

from __future__ import annotations

import os
import random

import pandas as pd
import pytest

from bench.soak import COMPONENTS, STREAMS, oracle_windows, run_soak

S = 1000  # a second, in ms


def test_the_oracle_finds_the_windows_of_each_kind():
    """The soak's oracle on rows worked by hand: one subtable, rows at 0, 60, 120, 300, 360 and 600 s."""
    rows = pd.DataFrame({"t": [0, 60 * S, 120 * S, 300 * S, 360 * S, 600 * S], "v": [9.0, 1.0, 4.0, 2.0, 9.0, 0.0],
                         "st": [1, 1, 2, 2, 1, 1], "tbname": ["d0"] * 6})
    spec = {s.name: s for s in STREAMS}

    def starts(name: str, table: pd.DataFrame = rows) -> dict[int, tuple]:
        return {start // S: value for (_group, start), value in oracle_windows(spec[name], table).items()}

    # INTERVAL(30s): empty windows between rows trigger too; the window holding the latest row is open
    interval = starts("int30")
    assert (interval[0], interval[30], interval[60]) == ((None, 9.0, 9.0, 1), (None, None, None, 0),
                                                         (None, 1.0, 1.0, 1))
    assert sorted(interval) == list(range(0, 600, 30))
    # SESSION(ts, 25s): every row is a session of its own; the last one is still open
    assert sorted(starts("sess")) == [0, 60, 120, 300, 360]
    # STATE_WINDOW(st): runs of equal values; the last run is open
    assert starts("state") == {0: (60 * S, 5.0, 9.0, 2), 120: (300 * S, 3.0, 4.0, 2)}
    # EVENT_WINDOW(START WITH v >= 8 END WITH v <= 2): from a 9.0 to the next value of at most 2
    assert starts("event") == {0: (60 * S, 5.0, 9.0, 2), 360: (600 * S, 4.5, 9.0, 2)}
    # COUNT_WINDOW(5) reads subtable d3 only
    assert starts("count5") == {}
    assert starts("count5", rows.assign(tbname="d3")) == {0: (360 * S, 5.0, 9.0, 5)}


@pytest.mark.spark
@pytest.mark.airflow
@pytest.mark.soak
def test_streams_survive_killed_processes(spark, tmp_path, monkeypatch):
    seed = int(os.environ.get("SOAK_SEED") or random.SystemRandom().randrange(1 << 31))
    print(f"soak seed {seed}")
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(home))
    monkeypatch.setenv("AIRFLOW_STREAM_API_URL", "http://127.0.0.1:9")  # run_soak points it at its Airflow
    report = run_soak(home, 90, seed, spark, settle=150)
    print(report.table())
    killed = {fault.component for fault in report.faults if fault.done}
    assert killed == set(COMPONENTS), report.table()
    assert report.rows["late"] and report.rows["updates"] and report.rows["deletes"], report.table()
    assert report.foreign["late"] and report.foreign["updates"] and report.foreign["deletes"], report.table()
    assert report.findings.foreign > 20, report.table()  # windows of the attached table, checked
    assert report.findings.windows > 100 and report.findings.notifications > 50, report.table()
    assert report.rest["rest inserts"] > 50 and report.rest["rest updates"] and not report.rest_errors, report.table()
    assert report.verified is not None and report.verified.streams == len(STREAMS) - 2, report.table()
    assert report.verified.triggers > 100 and not report.verified.problems, report.table()
    assert report.ok, report.table()
