"""Ingest throughput: INSERT VALUES batches and bulk load, against a plain Spark Delta write.

    .venv/bin/python bench/ingest.py [--rows 2000000] [--subtables 100]

Generates meter rows (the TDengine `meters` example: ts, current, voltage, phase; tags location,
groupid), writes them once as Parquet and CSV, and measures in one process:

- INSERT VALUES: statements of 1,000 rows through the warehouse (parse, type checks, MERGE);
- bulk load of the Parquet and CSV files with ``airflow-stream load``'s code path;
- the baseline: ``spark.read.parquet(...).write.format("delta").save(...)`` of the same rows;
- ``airflow-stream serve`` (``bench/serve_ingest.py``): TDengine REST INSERT, line protocol, IoTDB
  insertTablet and the IoTDB session protocol's insertTablet in batches of 1,000 and 10,000 rows
  from 1 and 4 clients, against ``load`` and a direct kernel write of the same rows, and the latency
  of a REST INSERT to a stream's output row.

Targets: bulk load at 300,000 rows/s or more on a 2-core machine; through ``serve``, 200,000 rows/s
for line protocol and insertTablet with 10,000-row batches, and REST INSERT 5x the SQL INSERT.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from airflow_stream_provider import statements

TARGET_ROWS_PER_S = 300_000


def meter_rows(rows: int, subtables: int, seed: int = 7) -> pa.Table:
    rng = np.random.default_rng(seed)
    index = np.arange(rows)
    start = np.datetime64("2025-01-01T00:00:00", "ms")
    ts = start + (index // subtables) * np.timedelta64(1000, "ms")
    device = index % subtables
    return pa.table({
        "ts": pa.array(ts.astype("datetime64[us]"), pa.timestamp("us", tz="UTC")),
        "current": pa.array(rng.uniform(5, 15, rows).astype("float32")),
        "voltage": pa.array(rng.integers(200, 240, rows).astype("int32")),
        "phase": pa.array(rng.uniform(0, 1, rows).astype("float32")),
        "tbname": pa.array([f"d{i}" for i in range(subtables)])
        .take(pa.array(device)),
        "location": pa.array([f"California.City{i % 10}" for i in range(subtables)]).take(pa.array(device)),
        "groupid": pa.array((device % 5).astype("int32")),
    })


def insert_statements(table: pa.Table, per_statement: int, statements: int) -> list[str]:
    out = []
    cols = table.to_pydict()
    epoch_ms = 1_735_689_600_000  # 2025-01-01, one row per millisecond
    for s in range(statements):
        rows = []
        for i in range(s * per_statement, (s + 1) * per_statement):
            rows.append(f"({epoch_ms + i}, {cols['current'][i]:.4f}, {cols['voltage'][i]}, {cols['phase'][i]:.4f})")
        out.append("INSERT INTO bench_insert.d_insert USING bench_insert.meters TAGS ('California.Bench', 9) VALUES "
                   + " ".join(rows))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--subtables", type=int, default=100)
    parser.add_argument("--insert-statements", type=int, default=20)
    parser.add_argument("--skip-serve", action="store_true", help="leave out the rows of airflow-stream serve")
    parser.add_argument("--latency-windows", type=int, default=20, help="samples of the REST-to-output latency")
    args = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="airflow-stream-bench-"))
    os.environ["AIRFLOW_STREAM_HOME"] = str(home)
    os.environ.setdefault("AIRFLOW_STREAM_TIMEZONE", "UTC")
    from airflow_stream_provider.model import TableName
    from airflow_stream_provider.spark.session import local_session
    from airflow_stream_provider.warehouse import Warehouse
    from airflow_stream_provider.warehouse.load import load

    try:
        print(f"generating {args.rows:,} meter rows over {args.subtables} subtables in {home}", file=sys.stderr)
        data = meter_rows(args.rows, args.subtables)
        parquet, csv = home / "meters.parquet", home / "meters.csv"
        pq.write_table(data, parquet)
        pacsv.write_csv(data, csv)

        warehouse = Warehouse()
        schema = ("CREATE DATABASE bench_insert PRECISION 'ms'; "
                  "CREATE STABLE bench_insert.meters (ts TIMESTAMP, current FLOAT, voltage INT, phase FLOAT) "
                  "TAGS (location VARCHAR(64), groupid INT); "
                  "CREATE DATABASE bench PRECISION 'ms'; "
                  "CREATE STABLE bench.meters (ts TIMESTAMP, current FLOAT, voltage INT, phase FLOAT) "
                  "TAGS (location VARCHAR(64), groupid INT); "
                  "CREATE DATABASE bench_csv PRECISION 'ms'; "
                  "CREATE STABLE bench_csv.meters (ts TIMESTAMP, current FLOAT, voltage INT, phase FLOAT) "
                  "TAGS (location VARCHAR(64), groupid INT);")
        list(statements.run(warehouse, schema))
        results: list[tuple[str, int, float]] = []

        texts = insert_statements(data, 1000, args.insert_statements)
        started = time.perf_counter()
        for text in texts:
            list(statements.run(warehouse, text))
        results.append((f"INSERT VALUES, {len(texts)} x 1,000 rows", 1000 * len(texts),
                        time.perf_counter() - started))

        for label, path, db in (("load Parquet", parquet, "bench"), ("load CSV", csv, "bench_csv")):
            report = load(warehouse, path, TableName("meters", db))
            results.append((f"{label} ({report.commits} commit)", report.rows, report.seconds))

        spark = local_session("airflow-stream-bench")
        spark.range(1).count()  # JVM warm-up is not part of the baseline
        started = time.perf_counter()
        spark.read.parquet(str(parquet)).write.format("delta").save(str(home / "baseline"))
        baseline_s = time.perf_counter() - started
        results.append(("baseline: Spark df.write.format('delta')", args.rows, baseline_s))
        for db, expected in (("bench", args.rows), ("bench_csv", args.rows), ("bench_insert", 1000 * len(texts))):
            counted = spark.read.format("delta").load(str(home / "warehouse" / db / "meters")).count()
            if counted != expected:
                raise SystemExit(f"{db}.meters holds {counted} rows, expected {expected}")

        baseline_rate = args.rows / baseline_s
        print(f"\n{'case':<46} {'rows':>10} {'seconds':>8} {'rows/s':>11} {'vs baseline':>11}")
        for label, rows, seconds in results:
            rate = rows / seconds
            print(f"{label:<46} {rows:>10,} {seconds:>8.2f} {rate:>11,.0f} {rate / baseline_rate:>10.2f}x")
        load_rate = args.rows / results[1][2]
        verdict = "meets" if load_rate >= TARGET_ROWS_PER_S else "MISSES"
        print(f"\nbulk load {verdict} the target of {TARGET_ROWS_PER_S:,} rows/s ({load_rate:,.0f} rows/s)")
        spark.stop()
        met = load_rate >= TARGET_ROWS_PER_S
        if not args.skip_serve:
            met = serve_rows(home, data, parquet, args.latency_windows) and met
        return 0 if met else 1
    finally:
        shutil.rmtree(home, ignore_errors=True)


def serve_rows(home: Path, data: pa.Table, parquet: Path, windows: int) -> bool:
    import serve_ingest as sv

    from airflow_stream_provider.processes import free_port

    results = sv.throughput(home, free_port(), free_port(), free_port()) + sv.baselines(home, data, parquet)
    print(f"\n{'airflow-stream serve':<62} {'rows':>8} {'seconds':>8} {'rows/s':>10}")
    for label, rows, seconds in results:
        print(f"{label:<62} {rows:>8,} {seconds:>8.2f} {rows / seconds:>10,.0f}")
    rate = {label: rows / seconds for label, rows, seconds in results}
    met = True
    for endpoint, target in (("line protocol", sv.TARGET_SCHEMALESS), ("IoTDB insertTablet", sv.TARGET_SCHEMALESS),
                             ("TDengine REST INSERT", sv.TARGET_REST_INSERT)):
        batch = "1,000" if endpoint.startswith("TDengine") else "10,000"
        best = max(rate[f"{endpoint}, {batch}-row batches, {n} client{'s' * (n > 1)}"] for n in (1, 4))
        ok = best >= target
        met = met and ok
        print(f"{endpoint} with {batch}-row batches {'meets' if ok else 'MISSES'} the target of {target:,} rows/s "
              f"({best:,.0f} rows/s)")
    if windows:
        samples = sv.latency(home, free_port(), windows)
        cuts = statistics.quantiles(samples, n=100, method="inclusive")
        print(f"REST INSERT to the stream's output row (LOW_LATENCY_CALC, {windows} windows): p50 {cuts[49]:.2f} s, "
              f"p99 {cuts[98]:.2f} s")
    return met


if __name__ == "__main__":
    sys.exit(main())
