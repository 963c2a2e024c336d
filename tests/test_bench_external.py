"""How ``bench/external.py`` measures a window's lag: from the commit of the row that closed it to the
first commit of its output row, both read from the Delta logs. Worked out by hand on two small
tables written with delta-rs, whose log entries' times are set."""

from __future__ import annotations

import os
from datetime import timedelta

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from bench.external import T0, lags


def commit(path, columns: dict, at: float) -> None:
    """Append ``columns`` to the table at ``path`` as a commit landed at epoch second ``at``."""
    write_deltalake(str(path), pa.table(columns), mode="append")
    entry = max((path / "_delta_log").glob("*.json"))
    os.utime(entry, (at, at))


def stamps(*seconds: int) -> pa.Array:
    return pa.array([T0 + timedelta(seconds=s) for s in seconds], pa.timestamp("us", "UTC"))


def test_a_window_lags_from_the_commit_that_closed_it_to_its_output(tmp_path):
    source, output = tmp_path / "source", tmp_path / "output"
    # meter d0: rows at 5 s (at 1000), 12 s (at 1001: closes [0, 10)), 25 s (at 1002: closes [10, 20));
    # meter d1: a row at 3 s (at 1000), then one at 11 s only in the last commit (closes its [0, 10))
    commit(source, {"event_time": stamps(5, 3), "device_id": ["d0", "d1"]}, 1000)
    commit(source, {"event_time": stamps(12), "device_id": ["d0"]}, 1001)
    commit(source, {"event_time": stamps(25, 11), "device_id": ["d0", "d1"]}, 1002)
    # the outputs: d0 [0, 10) at 1001.5; d0 [10, 20) and d1 [0, 10) at 1003; d0 [0, 10) again
    # (a later commit of the same window counts from its first)
    commit(output, {"ts": stamps(0), "tag_tbname": ["d0"]}, 1001.5)
    commit(output, {"ts": stamps(10, 0, 0), "tag_tbname": ["d0", "d1", "d0"]}, 1003)
    got = sorted(lags(source, "event_time", "device_id", output, started=990))
    assert got == pytest.approx(sorted([0.5, 1.0, 1.0]))
    # windows closed in the first 10 s after the start are left out
    assert lags(source, "event_time", "device_id", output, started=991.5) == pytest.approx([1.0, 1.0])
