"""What the scaled-out topology costs on one machine: local[2] against a two-worker Spark cluster,
and the warehouse on a local path against an S3-compatible object store (MinIO), in one run.

    .venv/bin/python bench/scale.py [--meters 10] [--seconds 20000] [--windows 15] [--batches 40]
    .venv/bin/python bench/scale.py --detection [--meters 100] [--seconds 1000] [--streams 20]

- Warehouse writes and reads, through the Delta kernel: ``--batches`` INSERTs of 1,000 rows into a
  supertable (rows/s, ms per commit), then five full reads of it (rows/s); once with the warehouse
  in the home, once at ``s3://`` on a MinIO server started here.
- Window-stream throughput, on the stream node as ``local[2]`` and as the driver of a standalone
  cluster of two one-core workers started here (``dev/cluster``): ``--meters`` x ``--seconds`` rows
  (one per meter per second) loaded, then an INTERVAL(10s) stream per meter created with
  FILL_HISTORY_FIRST; rows/s from the stream's creation to its last window written, detection and
  compute included.
- End-to-end latency of a LOW_LATENCY_CALC stream on each: each sample commits a row that closes
  the previous 1-minute window; latency is from that commit to the output's commit (Delta commit
  timestamps), p50 and p99 of ``--windows`` samples.

Ratios are cluster / local[2] and object store / local path. On one 2-core machine the cluster
cannot be faster: it runs the same work with more JVMs on the same cores, plus the network hops
between driver and executors. The point is that it works and what it costs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from latency import commit_ms, first_version_with, quantiles

from airflow_stream_provider import statements
from airflow_stream_provider.local_servers import Minio
from airflow_stream_provider.processes import free_port
from airflow_stream_provider.spark import standalone

CLI = Path(sys.executable).with_name("airflow-stream")
T0 = datetime(2025, 1, 1, tzinfo=UTC)
T0_MS = int(T0.timestamp() * 1000)


def say(message: str) -> None:
    print(f"[scale] {message}", file=sys.stderr, flush=True)


def cli(env: dict[str, str], *args: str, timeout: int = 600) -> str:
    done = subprocess.run([str(CLI), *args], env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise SystemExit(f"airflow-stream {' '.join(args[:2])} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def warehouse_io(home: Path, env: dict[str, str], batches: int) -> dict[str, float]:
    """Kernel writes and reads with the environment ``env`` (a local or an object-store warehouse)."""
    from deltalake import DeltaTable

    from airflow_stream_provider.warehouse import Warehouse

    saved = dict(os.environ)
    os.environ.update(env)
    try:
        wh = Warehouse(home / "warehouse")
        list(statements.run(wh, "CREATE DATABASE io; USE io; CREATE STABLE m (ts TIMESTAMP, v DOUBLE) TAGS (g INT)"))
        started = time.perf_counter()
        for b in range(batches):
            values = " ".join(f"({T0_MS + b * 1000 + i}, {i})" for i in range(1000))
            list(statements.run(wh, f"INSERT INTO io.d{b % 10} USING io.m TAGS ({b % 10}) VALUES {values}"))
        write_s = time.perf_counter() - started
        location = wh.catalog.table_path("io", "m")
        started = time.perf_counter()
        rows = sum(DeltaTable(str(location)).to_pyarrow_table().num_rows for _ in range(5))
        read_s = time.perf_counter() - started
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return {"write rows/s": batches * 1000 / write_s, "ms per commit": write_s / batches * 1000,
            "read rows/s": rows / read_s}


def stream_figures(home: Path, env: dict[str, str], master: str, args: argparse.Namespace) -> dict[str, float]:
    """Throughput and LOW_LATENCY_CALC latency on a node driving ``master``."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    from airflow_stream_provider.warehouse import Warehouse

    env = env | {"AIRFLOW_STREAM_HOME": str(home)}
    cli(env, "node", "start", "--port", str(free_port()), "--master", master)
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        wh = Warehouse(home / "warehouse")
        cli(env, "sql", "CREATE DATABASE load; USE load; CREATE STABLE m (ts TIMESTAMP, v DOUBLE) TAGS (g INT); "
                        "CREATE TABLE l (ts TIMESTAMP, v DOUBLE)")
        rows = args.meters * args.seconds
        for meter in range(args.meters):
            values = " ".join(f"({T0_MS + s * 1000}, {s % 97})" for s in range(args.seconds))
            list(statements.run(wh, f"INSERT INTO load.d{meter} USING load.m TAGS ({meter}) VALUES {values}"))
        windows = args.meters * (args.seconds // 10 - 1)  # the last window of each meter stays open
        out = home / "warehouse" / "load" / "w_out"
        started = time.perf_counter()
        cli(env, "sql", "-d", "load", "CREATE STREAM w INTERVAL(10s) SLIDING(10s) FROM m PARTITION BY tbname "
                                      "STREAM_OPTIONS(FILL_HISTORY_FIRST) INTO w_out "
                                      "AS SELECT _twstart ts, avg(v) a, count(*) n FROM %%trows")
        deadline = time.monotonic() + 1800
        written = 0
        while written < windows:
            if time.monotonic() > deadline:
                raise SystemExit(f"{master}: {written} of {windows} windows after 30 minutes")
            cli(env, "run", "load.w", "--until-idle")
            written = DeltaTable(str(out)).to_pyarrow_table(columns=["ts"]).num_rows if out.exists() else 0
        throughput = rows / (time.perf_counter() - started)
        say(f"{master}: {rows} rows, {windows} windows in {rows / throughput:.1f} s")

        cli(env, "sql", "-d", "load", "CREATE STREAM fast INTERVAL(1m) SLIDING(1m) FROM l "
                                      "STREAM_OPTIONS(LOW_LATENCY_CALC) INTO fast_out "
                                      "AS SELECT _twstart ts, sum(v) total FROM %%trows")
        table, fast_out = home / "warehouse" / "load" / "l", home / "warehouse" / "load" / "fast_out"
        time.sleep(5)  # the node starts the stream's detector on its next round
        list(statements.run(wh, f"INSERT INTO load.l VALUES ({T0_MS + 5000}, 0)"))
        latencies = []
        for i in range(1, args.windows + 1):
            list(statements.run(wh, f"INSERT INTO load.l VALUES ({T0_MS + i * 60_000 + 5000}, {i})"))
            committed = commit_ms(table, DeltaTable(str(table)).version())
            start = pa.scalar(T0 + timedelta(minutes=i - 1), type=pa.timestamp("us", tz="UTC"))

            def done(arrow: pa.Table, start: pa.Scalar = start) -> bool:
                return arrow.num_rows > 0 and pc.any(pc.equal(arrow.column("ts"), start)).as_py()

            deadline = time.monotonic() + 120
            version = None
            while version is None:
                if time.monotonic() > deadline:
                    raise SystemExit(f"{master}: window {i} of the LOW_LATENCY_CALC stream not written in 120 s")
                time.sleep(0.05)
                version = first_version_with(fast_out, done)
            latencies.append((commit_ms(fast_out, version) - committed) / 1000)
        p50, p99 = quantiles(latencies)
        say(f"{master}: LOW_LATENCY_CALC p50 {p50:.2f} s, p99 {p99:.2f} s")
        return {"window rows/s": throughput, "latency p50 s": p50, "latency p99 s": p99}
    finally:
        os.environ.clear()
        os.environ.update(saved)
        cli(env, "node", "stop", timeout=120)


def table(title: str, left: str, right: str, a: dict[str, float], b: dict[str, float]) -> None:
    print(f"\n{title}\n")
    print(f"| measure | {left} | {right} | ratio |")
    print("|---|---:|---:|---:|")
    for key in a:
        print(f"| {key} | {a[key]:,.2f} | {b[key]:,.2f} | {b[key] / a[key]:.2f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--meters", type=int, default=10)
    parser.add_argument("--seconds", type=int, default=20_000, help="rows per meter, one per second")
    parser.add_argument("--windows", type=int, default=15, help="latency samples per topology")
    parser.add_argument("--batches", type=int, default=40, help="1,000-row INSERTs per warehouse")
    parser.add_argument("--detection", action="store_true",
                        help="only the detector engines' rows (bench/engines.py): in-process vs spark on local[2]")
    parser.add_argument("--streams", type=int, default=20, help="--detection: the streams on the table")
    parser.add_argument("--commits", type=int, default=10, help="--detection: the commits the rows come in")
    args = parser.parse_args()
    if args.detection:
        from engines import detection_figures, print_table

        print_table(detection_figures(args.meters, args.seconds, args.commits, args.streams))
        return 0
    work = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    say(f"working in {work}")
    base = {k: v for k, v in os.environ.items() if k not in ("AIRFLOW_STREAM_WAREHOUSE", "AIRFLOW_STREAM_HOME")}

    minio = Minio(work / "minio").start()
    try:
        local_io = warehouse_io(work / "io-local", base | {"AIRFLOW_STREAM_HOME": str(work / "io-local")},
                                args.batches)
        remote_io = warehouse_io(work / "io-s3", base | minio.environ | {
            "AIRFLOW_STREAM_HOME": str(work / "io-s3"), "AIRFLOW_STREAM_WAREHOUSE": minio.url("io")}, args.batches)
    finally:
        minio.stop()

    local = stream_figures(work / "local", base, "local[2]", args)
    cluster = standalone.start(work / "cluster", workers=2, cores=1, memory="1g")
    try:
        clustered = stream_figures(work / "cluster-home", base, cluster.master_url, args)
    finally:
        cluster.stop()

    table("Streams: the node on local[2] and as the driver of two one-core workers", "local[2]",
          "2-worker cluster", local, clustered)
    table("Warehouse through the Delta kernel: a local path and MinIO on 127.0.0.1", "local path",
          "object store", local_io, remote_io)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
