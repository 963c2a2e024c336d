"""`airflow-stream demo`, the README's main job, run for a short while as a user would.

The demo starts its own stream node, Airflow standalone and receiver, writes live readings and
stops. Afterwards its outputs and notifications are checked against oracles computed here with
pandas from the readings it wrote (read back from its Delta tables with local Spark): window by
window, the reference's rules for each trigger.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest

from airflow_stream_provider import statements
from airflow_stream_provider.demo import Meters
from airflow_stream_provider.notify.message import validate
from airflow_stream_provider.warehouse import Warehouse

pytestmark = [pytest.mark.spark, pytest.mark.airflow]

CLI = Path(sys.executable).with_name("airflow-stream")


def frame(wh: Warehouse, query: str) -> pd.DataFrame:
    table = list(statements.run(wh, query))[-1].table
    out = table.to_pandas()
    for col in out.columns:
        if str(out[col].dtype).startswith("datetime64"):
            out[col] = pd.to_datetime(out[col], utc=True)
    return out


def runs(rows: pd.DataFrame, column: str) -> list[tuple]:
    """The state windows of one meter's rows: (start, end, value, count), in time order."""
    out: list[tuple] = []
    for ts, value in zip(rows["ts"], rows[column], strict=True):
        if out and out[-1][2] == value:
            start, _end, _v, n = out[-1]
            out[-1] = (start, ts, value, n + 1)
        else:
            out.append((ts, ts, value, 1))
    return out


def test_every_simulated_meter_surges_long_enough_for_true_for_within_25_readings():
    """The demo's ``surges`` stream (EVENT_WINDOW ... TRUE_FOR(4s)) must have windows to notify in a
    short run, whichever order the meters draw their readings in: between two surges of 5 readings
    or more (5 s at one a second), and before the first, a meter reads at most 25 normal voltages."""
    start = datetime(2025, 1, 1, tzinfo=UTC)
    for seed in range(20):
        meters = Meters(3, seed=seed)
        order = random.Random(seed)
        highs: dict[str, list[bool]] = {m.name: [] for m in meters.meters}
        for second in range(300):
            for meter in order.sample(meters.meters, len(meters.meters)):
                voltage = int(meters.reading(meter, start + timedelta(seconds=second)).strip("()").split(", ")[2])
                highs[meter.name].append(voltage >= 240)
        for name, values in highs.items():
            normal, longest, surges = 0, 0, 0
            for high, group in itertools.groupby(values):
                n = len(list(group))
                if not high:
                    normal += n
                elif n >= 5:
                    longest, normal, surges = max(longest, normal), 0, surges + 1
            assert surges >= 300 // (25 + 9) and max(longest, normal) <= 25, (seed, name, surges, longest, normal)


