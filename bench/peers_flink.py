"""The Flink side of bench/peers.py: grouped counts per window through Flink's window TVFs, over CSV files.

    .bench/flink-venv/bin/python bench/peers_flink.py --data DIR [--check DIR] [--types interval,sliding,session]
        [--modes streaming,batch] [--parallelism 2] [--repeat 3]

bench/peers.py runs this in the Flink virtual environment it makes (PyFlink pins versions that PySpark's
do not allow beside them), so it imports PyFlink and nothing of the project. It prints one JSON
document on stdout: per runtime mode and window type, the seconds of the fastest of ``--repeat`` runs
after a warm-up, or why that mode does not run that window; with ``--check``, also the number of
windows and the sum of their counts over the rows in that folder.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from pyflink.table import DataTypes, EnvironmentSettings, Schema, TableDescriptor, TableEnvironment
from pyflink.util.exceptions import JavaException
from pyflink.version import __version__

#: window table-valued functions over ``meters``, by the trigger type of bench/windows.py they match
WINDOWS = {
    "interval": "TUMBLE(TABLE meters, DESCRIPTOR(ts), INTERVAL '1' MINUTE)",
    "sliding": "HOP(TABLE meters, DESCRIPTOR(ts), INTERVAL '30' SECOND, INTERVAL '1' MINUTE)",
    "session": "SESSION(TABLE meters PARTITION BY tbname, DESCRIPTOR(ts), INTERVAL '2' SECOND)",
}
MODES = ("streaming", "batch")


def environment(mode: str, parallelism: int, data: str) -> TableEnvironment:
    """A table environment in ``mode`` with the CSV files in ``data`` as ``meters`` and a ``blackhole`` sink.

    Each file holds some groups' rows in time order, and there are as many files as readers, so each
    reader reads one file and its watermark, one second behind its newest row, drops no row.
    """
    settings = EnvironmentSettings.in_streaming_mode() if mode == "streaming" else EnvironmentSettings.in_batch_mode()
    env = TableEnvironment.create(settings)
    env.get_config().set("parallelism.default", str(parallelism))
    env.get_config().set("table.local-time-zone", "UTC")
    meters = (Schema.new_builder()
              .column("ts", DataTypes.TIMESTAMP(3))
              .column("current", DataTypes.FLOAT())
              .column("voltage", DataTypes.INT())
              .column("tbname", DataTypes.STRING())
              .watermark("ts", "ts - INTERVAL '1' SECOND")
              .build())
    env.create_temporary_table("meters", TableDescriptor.for_connector("filesystem").schema(meters)
                               .option("path", data).format("csv").build())
    counts = (Schema.new_builder()
              .column("tbname", DataTypes.STRING())
              .column("window_start", DataTypes.TIMESTAMP(3))
              .column("window_end", DataTypes.TIMESTAMP(3))
              .column("n", DataTypes.BIGINT())
              .build())
    env.create_temporary_table("blackhole", TableDescriptor.for_connector("blackhole").schema(counts).build())
    return env


#: the group window aggregation for a session, which Flink's batch planner runs where it refuses the TVF
SESSION_GROUP = ("SELECT tbname, SESSION_START(ts, INTERVAL '2' SECOND) AS window_start, "
                 "SESSION_END(ts, INTERVAL '2' SECOND) AS window_end, COUNT(*) AS n FROM meters "
                 "GROUP BY tbname, SESSION(ts, INTERVAL '2' SECOND)")


def windowed(window: str, group: bool = False) -> str:
    if group:
        return SESSION_GROUP
    return (f"SELECT tbname, window_start, window_end, COUNT(*) AS n FROM TABLE({WINDOWS[window]}) "
            "GROUP BY tbname, window_start, window_end")


def unsupported(env: TableEnvironment, window: str, group: bool = False) -> str | None:
    """Why the planner refuses the window in this mode, or None when it plans it."""
    try:
        env.explain_sql(f"INSERT INTO blackhole {windowed(window, group)}")
    except JavaException as error:
        return str(error).strip().splitlines()[0]
    return None


def form(env: TableEnvironment, window: str) -> tuple[bool | None, str | None]:
    """How this mode runs the window: (False) its TVF, (True) the group window a refused session TVF
    falls back to, or (None) not at all, with the planner's reason."""
    reason = unsupported(env, window)
    if reason is None:
        return False, None
    if window == "session" and unsupported(env, window, group=True) is None:
        return True, None
    return None, reason


def seconds(env: TableEnvironment, window: str, repeat: int, group: bool = False) -> float:
    """Wall time of the job writing every window's count to the blackhole: the fastest of ``repeat``
    runs after a warm-up, as bench/windows.py measures ours."""
    statement = f"INSERT INTO blackhole {windowed(window, group)}"

    def run() -> float:
        began = time.perf_counter()
        env.execute_sql(statement).wait()
        return time.perf_counter() - began

    run()
    return min(run() for _ in range(repeat))


def counted(env: TableEnvironment, window: str, group: bool = False) -> dict[str, int]:
    """The number of windows and the sum of their counts, collected from the job."""
    with env.sql_query(windowed(window, group)).execute().collect() as results:
        counts = [row[3] for row in results]
    return {"windows": len(counts), "rows": sum(counts)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="folder of the CSV files to time the windows over")
    parser.add_argument("--check", help="folder of small CSV files to count the windows of")
    parser.add_argument("--types", default=",".join(WINDOWS))
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    types = args.types.split(",")
    results: dict[str, dict[str, dict[str, float | int | str]]] = {}
    for mode in args.modes.split(","):
        results[mode] = {window: {} for window in types}
        if args.check:
            env = environment(mode, args.parallelism, args.check)
            for window in types:
                group, _ = form(env, window)
                if group is not None:
                    results[mode][window].update(counted(env, window, group))
        env = environment(mode, args.parallelism, args.data)
        for window in types:
            group, reason = form(env, window)
            if group is None:
                results[mode][window]["unsupported"] = reason or "refused"
                print(f"flink {mode} {window}: not supported: {reason}", file=sys.stderr)
                continue
            if group:
                results[mode][window]["form"] = "group window"
            print(f"flink {mode} {window} ...", file=sys.stderr)
            results[mode][window]["seconds"] = seconds(env, window, args.repeat, group)
            print(f"flink {mode} {window}: {results[mode][window]['seconds']:.2f} s", file=sys.stderr)
    print(json.dumps({"version": __version__, "results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
