"""Writers that are not ours: a separate Spark batch job and a separate delta-rs process append, MERGE
(rows of windows already closed) and DELETE rows of an attached table, and a separate Spark
Structured Streaming query appends to one every second while the stream runs. Each writer is its own
process that imports nothing of this project (``tests/attach/writers``). The stream's outputs must
equal the windows pandas computes from the table's final rows."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
import pytest
from deltalake import DeltaTable

from airflow_stream_provider.streams.run import run as run_stream
from airflow_stream_provider.streams.run_request import RunRequest
from tests.attach.oracle import closed_windows
from tests.conftest import sql

pytestmark = pytest.mark.spark

WRITERS = Path(__file__).with_name("writers")
MAP = "MAP (TIMESTAMP event_time, TBNAME device_id, TAGS (location = site), COLUMNS (voltage, current))"
STREAM = """CREATE STREAM power.s1 INTERVAL(10s) SLIDING(10s) FROM power.meters PARTITION BY tbname
            STREAM_OPTIONS(FILL_HISTORY | DELETE_RECALC) INTO power.out AS
            SELECT _twstart, avg(voltage) AS v, sum(current) AS c, count(*) AS n FROM %%tbname
            WHERE _c0 >= _twstart AND _c0 < _twend"""

FIRST = [[1, "d1", "north", 220, 1.5], [4, "d1", "north", 224, 2.5], [12, "d1", "north", 230, 1.0],
         [3, "d2", "south", 110, 0.5], [15, "d2", "south", 120, 0.25], [27, "d2", "south", 100, 1.0]]
LATER = [[21, "d1", "north", 210, 3.0], [33, "d1", "north", 200, 1.0], [41, "d2", "south", 90, 2.0]]
#: an update of d1's row at 4 s (window [0, 10), closed) and a new row in it, and a new device
MERGED = [[4, "d1", "north", 300, 4.0], [7, "d1", "north", 100, 1.0], [2, "d3", "east", 50, 5.0],
          [16, "d3", "east", 70, 1.0]]


def outputs(wh) -> dict:
    rows = sql(wh, "SELECT tag_tbname, _twstart, v, c, n FROM power.out")[-1].table.to_pylist()
    return {(r["tag_tbname"], pd.Timestamp(r["_twstart"])): (r["v"], r["c"], r["n"]) for r in rows}


def expected(path: Path) -> dict:
    return closed_windows(DeltaTable(str(path)).to_pandas())


def writer_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AIRFLOW_STREAM_HOME")}
    env.update(SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
    return env


def write(script: str, path: Path, steps: list[dict], cwd: Path) -> None:
    """Run the writer ``script`` as a process of its own, with none of this project on its path."""
    done = subprocess.run([sys.executable, str(WRITERS / script), str(path), json.dumps(steps)], cwd=cwd,
                          env=writer_env(), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]


@contextlib.contextmanager
def job(script: str, path: Path, cwd: Path) -> Iterator[Callable[[list[dict]], None]]:
    """The writer ``script`` as a job that stays up between its runs (one JVM for a Spark job): each
    call sends it a list of steps and waits until it has committed them."""
    log = cwd / f"{Path(script).stem}.log"  # a file, not a pipe: Spark's log would fill a pipe nobody reads
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, str(WRITERS / script), str(path)], cwd=cwd, env=writer_env(),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True)
    assert proc.stdin is not None and proc.stdout is not None

    def send(steps: list[dict]) -> None:
        proc.stdin.write(json.dumps(steps) + "\n")
        proc.stdin.flush()
        answer = proc.stdout.readline().strip()
        assert answer == "done", log.read_text()[-3000:]

    try:
        yield send
        proc.stdin.close()
        assert proc.wait(300) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


def follow(wh, path: Path, writer: str, first: list[dict], changes: list[dict], cwd: Path) -> None:
    if writer == "spark_job.py":
        with job(writer, path, cwd) as send:
            _follow(wh, path, send, first, changes)
    else:
        _follow(wh, path, lambda steps: write(writer, path, steps, cwd), first, changes)


def _follow(wh, path: Path, send: Callable[[list[dict]], None], first: list[dict], changes: list[dict]) -> None:
    send(first)
    sql(wh, f"CREATE DATABASE power; CREATE STABLE power.meters FROM DELTA '{path}' {MAP}")
    sql(wh, STREAM)
    run_stream(wh, "power", "s1", RunRequest.everything())
    assert outputs(wh) == expected(path) and len(outputs(wh)) == 3
    send(changes)
    run_stream(wh, "power", "s1", RunRequest.everything())
    final = expected(path)
    # the update and the new row of d1's closed window [0, 10) were recalculated; d2's deleted row
    # at 15 s left its window [10, 20) empty
    assert final[("d1", pd.Timestamp("2025-03-01 00:00:00", tz="UTC"))] == (pytest.approx(620 / 3), 6.5, 3)
    assert final[("d2", pd.Timestamp("2025-03-01 00:00:10", tz="UTC"))] == (None, None, 0)
    assert outputs(wh) == final


def test_a_spark_batch_job_appends_merges_and_deletes(wh, tmp_path):
    path = tmp_path / "owner" / "readings"
    changes = [{"append": LATER}, {"merge": MERGED}, {"delete": "device_id = 'd2' AND voltage = 120"}]
    follow(wh, path, "spark_job.py", [{"create": True}, {"append": FIRST}], changes, tmp_path)


def test_a_delta_rs_writer_appends_merges_and_deletes(wh, tmp_path):
    path = tmp_path / "owner" / "readings"
    changes = [{"append": LATER}, {"merge": MERGED}, {"delete": "device_id = 'd2' AND voltage = 120"}]
    follow(wh, path, "delta_rs_writer.py", [{"create": {"delta.enableChangeDataFeed": "true"}}, {"append": FIRST}],
           changes, tmp_path)


def test_a_structured_streaming_query_appending_every_second(wh, tmp_path):
    """The bronze pattern: the team's streaming query commits once a second while the stream runs
    round after round; every window its rows close is written once, as the table's final rows say."""
    path = tmp_path / "owner" / "readings"
    writer = subprocess.Popen([sys.executable, str(WRITERS / "streaming_job.py"), str(path), "10"], cwd=tmp_path,
                              env=writer_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "started", writer.stderr.read()
        sql(wh, f"CREATE DATABASE power; CREATE STABLE power.meters FROM DELTA '{path}' {MAP}")
        sql(wh, STREAM)
        rounds = []
        while writer.poll() is None:  # the stream goes on while the writer commits
            rounds.append(run_stream(wh, "power", "s1", RunRequest.everything()).written)
            time.sleep(1)
        assert writer.wait(120) == 0, writer.stderr.read()[-3000:] if writer.stderr else ""
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait(30)
    run_stream(wh, "power", "s1", RunRequest.everything())
    commits = len(list((path / "_delta_log").glob("*.json")))
    final = expected(path)
    assert commits >= 11 and len(rounds) >= 2 and sum(rounds) > 0, (commits, rounds)
    assert len(final) >= 6  # three devices, a row every 3 s each: 10 s windows closed by later rows
    got = outputs(wh)
    assert set(got) == set(final)  # every closed window once, no other
    for key, (voltage, current, n) in final.items():  # sums in another order: equal to rounding
        want = (None, None, 0) if n == 0 else (pytest.approx(voltage), pytest.approx(current), n)
        assert got[key] == want, key