def test_demo_runs_and_its_outputs_are_right(spark, tmp_path):
    home = tmp_path / "demo"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW_STREAM", "AIRFLOW__", "SPARK_CONNECT"))}
    env["PYTHONUNBUFFERED"] = "1"
    done = subprocess.run([str(CLI), "demo", "--duration", "55", "--drain", "150", "--meters", "3",
                           "--home", str(home), "--port", "0"],
                          env=env, capture_output=True, text=True, timeout=1200, check=False)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-4000:]
    for line in ("Streams page", "writing live readings for 55 s", "stopped writing", "[demo] stopped"):
        assert line in log, log[-3000:]

    wh = Warehouse(home / "stream" / "warehouse", spark=spark, database="power")
    meters = frame(wh, "SELECT tbname, ts, current, voltage, mode FROM meters").sort_values(["tbname", "ts"])
    assert set(meters["tbname"]) == {"d1001", "d1002", "d1003"}
    late = "wrote a late reading for d1001"
    assert late in log  # late readings were written, and must be in the outputs below

    # INTERVAL(10s) SLIDING(10s), WATERMARK(2s): every window closed by a later reading of its meter
    # (its end at least 2 s before the meter's last reading) is output once, with every reading of
    # the window, late ones included (they are recalculated)
    meters["window"] = meters["ts"].dt.floor("10s")
    oracle = meters.groupby(["tbname", "window"]).agg(voltage=("voltage", "mean"), readings=("voltage", "size"))
    last = meters.groupby("tbname")["ts"].max()
    closed = {(t, w) for t, w in oracle.index if w + pd.Timedelta("12s") <= last[t]}
    avg = frame(wh, "SELECT meter, ts, voltage, readings FROM avg_voltage")
    got = {(r.meter, r.ts): (r.voltage, r.readings) for r in avg.itertuples()}
    assert closed <= set(got), sorted(closed - set(got))[:5]
    for key, (voltage, readings) in got.items():
        assert readings == oracle.loc[key, "readings"], key
        assert voltage == pytest.approx(oracle.loc[key, "voltage"]), key

    # STATE_WINDOW(mode): every run of one mode but each meter's last (still open) is a window;
    # d1001's late readings may split a run after the fact, so it is left out here
    modes = frame(wh, "SELECT tag_tbname, ts, until_ts, mode, readings FROM modes")
    for meter in ("d1002", "d1003"):
        expected = runs(meters[meters["tbname"] == meter], "mode")[:-1]
        out = modes[modes["tag_tbname"] == meter].sort_values("ts")
        assert [(r.ts, r.until_ts, r.mode, r.readings) for r in out.itertuples()] == expected

    # SESSION(ts, 5s): readings no more than 5 s apart; every output is one such session
    sessions = frame(wh, "SELECT tag_tbname, ts, until_ts, readings FROM sessions")
    assert len(sessions) > 0
    for r in sessions[sessions["tag_tbname"] != "d1001"].itertuples():  # d1001: see STATE_WINDOW
        rows = meters[(meters["tbname"] == r.tag_tbname) & (meters["ts"] >= r.ts) & (meters["ts"] <= r.until_ts)]
        assert len(rows) == r.readings
        assert (rows["ts"].diff().dropna() <= pd.Timedelta("5s")).all()  # a one-reading session has no gap
        meter = meters[meters["tbname"] == r.tag_tbname]["ts"]
        before, after = meter[meter < r.ts], meter[meter > r.until_ts]
        assert before.empty or r.ts - before.max() > pd.Timedelta("5s")
        assert after.empty or after.min() - r.until_ts > pd.Timedelta("5s")

    # EVENT_WINDOW(voltage >= 240 .. voltage < 240) TRUE_FOR(4s): surges of at least 4 s, peaking at 240+
    surges = frame(wh, "SELECT tag_tbname, ts, until_ts, peak FROM surges")
    assert len(surges) > 0
    assert ((surges["until_ts"] - surges["ts"]) >= pd.Timedelta("4s")).all()
    assert (surges["peak"] >= 240).all()

    # PERIOD(10s): one row per 10 s instant
    counts = frame(wh, "SELECT ts, readings FROM row_counts")
    assert len(counts) > 0 and (counts["ts"].dt.microsecond == 0).all() and (counts["ts"].dt.second % 10 == 0).all()
    # ... computed by the demo's stream node, the runs' compute tasks started in the triggerer with
    # their instants rendered (their task logs say so)
    computes = [p.read_text() for p in home.rglob("dag_id=stream__power__row_counts/*/task_id=compute/*.log*")]
    assert any("the stream node computes the instant" in text for text in computes), computes[:2]

    # notifications: valid messages; every_20 (notify only) carries the average current of 20 readings
    messages = [json.loads(line) for line in (home / "notifications.jsonl").read_text().splitlines()]
    for message in messages:
        validate(message)
    events = [(s["streamName"], e) for m in messages for s in m["streams"] for e in s["events"]]
    count_events = [e for name, e in events if name == "every_20"]
    assert count_events
    for e in count_events:
        start, end = (pd.Timestamp(e[k], unit="ms", tz="UTC") for k in ("windowStart", "windowEnd"))
        inside = meters[(meters["ts"] >= start) & (meters["ts"] <= end)]
        matches = [meter for meter, group in inside.groupby("tbname")
                   if len(group) == 20 and group["current"].mean() == pytest.approx(e["result"]["avg_current"])]
        # a late reading (the only ones off whole seconds) lands in a count window after it fired
        cut_by_late = (inside[inside["tbname"] == "d1001"]["ts"].dt.microsecond != 0).any()
        assert matches or cut_by_late, e
    assert any(name == "avg_voltage" and e["eventType"] == "WINDOW_CLOSE" for name, e in events)
    assert any(name == "surges" and e["eventType"] == "WINDOW_OPEN" for name, e in events)
