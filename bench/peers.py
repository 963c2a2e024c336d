"""Window throughput against Apache Flink: ours, batch and streaming, Spark's native windows and Flink's window TVFs.

    .venv/bin/python bench/peers.py [--rows 2000000] [--groups 100] [--types interval,sliding,session]
        [--repeat 3] [--parallelism 2]

The same rows as bench/windows.py (``rows_table``: one row per second per group ``tbname``), the
same windows: ``interval`` tumbling 1 minute, ``sliding`` 1 minute every 30 s, ``session`` a gap of
2 s per group. Measured, each the fastest of ``--repeat`` runs after a warm-up:

- ours and Spark's, in this process on one ``local[2]`` session, by bench/windows.py's
  :func:`measure`: batch detection over the Delta table cached in memory, the streaming detector over
  its change feed writing events to a Delta table, and Spark's ``window()``/``session_window()``
  grouped counts over the cached table;
- Flink's, at ``--parallelism`` in ``batch`` and ``streaming`` runtime mode (bench/peers_flink.py):
  a count per ``tbname`` and window through the TUMBLE, HOP and SESSION (partitioned by ``tbname``)
  window TVFs, on event time with a watermark one second behind ``ts``, written to a ``blackhole``
  sink; the wall time of the job, each run a job on a local mini-cluster started for it, without
  checkpoints. Flink runs the SESSION TVF in streaming mode only: its batch planner refuses
  unaligned windows ("not supported in batch mode yet"). In batch mode the session is then tried as
  Flink's group window aggregation, ``GROUP BY tbname, SESSION(ts, INTERVAL '2' SECOND)``; when the
  planner refuses that too, the cell shows '-' with the TVF's reason.

Flink reads the rows from CSV files written once here, parsing them in every run: the apache-flink
wheel ships flink-csv but no Parquet format, which would have to be downloaded from Maven with the
Hadoop classes it needs. Before timing, Flink counts the windows of each type over a small table
and the counts must equal those computed here with numpy.

PyFlink pins versions that PySpark's do not allow beside them, so Flink runs in its own virtual
environment, ``.bench/flink-venv``, made with ``FLINK`` the first time and reused afterwards.

Targets (2 cores): ours ahead of Flink in every row, batch against batch and streaming against
streaming; our streaming >= 1,000,000 rows/s for every window type.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import venv
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

sys.path.insert(0, str(Path(__file__).resolve().parent))

from windows import Measured, local_spark, measure, rows_table

FLINK = "apache-flink==2.3.0"
VENV = Path(__file__).resolve().parent.parent / ".bench" / "flink-venv"
WORKER = Path(__file__).resolve().with_name("peers_flink.py")
#: bench/windows.py's trigger types and the windows they make
WINDOWS = {"interval": "tumbling", "sliding": "sliding", "session": "session"}
#: rows and groups of the table Flink's window counts are checked on
CHECK = (20_000, 10)
STREAMING_TARGET = 1_000_000


def flink_python() -> Path:
    """The Python of the Flink virtual environment, made and given ``FLINK`` the first time."""
    python = VENV / "bin" / "python"
    stamp = VENV / "installed"
    if stamp.exists() and stamp.read_text() == FLINK:
        return python
    print(f"making {VENV} with {FLINK} ...", file=sys.stderr)
    venv.EnvBuilder(clear=True, with_pip=True).create(VENV)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", FLINK],
                   check=True)
    stamp.write_text(FLINK)
    return python


def write_csv(table: pa.Table, folder: Path, files: int) -> None:
    """``table`` as ``files`` CSV files, each with every ``files``-th group and its rows in time order, so
    that each of Flink's readers reads one file and its watermark drops no row."""
    folder.mkdir(parents=True)
    group = pc.dictionary_encode(table["tbname"]).combine_chunks().indices.to_numpy()
    # Flink's CSV format reads TIMESTAMP(3) as 'yyyy-MM-dd HH:mm:ss.SSS', without a zone
    table = table.set_column(0, "ts", table["ts"].cast(pa.timestamp("ms")))
    for n in range(files):
        pacsv.write_csv(table.filter(pa.array(group % files == n)), folder / f"part-{n}.csv",
                        pacsv.WriteOptions(include_header=False))


