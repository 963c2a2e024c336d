"""End-to-end check of dev/iotdb/server.py with the apache-iotdb client: start a fresh cluster,
run a few statements, print what the client returns (types included), stop, and check that no
JVM of ours is left.

    .venv/bin/python dev/iotdb/smoke.py [--isolate|--no-isolate] [WORKDIR] [LIB]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import server as iotdb_server


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def show(session, sql: str) -> None:
    print(f"\n>>> {sql}")
    if not sql.upper().startswith(("SELECT", "SHOW", "COUNT")):
        session.execute_non_query_statement(sql)
        print("(ok)")
        return
    with session.execute_query_statement(sql) as ds:
        print("columns:", ds.get_column_names())
        print("types:  ", [getattr(t, "name", t) for t in ds.get_column_types()])
        while ds.has_next():
            rec = ds.next()
            # Field objects are reused from row to row: read them now.
            fields = [(f.get_object_value(f.get_data_type()) if not f.is_null() else None) for f in rec.get_fields()]
            print(
                f"row: time={rec.get_timestamp()!r} ({type(rec.get_timestamp()).__name__})",
                [(v, type(v).__name__) for v in fields],
            )
    with session.execute_query_statement(sql) as ds:
        df = ds.todf()
    print("todf():")
    print(df.to_string())
    print("dtypes:", dict(df.dtypes.astype(str)))
    if len(df):
        print("todf() row 0 python types:", [type(v).__name__ for v in df.iloc[0].tolist()])


def main() -> int:
    args = sys.argv[1:]
    isolate = None
    if args and args[0] in ("--isolate", "--no-isolate"):
        isolate = args.pop(0) == "--isolate"
    workdir = Path(args[0]) if args else Path(tempfile.mkdtemp(prefix="iotdb-smoke-"))
    lib = Path(args[1]) if len(args) > 1 else None

    srv = iotdb_server.start(workdir, lib, isolate=isolate)
    pids = dict(srv.pids)
    print(
        f"started in {srv.startup_seconds:.1f}s at {srv.host}:{srv.port}, isolated={srv.isolated},"
        f" pids={pids}, workdir={srv.workdir}"
    )
    print("RSS after start (MB):", {n: round(rss_mb(p)) for n, p in pids.items()})
    try:
        session = srv.session()
        try:
            for sql in (
                "CREATE DATABASE root.ln",
                "INSERT INTO root.ln.wf01.wt01(time, temperature) VALUES (1, 1.5), (2, 2)",
                "SELECT temperature FROM root.ln.wf01.wt01",
                "SHOW TIMESERIES",
                "SELECT count(temperature) FROM root.ln.** GROUP BY ([0, 10), 5ms)",
                "INSERT INTO root.ln.wf02.wt01(time, s_int, s_float, s_bool, s_text) VALUES (1, 5, 1.5, true, 'x')",
                "SHOW TIMESERIES root.ln.wf02.**",
                "SELECT * FROM root.ln.wf02.wt01",
            ):
                show(session, sql)
        finally:
            session.close()
        print("\nRSS after queries (MB):", {n: round(rss_mb(p)) for n, p in pids.items()})
    finally:
        t = time.monotonic()
        srv.stop()
        print(f"stopped in {time.monotonic() - t:.1f}s")
    left = [p for p in pids.values() if os.path.exists(f"/proc/{p}")]
    java = subprocess.run(["pgrep", "-f", "org.apache.iotdb"], capture_output=True, text=True).stdout.split()
    print("left pids:", left or "none", "| IoTDB JVMs running (pgrep -f org.apache.iotdb):", java or "none")
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
