"""Concurrent writers on one supertable lose nothing and duplicate nothing.

Four processes write at once into `power.meters`: two insert 150 single rows each, two insert 6
batches of 1,000 rows each, into the same subtables (created by whichever writer comes first).
Every row's value is a function of its key, so the final table is known exactly.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder

from airflow_stream_provider import statements
from airflow_stream_provider.warehouse import Warehouse

SINGLE_ROWS = 150
BATCHES = 6
BATCH_ROWS = 1000
BASE_MS = 1_735_689_600_000  # 2025-01-01T00:00:00Z

WRITER = textwrap.dedent(f"""
    import sys
    from airflow_stream_provider import statements
    from airflow_stream_provider.warehouse import Warehouse

    kind, writer = sys.argv[1], int(sys.argv[2])
    warehouse = Warehouse(database="power")
    head = f"INSERT INTO s{{writer}} USING meters TAGS ('site{{writer}}', {{writer}}) VALUES "
    if kind == "single":
        for i in range({SINGLE_ROWS}):
            list(statements.run(warehouse, head + f"({{{BASE_MS} + i}}, {{i}})"))
    else:
        for b in range({BATCHES}):
            first = 1_000_000 + b * {BATCH_ROWS}
            values = " ".join(f"({{{BASE_MS} + i}}, {{i}})" for i in range(first, first + {BATCH_ROWS}))
            list(statements.run(warehouse, head + values))
""")


def test_two_single_row_writers_and_two_batch_writers_lose_nothing(tmp_path):
    home = tmp_path / "home"
    env = os.environ | {"AIRFLOW_STREAM_HOME": str(home)}
    warehouse = Warehouse(home / "warehouse")
    list(statements.run(warehouse, "CREATE DATABASE power; CREATE STABLE power.meters (ts TIMESTAMP, v BIGINT) "
                       "TAGS (site VARCHAR(16), writer INT)"))
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    writers = [
        subprocess.Popen([sys.executable, str(script), kind, str(w)], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        for kind in ("single", "batch") for w in (1, 2)
    ]
    outputs = [p.communicate(timeout=1200) for p in writers]
    for process, (_out, err) in zip(writers, outputs, strict=True):
        assert process.returncode == 0, err[-3000:]

    table = DeltaTable(str(home / "warehouse" / "power" / "meters"))
    got = pa.table(QueryBuilder().register("m", table).execute(
        "SELECT tbname, site, writer, CAST(ts AS BIGINT) AS ts_us, v FROM m").read_all())
    rows = got.to_pylist()
    expected_count = 2 * SINGLE_ROWS + 2 * BATCHES * BATCH_ROWS
    assert len(rows) == expected_count
    keys = {(r["tbname"], r["ts_us"]) for r in rows}
    assert len(keys) == expected_count, "a key was written twice"
    expected_values = set(range(SINGLE_ROWS)) | set(range(1_000_000, 1_000_000 + BATCHES * BATCH_ROWS))
    for w in (1, 2):
        mine = [r for r in rows if r["tbname"] == f"s{w}"]
        assert {r["v"] for r in mine} == expected_values
        assert all(r["ts_us"] == (BASE_MS + r["v"]) * 1000 for r in mine)
        assert {(r["site"], r["writer"]) for r in mine} == {(f"site{w}", w)}