def expected_windows(table: pa.Table) -> dict[str, dict[str, int]]:
    """The windows of each type over ``table`` and the sum of their counts, computed with numpy."""
    seconds = table["ts"].to_numpy().astype("datetime64[s]").astype(np.int64)
    group = pc.dictionary_encode(table["tbname"]).combine_chunks().indices.to_numpy().astype(np.int64)

    def distinct(groups: np.ndarray, starts: np.ndarray) -> int:
        return len(np.unique(np.column_stack([groups, starts]), axis=0))

    order = np.lexsort((seconds, group))
    same_group = group[order][1:] == group[order][:-1]
    session_starts = len(group) - int(np.count_nonzero(same_group & (np.diff(seconds[order]) <= 2)))
    slide = seconds // 30  # the two 1-minute windows holding a row start at this slide and the one before
    hops = np.concatenate([slide, slide - 1])
    return {
        "interval": {"windows": distinct(group, seconds // 60), "rows": len(seconds)},
        "sliding": {"windows": distinct(np.tile(group, 2), hops), "rows": 2 * len(seconds)},
        "session": {"windows": session_starts, "rows": len(seconds)},
    }


def flink(python: Path, work: Path, args: argparse.Namespace, types: list[str]) -> dict[str, Any]:
    """Flink's results from bench/peers_flink.py, after its window counts on the check table were
    compared with :func:`expected_windows`."""
    data, check = work / "flink" / "meters", work / "flink" / "check"
    print(f"writing {args.rows:,} rows in {args.groups} groups as CSV ...", file=sys.stderr)
    write_csv(rows_table(args.rows, args.groups), data, args.parallelism)
    small = rows_table(*CHECK)
    write_csv(small, check, args.parallelism)
    out = subprocess.run([str(python), str(WORKER), "--data", str(data), "--check", str(check),
                          "--types", ",".join(types), "--parallelism", str(args.parallelism),
                          "--repeat", str(args.repeat)], stdout=subprocess.PIPE, text=True, check=True).stdout
    report = json.loads(out.strip().splitlines()[-1])
    if wrong := mismatches(report, expected_windows(small)):
        raise SystemExit("\n".join(wrong))
    print(f"flink's window counts on {CHECK[0]:,} rows in {CHECK[1]} groups equal the expected ones", file=sys.stderr)
    return report


def mismatches(report: dict[str, Any], expected: dict[str, dict[str, int]]) -> list[str]:
    """Flink's window counts in ``report`` that differ from ``expected``, one line each."""
    return [f"flink {mode} {WINDOWS[name]}: {result['windows']:,} windows of {result['rows']:,} rows, expected "
            f"{expected[name]['windows']:,} of {expected[name]['rows']:,}"
            for mode, results in report["results"].items() for name, result in results.items()
            if "windows" in result and {key: result[key] for key in ("windows", "rows")} != expected[name]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--types", default=",".join(WINDOWS), help="window types: interval, sliding, session")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each measurement; the fastest counts")
    parser.add_argument("--parallelism", type=int, default=2, help="Flink's parallelism")
    args = parser.parse_args()
    types = args.types.split(",")
    if unknown := [name for name in types if name not in WINDOWS]:
        parser.error(f"unknown window types: {', '.join(unknown)}")

    work = Path(tempfile.mkdtemp(prefix="airflow-stream-bench-peers-"))
    try:
        # Flink first and alone: the two engines never share the cores
        report = flink(flink_python(), work, args, types)
        spark = local_spark(work, "bench-peers")
        ours = measure(spark, work, args.rows, args.groups, types, args.repeat)
        spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print_table(args, types, ours, report)
    return 0


def print_table(args: argparse.Namespace, types: list[str], ours: dict[str, Measured], report: dict[str, Any]) -> None:
    """The table of rows/s, the reasons Flink gave for a window it does not run, and the verdict."""
    flink_s = {mode: {name: result.get("seconds") for name, result in results.items()}
               for mode, results in report["results"].items()}

    def rate(seconds: float | None) -> str:
        return f"{args.rows / seconds:,.0f}" if seconds else "-"

    def ratio(our_s: float | None, their_s: float | None) -> str:
        return f"{their_s / our_s:.2f}x" if our_s and their_s else "-"

    print()
    print(f"{args.rows:,} rows, {args.groups} groups; ours and Spark local[2], Flink {report['version']} "
          f"parallelism {args.parallelism}; ours/Flink are ratios of rows/s")
    print(f"{'window':<10} {'ours stream':>13} {'ours batch':>13} {'Spark native':>13} {'Flink stream':>13} "
          f"{'Flink batch':>13} {'stream ours/Flink':>18} {'batch ours/Flink':>17}")
    behind = []
    for name in types:
        measured, stream_s, batch_s = ours[name], flink_s["streaming"][name], flink_s["batch"][name]
        print(f"{WINDOWS[name]:<10} {rate(measured.streaming):>13} {rate(measured.batch):>13} "
              f"{rate(measured.native):>13} {rate(stream_s):>13} {rate(batch_s):>13} "
              f"{ratio(measured.streaming, stream_s):>18} {ratio(measured.batch, batch_s):>17}")
        behind += [f"{WINDOWS[name]} {mode} behind Flink" for mode, our_s, their_s in
                   (("streaming", measured.streaming, stream_s), ("batch", measured.batch, batch_s))
                   if our_s and their_s and our_s >= their_s]
        if args.rows / measured.streaming < STREAMING_TARGET:
            behind.append(f"{WINDOWS[name]} streaming under {STREAMING_TARGET:,} rows/s")
    for mode, results in report["results"].items():
        for name, result in results.items():
            if "unsupported" in result:
                print(f"Flink {mode} {WINDOWS[name]}: {result['unsupported']}")
    print("meets the targets" if not behind else f"MISSES the targets: {'; '.join(behind)}")


if __name__ == "__main__":
    sys.exit(main())
