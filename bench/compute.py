"""Compute throughput: fired windows computed and written to the output supertable.

    .venv/bin/python bench/compute.py [--groups 100] [--windows 100] [--loop 100]

A supertable of ``groups`` subtables holds one row every 5 s (60 rows per 5-minute window); the
stream ``INTERVAL(5m) SLIDING(5m) ... PARTITION BY tbname`` computes
``SELECT _twstart, avg(current), max(voltage), count(*) FROM %%tbname WHERE _c0 >= _twstart AND
_c0 < _twend`` for ``groups x windows`` fired windows and upserts the results, in one process:

- batched: all windows as one Spark job (the stream's own path), then one Delta commit;
- baseline: a per-window loop (each window computed alone, with its values as literals, and written
  alone) over the first ``--loop`` windows, extrapolated to all of them.

Target (2 cores): 10,000 windows (100 groups x 100 windows) in 30 s or less.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from airflow_stream_provider import statements

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def meter_rows(groups: int, windows: int) -> pa.Table:
    per_group = windows * 60
    n = groups * per_group
    index = np.arange(n)
    ts = np.datetime64("2025-01-01T00:00:00", "s") + ((index % per_group) * 5).astype("timedelta64[s]")
    rng = np.random.default_rng(11)
    return pa.table({
        "ts": pa.array(ts.astype("datetime64[us]"), pa.timestamp("us", tz="UTC")),
        "current": pa.array(rng.uniform(0, 20, n).astype(np.float32)),
        "voltage": pa.array(rng.integers(200, 240, n).astype(np.int32)),
        "tbname": pa.array([f"d{g}" for g in index // per_group]),
        "groupid": pa.array((index // per_group).astype(np.int32)),
    })


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--windows", type=int, default=100)
    parser.add_argument("--loop", type=int, default=100, help="windows the per-window baseline runs")
    args = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="airflow-stream-bench-"))
    os.environ["AIRFLOW_STREAM_HOME"] = str(home)
    os.environ.setdefault("AIRFLOW_STREAM_TIMEZONE", "UTC")
    from airflow_stream_provider.model import TableName
    from airflow_stream_provider.spark.session import local_session
    from airflow_stream_provider.streams.fired import TROWS_FROM, TROWS_TO, Fired
    from airflow_stream_provider.streams.runtime import RunReport, StreamRuntime, group_id
    from airflow_stream_provider.streams.store import StreamStore
    from airflow_stream_provider.streams.write import compute_and_write
    from airflow_stream_provider.warehouse import Warehouse
    from airflow_stream_provider.warehouse.load import load

    try:
        total = args.groups * args.windows
        print(f"{args.groups} groups x {args.windows} windows x 60 rows in {home}", file=sys.stderr)
        wh = Warehouse(spark=local_session("airflow-stream-bench"))
        list(statements.run(wh, "CREATE DATABASE b; USE b; "
                                "CREATE STABLE meters (ts TIMESTAMP, current FLOAT, voltage INT) TAGS (groupid INT)"))
        parquet = home / "meters.parquet"
        pq.write_table(meter_rows(args.groups, args.windows), parquet)
        load(wh, parquet, TableName("meters", "b"))
        query = ("SELECT _twstart, avg(current), max(voltage), count(*) FROM %%tbname "
                 "WHERE _c0 >= _twstart AND _c0 < _twend")
        for name, out in (("batched", "out_batched"), ("loop", "out_loop")):
            list(statements.run(wh, f"CREATE STREAM {name} INTERVAL(5m) SLIDING(5m) FROM meters PARTITION BY tbname "
                        f"INTO {out} AS {query}"))

        def fired_windows(runtime: StreamRuntime) -> list[Fired]:
            out = []
            for g in range(args.groups):
                for w in range(args.windows):
                    start = T0 + timedelta(minutes=5 * w)
                    end = start + timedelta(minutes=5)
                    gid = group_id(runtime, (f"d{g}",))
                    values = {"_twstart": start, "_twend": end, TROWS_FROM: start, TROWS_TO: end,
                              **runtime.group_values((f"d{g}",))}
                    out.append(Fired(len(out), values, group=(f"d{g}",), group_id=gid))
            return out

        results = []
        store = StreamStore()
        batched = StreamRuntime(wh, store.get("b", "batched").statement, "b")
        fired = fired_windows(batched)
        report = RunReport("b.batched")
        started = time.perf_counter()
        compute_and_write(batched, fired, report, batched=True)
        seconds = time.perf_counter() - started
        assert report.written == total, report
        results.append((f"batched: {total:,} windows, one job + one commit", total, seconds))

        loop = StreamRuntime(wh, store.get("b", "loop").statement, "b")
        sample = fired_windows(loop)[: args.loop]
        compute_and_write(loop, sample[:1], RunReport("warm"), batched=False)  # warm-up
        started = time.perf_counter()
        for f in sample:
            compute_and_write(loop, [f], RunReport("b.loop"), batched=False)
        per_window = (time.perf_counter() - started) / len(sample)
        results.append((f"baseline: per-window loop ({len(sample)} run, extrapolated)", total, per_window * total))

        baseline = results[-1][2]
        print(f"{'case':<56} {'windows':>8} {'seconds':>9} {'windows/s':>10} {'vs baseline':>11}")
        for label, count, secs in results:
            print(f"{label:<56} {count:>8,} {secs:>9.2f} {count / secs:>10,.0f} {baseline / secs:>10.1f}x")
        verdict = "meets" if seconds <= 30 else "misses"
        print(f"batched compute {verdict} the target of 30 s for {total:,} windows ({seconds:.1f} s)")
        return 0
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
