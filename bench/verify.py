"""VERIFY STREAM against the batch recomputation of the same windows, and its memory.

    .venv/bin/python bench/verify.py [--meters 100] [--minutes 1440]

A supertable of ``meters`` subtables holds one row a minute for one day; two streams over it,
``INTERVAL(5m) SLIDING(5m)`` and ``STATE_WINDOW(st)`` (the state changes every 10 minutes), both
``PARTITION BY tbname``, compute their day of windows live. Then, per stream:

- batch: the same windows found again and computed in batch and written (``RECALCULATE``'s path,
  :func:`airflow_stream_provider.streams.recalculate.recalculate`), best of two;
- verify: ``VERIFY STREAM`` over the day (found, computed, read back from the output and compared),
  best of two; it must report the output equal.

Printed: windows, seconds of each, the ratio verify / batch (target: 1.5 or less), the peak
Python heap of one VERIFY (tracemalloc) and the process's peak resident memory.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from airflow_stream_provider import statements

T0 = datetime(2025, 1, 1, tzinfo=UTC)
QUERY = "SELECT _twstart, avg(current), max(voltage), count(*) FROM %%tbname WHERE _c0 >= _twstart AND _c0 {op} _twend"
STREAMS = {"interval": ("INTERVAL(5m) SLIDING(5m)", "<"), "state": ("STATE_WINDOW(st)", "<=")}


def meter_rows(meters: int, minutes: int) -> pa.Table:
    n = meters * minutes
    index = np.arange(n)
    minute = index % minutes
    ts = np.datetime64("2025-01-01T00:00:00", "s") + (minute * 60).astype("timedelta64[s]")
    rng = np.random.default_rng(7)
    return pa.table({
        "ts": pa.array(ts.astype("datetime64[us]"), pa.timestamp("us", tz="UTC")),
        "current": pa.array(rng.uniform(0, 20, n).astype(np.float32)),
        "voltage": pa.array(rng.integers(200, 240, n).astype(np.int32)),
        "st": pa.array(((minute // 10) % 2).astype(np.int32)),
        "tbname": pa.array([f"m{g}" for g in index // minutes]),
        "groupid": pa.array((index // minutes).astype(np.int32)),
    })


def best_of(runs: int, fn):
    best, value = float("inf"), None
    for _ in range(runs):
        started = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - started)
    return best, value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--meters", type=int, default=100)
    parser.add_argument("--minutes", type=int, default=1440, help="rows per meter, one a minute (default: a day)")
    args = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="airflow-stream-bench-"))
    os.environ["AIRFLOW_STREAM_HOME"] = str(home)
    os.environ.setdefault("AIRFLOW_STREAM_TIMEZONE", "UTC")
    from airflow_stream_provider.model import TableName
    from airflow_stream_provider.spark.session import local_session
    from airflow_stream_provider.streams.recalculate import recalculate
    from airflow_stream_provider.streams.run import run
    from airflow_stream_provider.streams.verify import verify
    from airflow_stream_provider.warehouse import Warehouse
    from airflow_stream_provider.warehouse.load import load

    try:
        print(f"{args.meters} meters x {args.minutes} rows in {home}", file=sys.stderr)
        wh = Warehouse(spark=local_session("airflow-stream-bench"))
        list(statements.run(wh, "CREATE DATABASE b; USE b; CREATE STABLE meters (ts TIMESTAMP, current FLOAT, "
                                "voltage INT, st INT) TAGS (groupid INT)"))
        for name, (trigger, op) in STREAMS.items():
            list(statements.run(wh, f"CREATE STREAM {name} {trigger} FROM meters PARTITION BY tbname "
                                    f"INTO {name}_out AS {QUERY.format(op=op)}"))
        parquet = home / "meters.parquet"
        pq.write_table(meter_rows(args.meters, args.minutes), parquet)
        load(wh, parquet, TableName("meters", "b"))
        start, end = T0, T0 + timedelta(minutes=args.minutes)
        rows = []
        for name in STREAMS:
            live = run(wh, "b", name)
            print(f"{name}: live {live.summary()}", file=sys.stderr)
            batch, done = best_of(2, lambda n=name: recalculate(wh, "b", n, start, end))
            checked, report = best_of(2, lambda n=name: verify(wh, "b", n, start, end))
            assert report is not None and report.equal, report.summary() if report else None
            tracemalloc.start()
            verify(wh, "b", name, start, end)
            _, heap = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            rows.append((name, report.triggers, batch, checked, heap))
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"{'stream':<10} {'windows':>8} {'batch s':>8} {'verify s':>9} {'ratio':>6} {'heap MiB':>9}")
        for name, windows, batch, checked, heap in rows:
            print(f"{name:<10} {windows:>8,} {batch:>8.2f} {checked:>9.2f} {checked / batch:>6.2f} "
                  f"{heap / 2**20:>9.1f}")
        print(f"process peak resident memory: {peak:,.0f} MiB (target ratio: 1.5 or less)")
        return 0
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
