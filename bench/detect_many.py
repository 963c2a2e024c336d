"""The CPU of the node's live batches for many LOW_LATENCY_CALC streams on one table, without Airflow.

    .venv/bin/python bench/detect_many.py [--streams 1,20] [--commits 30] [--meters 100] [--every N]

The streams of ``bench/load.py`` (its window streams, without the PERIOD one) are created over a
supertable of ``--meters`` meters. Then ``--commits`` commits of one row per meter are written,
and after each one every stream's detector runs its batch in this process, one stream after the
other: detection, the computation, the output's MERGE, the events and the checkpoint, as a node
worker runs them. Printed: the CPU seconds of those batches per commit (the first 5 commits
excluded), per stream batch, and against one stream alone, measured the same way in the same
process. It measures what the node's workers cost per commit, free of the scheduling and the
contention of a live run (``bench/load.py`` measures those).
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

WARMUP = 5


def replay(db: str, count: int, commits: int, meters: int, every: int = 0) -> float:
    """CPU seconds of the streams' batches per commit, over the commits after the first WARMUP (and
    with ``every``, printed for each ``every`` commits)."""
    from load import row_values, streams_sql  # bench/load.py

    from airflow_stream_provider import statements
    from airflow_stream_provider.node.host import DetectorHost
    from airflow_stream_provider.node.logs import LOGGER
    from airflow_stream_provider.spark.session import spark_session
    from airflow_stream_provider.streams.fire.windows import detector_options
    from airflow_stream_provider.streams.store import StreamStore
    from airflow_stream_provider.warehouse import Warehouse

    wh = Warehouse(spark=spark_session())
    tags = " ".join(f"{db}.d{m} USING {db}.meters TAGS ({m})" for m in range(meters))
    list(statements.run(wh, f"CREATE DATABASE {db} PRECISION 'ms'; CREATE STABLE {db}.meters (ts TIMESTAMP, v INT, "
                            f"mode INT, phase INT) TAGS (meter INT); CREATE TABLE {tags}"))
    window_streams = [s for s in streams_sql(db, count, "STREAM_OPTIONS(LOW_LATENCY_CALC)") if " PERIOD(" not in s]
    list(statements.run(wh, "; ".join(window_streams)))

    def no_spark():
        raise RuntimeError("a live batch of these streams asked for Spark")

    store = StreamStore()
    logging.getLogger(LOGGER).setLevel(logging.CRITICAL)  # the host's messages are not the measure
    host = DetectorHost(no_spark, store=store)
    detectors = []
    for i in range(len(window_streams)):  # as the node's workers make them, run here one after the other
        stored = store.get(db, f"s{i}")
        state = store.load_state(db, f"s{i}")
        detectors.append(host.window_detector(stored, host.runtime(stored, state), detector_options(stored, state)))
    first = int(time.time()) - commits
    cpu = block = 0.0
    for c in range(commits):
        values = " ".join(f"{db}.d{m} VALUES {row_values(m, first + c)}" for m in range(meters))
        list(statements.run(wh, f"INSERT INTO {values}"))
        began = time.process_time()
        for found in detectors:
            found.run_available()
        spent = time.process_time() - began
        if c >= WARMUP:
            cpu += spent
        block += spent
        if every and (c + 1) % every == 0:  # whether the cost grows with the tables' history
            print(f"commits {c + 2 - every}-{c + 1}: {block / every:.3f} CPU s per commit", file=sys.stderr, flush=True)
            block = 0.0
    return cpu / (commits - WARMUP)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", default="1,20",
                        help="the numbers of streams as bench/load.py counts them (its PERIOD stream is left out); "
                             "the first is the baseline")
    parser.add_argument("--commits", type=int, default=30)
    parser.add_argument("--meters", type=int, default=100)
    parser.add_argument("--every", type=int, default=0,
                        help="also print the CPU per commit of each this many commits (a cost growing with "
                             "the tables' history shows there)")
    parser.add_argument("--keep", action="store_true", help="keep the run's folder (tables, stream state) "
                        "instead of removing it at the end")
    args = parser.parse_args()
    if args.commits <= WARMUP:
        parser.error(f"--commits must be more than {WARMUP}")
    home = Path(tempfile.mkdtemp(prefix="airflow-stream-bench-detect-"))
    os.environ["AIRFLOW_STREAM_HOME"] = str(home)
    os.environ["AIRFLOW_STREAM_API_URL"] = "http://127.0.0.1:9"  # no Airflow: its calls fail at once
    sys.path.insert(0, str(Path(__file__).parent))
    from load import stream_kinds

    counts = [int(n) for n in args.streams.split(",")]
    rows = []
    try:
        for count in counts:
            per_commit = replay(f"m{count}", count, args.commits, args.meters, args.every)
            streams = sum(kind is not None for kind in stream_kinds(count))
            rows.append((streams, per_commit, per_commit / streams))
            print(f"{streams} stream(s): {per_commit:.3f} CPU s per commit", file=sys.stderr)
    finally:
        if args.keep:
            print(f"kept: {home}", file=sys.stderr)
        else:
            shutil.rmtree(home, ignore_errors=True)
    base = rows[0][2]
    print(f"\n{args.meters} meters, {args.commits - WARMUP} commits measured; CPU of the live batches in one process")
    print(f"{'streams':>7}  {'s/commit':>8}  {'ms/stream batch':>15}  {'vs ' + str(rows[0][0]):>6}")
    for streams, per_commit, per_stream in rows:
        print(f"{streams:>7}  {per_commit:>8.3f}  {per_stream * 1000:>15.1f}  {per_stream / base:>5.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
