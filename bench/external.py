"""A window stream over tables that are not ours, against one over our own: its lag and its rate.

    .venv/bin/python bench/external.py [--seconds 60] [--meters 100]

Three tables of ``--meters`` meters get one commit a second for ``--seconds`` seconds, each commit
a row per meter at the next second of event time (from 2025-01-01):

- ``own``: our supertable (a subtable per meter), fed by our INSERT, from a process of its own;
- ``attached``: a Delta table outside the warehouse, attached with ``CREATE STABLE ... FROM DELTA``,
  fed by a separate Spark Structured Streaming query at a one-second trigger
  (``bench/external_writer.py``, which imports pyspark only);
- ``dv+cm``: the same, with deletion vectors and column mapping (name mode) on.

Over each, one stream ``INTERVAL(10s) SLIDING(10s) PARTITION BY tbname`` with LOW_LATENCY_CALC: its
detector computes and writes each window its batch closes. The detector runs in this process as a
node's worker runs it (``DetectorHost``: the same change feed, the same batches), polled every
20 ms as the node's feed polls a local table, so the figures are the detector's, free of the
node's scheduling. Each writer runs at a lower CPU priority (``nice 10``): a team's writer has
machines of its own, and on 2 cores a Spark writer's JVM would otherwise take the detector's CPU
right when each commit lands, so the p99 would measure the writer rather than the reading path.

- lag: for each window, from the commit of the row that closed it (the meter's first row at or
  after the window's end) to the commit of the window's output row; a commit's moment is when its
  log entry was written (the file's modification time), whoever wrote it. The windows closed in the
  first 10 s of a feed are left out (the writer's start-up).
- detection rows/s: the rows of the detector's batches over the seconds those batches took (the
  change feed read, the windows, the computation and the output's commit).

Target: ``attached`` and ``dv+cm`` within 1.5x of ``own`` (their lag p50 and p99 at most 1.5 times
own's, their rate at least own's divided by 1.5).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parents[1]
T0 = datetime(2025, 1, 1, tzinfo=UTC)
WINDOW_S = 10
WARMUP_S = 10
TARGET = 1.5
STREAM = ("CREATE STREAM {db}.s INTERVAL({w}s) SLIDING({w}s) FROM {db}.meters PARTITION BY tbname "
          "STREAM_OPTIONS(LOW_LATENCY_CALC) INTO {db}.out AS SELECT _twstart ts, avg(v) a, count(*) n FROM %%trows")
MAP = "MAP (TIMESTAMP ts = event_time, TBNAME device_id, TAGS (site), COLUMNS (v))"


# --- the commits' moments and rows, from the Delta logs ----------------------------------------------


def commits(path: Path, columns: tuple[str, str]) -> list[tuple[int, float, dict]]:
    """(version, moment in epoch seconds, columns -> values of the rows the version added) of each
    version of the Delta table at ``path``; ``columns`` by their logical names (read under their
    physical ones when the table maps them)."""
    import pyarrow.parquet as pq

    physical = {c: c for c in columns}
    out = []
    for entry in sorted((path / "_delta_log").glob("*.json")):
        if not entry.stem.isdigit():  # a checkpoint's manifest
            continue
        actions = [json.loads(line) for line in entry.read_text().splitlines() if line]
        for action in actions:
            if "metaData" in action:
                for field in json.loads(action["metaData"]["schemaString"])["fields"]:
                    if field["name"] in physical:
                        physical[field["name"]] = field["metadata"].get("delta.columnMapping.physicalName",
                                                                        field["name"])
        added: dict[str, list] = {c: [] for c in columns}
        for action in actions:
            add = action.get("add")
            if add and add.get("dataChange", True):
                read = pq.read_table(path / unquote(add["path"]), columns=[physical[c] for c in columns])
                for c in columns:
                    added[c] += read.column(physical[c]).to_pylist()
        out.append((int(entry.stem), entry.stat().st_mtime, added))
    return out


def lags(source: Path, ts: str, key: str, output: Path, started: float) -> list[float]:
    """Seconds from each window's closing commit in ``source`` to its first commit in ``output``."""
    closing: dict[tuple[str, datetime], float] = {}  # (meter, window start) -> when a row closed it
    for _version, at, rows in commits(source, (ts, key)):
        latest: dict[str, datetime] = {}
        for t, meter in zip(rows[ts], rows[key], strict=True):
            latest[meter] = max(latest.get(meter, t), t)
        for meter, t in latest.items():
            start = t.replace(tzinfo=UTC) - timedelta(seconds=WINDOW_S)
            start -= timedelta(seconds=(start - T0).total_seconds() % WINDOW_S)
            while (meter, start) not in closing and start >= T0:
                closing[(meter, start)] = at
                start -= timedelta(seconds=WINDOW_S)
    written: dict[tuple[str, datetime], float] = {}
    for _version, at, rows in commits(output, ("tag_tbname", "ts")):
        for meter, start in zip(rows["tag_tbname"], rows["ts"], strict=True):
            written.setdefault((meter, start.replace(tzinfo=UTC)), at)
    return [written[k] - closed for k, closed in closing.items() if k in written and closed >= started + WARMUP_S]


# --- one table ----------------------------------------------------------------------------------


def _lower_priority() -> None:
    os.nice(10)


def feed_own(db: str, seconds: int, meters: int) -> None:
    """The ``own`` writer (run as ``external.py --feed-own``): our INSERT once a second."""
    from airflow_stream_provider import statements
    from airflow_stream_provider.warehouse import Warehouse

    def no_spark():
        raise RuntimeError("our INSERT asked for Spark")

    wh = Warehouse(spark=no_spark)
    began = time.monotonic()
    for k in range(seconds):
        time.sleep(max(0.0, began + k - time.monotonic()))
        at = (T0 + timedelta(seconds=k)).strftime("%Y-%m-%d %H:%M:%S")
        values = " ".join(f"{db}.d{m} VALUES ('{at}', {(k * meters + m) % 50})" for m in range(meters))
        list(statements.run(wh, f"INSERT INTO {values}"))


def detector(db: str, spark):
    from airflow_stream_provider.node.host import DetectorHost
    from airflow_stream_provider.streams.fire.windows import detector_options
    from airflow_stream_provider.streams.store import StreamStore

    store = StreamStore()
    host = DetectorHost(spark, store=store)
    stored = store.get(db, "s")
    state = store.load_state(db, "s")
    return host.window_detector(stored, host.runtime(stored, state), detector_options(stored, state))


def run_table(name: str, home: Path, seconds: int, meters: int, spark) -> dict:
    from airflow_stream_provider import statements
    from airflow_stream_provider.warehouse import Warehouse

    db = name.replace("+", "_")
    wh = Warehouse(spark=spark)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"SPARK_LOCAL_IP": "127.0.0.1"}
    if name == "own":
        tables = " ".join(f"{db}.d{m} USING {db}.meters TAGS ('d{m}')" for m in range(meters))
        list(statements.run(wh, f"CREATE DATABASE {db}; CREATE STABLE {db}.meters (ts TIMESTAMP, v DOUBLE) "
                                f"TAGS (site VARCHAR(8)); CREATE TABLE {tables}"))
        source, ts, key = home / "warehouse" / db / "meters", "ts", "tbname"
        cmd = [sys.executable, __file__, "--feed-own", db, "--seconds", str(seconds), "--meters", str(meters)]
        writer = subprocess.Popen(cmd, env=os.environ | {"PYTHONPATH": str(ROOT)}, stdin=subprocess.PIPE, text=True,
                                  preexec_fn=_lower_priority)
    else:
        source, ts, key = home / "owner" / db, "event_time", "device_id"
        cmd = [sys.executable, str(ROOT / "bench" / "external_writer.py"), str(source), str(seconds), str(meters)]
        writer = subprocess.Popen(cmd + (["--features"] if name == "dv+cm" else []), env=env, text=True,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, preexec_fn=_lower_priority)
        assert writer.stdout is not None
        if writer.stdout.readline().strip() != "created":
            raise SystemExit(f"{name}: the writer did not create its table (exit {writer.wait()})")
        list(statements.run(wh, f"CREATE DATABASE {db}; CREATE STABLE {db}.meters FROM DELTA '{source}' {MAP}"))
    list(statements.run(wh, STREAM.format(db=db, w=WINDOW_S)))
    found = detector(db, spark)
    assert writer.stdin is not None
    writer.stdin.write("go\n")
    writer.stdin.flush()
    started = time.time()
    batches: list[tuple[int, float]] = []
    while True:
        report = found.run_once()
        if report is not None:
            if report.rows:
                batches.append((report.rows, report.seconds))
        elif writer.poll() is not None:
            if found.run_once() is None:
                break
        else:
            time.sleep(0.02)
    if writer.returncode:
        raise SystemExit(f"{name}: the writer failed with {writer.returncode}")
    got = lags(source, ts, key, home / "warehouse" / db / "out", started)
    rows = sum(r for r, _ in batches)
    rate = rows / sum(s for _, s in batches)
    cuts = statistics.quantiles(got, n=100, method="inclusive")
    print(f"{name}: {len(got)} windows, {rows} rows in {len(batches)} batches", file=sys.stderr, flush=True)
    return {"windows": len(got), "p50": cuts[49], "p99": cuts[98], "rate": rate, "batches": len(batches)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=60, help="commits of each writer, one a second")
    parser.add_argument("--meters", type=int, default=100)
    parser.add_argument("--feed-own", metavar="DB", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.feed_own:
        sys.stdin.readline()
        feed_own(args.feed_own, args.seconds, args.meters)
        return 0
    home = Path(tempfile.mkdtemp(prefix="airflow-stream-bench-external-"))
    os.environ["AIRFLOW_STREAM_HOME"] = str(home)
    os.environ.setdefault("AIRFLOW_STREAM_TIMEZONE", "UTC")
    os.environ["AIRFLOW_STREAM_API_URL"] = "http://127.0.0.1:9"  # no Airflow: its calls fail at once
    (home / "owner").mkdir()
    from airflow_stream_provider.spark.session import local_session

    results = {}
    try:
        for name in ("own", "attached", "dv+cm"):
            results[name] = run_table(name, home, args.seconds, args.meters, local_session)
    finally:
        from pyspark.sql import SparkSession

        active = SparkSession.getActiveSession()
        if active is not None:
            active.stop()
    own = results["own"]
    print(f"\n{args.meters} meters, a commit a second for {args.seconds} s; lag from the closing commit to the output")
    print(f"{'table':<10} {'windows':>7} {'lag p50':>8} {'lag p99':>8} {'rows/s':>9} {'p50 x':>6} {'p99 x':>6} "
          f"{'rate x':>6}")
    missed = []
    for name, r in results.items():
        ratios = (r["p50"] / own["p50"], r["p99"] / own["p99"], own["rate"] / r["rate"])
        print(f"{name:<10} {r['windows']:>7} {r['p50']:>7.3f}s {r['p99']:>7.3f}s {r['rate']:>9,.0f} "
              f"{ratios[0]:>5.2f}x {ratios[1]:>5.2f}x {ratios[2]:>5.2f}x")
        if name != "own" and max(ratios) > TARGET:
            missed.append(name)
    print(f"target: attached tables within {TARGET}x of own: " + (f"missed by {', '.join(missed)}" if missed
                                                                   else "met"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
