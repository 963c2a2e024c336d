"""Progress of long work: the figures, the CLI's bar, and a recalculation reporting its progress."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta

import pytest

from airflow_stream_provider import progress as p
from airflow_stream_provider import statements


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(p.time, "monotonic", c)
    return c


def test_rate_percent_and_eta(clock, tmp_path):
    said: list[str] = []
    work = p.Progress("load of x", 10, "rows", said.append, path=tmp_path / "progress.json", every=5)
    clock.now = 102.0
    work.advance(4)  # 4 rows in 2 s: 2 rows/s, 6 left: 3 s
    assert work.fraction == 0.4 and work.rate == 2.0 and work.eta == 3.0
    assert said == []  # not 5 s yet
    clock.now = 106.0
    work.advance(2)  # 6 in 6 s: 1 row/s, 4 left: 4 s
    assert said == ["load of x: 6 of 10 rows (60%), 1 rows/s, ETA 4 s"]
    recorded = json.loads((tmp_path / "progress.json").read_text())
    assert (recorded["done"], recorded["total"], recorded["eta_s"], recorded["finished"]) == (6, 10, 4.0, False)
    clock.now = 110.0
    work.advance(4)
    work.finish()
    assert said[-1] == "load of x: 10 of 10 rows (100%) in 10 s"
    assert json.loads((tmp_path / "progress.json").read_text())["finished"] is True


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_console_draws_a_bar_on_a_terminal_and_lines_elsewhere(clock):
    term = Terminal()
    console = p.Console(term)
    work = p.Progress("recalculation of power.s", 10, "triggers", console)
    clock.now = 101.0
    work.advance(4)
    assert term.getvalue().endswith("[" + "#" * 12 + "." * 18 + "] recalculation of power.s: 4 of 10 triggers (40%), "
                                     "4 triggers/s, ETA 2 s")  # 30 * 0.4 = 12 of 30 filled; 6 left at 4/s
    console("a message")  # clears the bar's line first
    assert term.getvalue().endswith("\r\x1b[Ka message\n")
    work.finish()
    assert term.getvalue().endswith("(100%) in 1 s\n")

    plain = io.StringIO()
    work = p.Progress("load", 2, "rows", p.Console(plain))
    work.advance(1)
    work.finish()
    assert plain.getvalue().splitlines()[-1] == "load: 2 of 2 rows (100%) in 0 s"  # the clock stood still
    assert "\r" not in plain.getvalue()


@pytest.mark.spark
def test_recalculation_reports_its_progress(spark, tmp_path, monkeypatch):
    from airflow_stream_provider.streams.recalculate import recalculate
    from airflow_stream_provider.streams.store import StreamStore
    from airflow_stream_provider.warehouse import Warehouse

    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(tmp_path))
    wh = Warehouse(tmp_path / "warehouse", spark=spark)
    start = datetime(2025, 1, 1, tzinfo=UTC)
    values = " ".join(f"('{(start + timedelta(seconds=i)).strftime('%Y-%m-%d %H:%M:%S')}', {i})" for i in range(2500))
    list(statements.run(wh, f"""
        CREATE DATABASE db; USE db;
        CREATE TABLE t (ts TIMESTAMP, v INT);
        CREATE STREAM s INTERVAL(1s) SLIDING(1s) FROM t INTO s_out AS SELECT _twstart ts, sum(v) AS total FROM %%trows;
        INSERT INTO t VALUES {values};
    """))
    class Listener:  # a say() with show(): gets every step, as the CLI's Console does
        def __init__(self) -> None:
            self.said: list[str] = []
            self.steps: list[tuple[int, int, bool]] = []

        def __call__(self, message: str) -> None:
            self.said.append(message)

        def show(self, work: p.Progress) -> None:
            self.steps.append((work.done, work.total, work.finished))
            self.said.append(work.line())

    listener = Listener()
    said = listener.said
    report = recalculate(wh, "db", "s", start, start + timedelta(seconds=2500), progress=listener)
    # one window per second, one row each; the last, [00:41:39, 00:41:40), stays open: no later row
    assert report.triggers == 2499
    assert said[-1].startswith("recalculation of db.s: 2,499 of 2,499 triggers (100%) in ")
    # more than 2,000 triggers: jobs of max(2,000, a tenth) triggers, each reported
    assert listener.steps == [(2000, 2499, False), (2499, 2499, False), (2499, 2499, True)]
    recorded = json.loads(StreamStore().get("db", "s").progress_path.read_text())
    assert (recorded["done"], recorded["total"], recorded["finished"]) == (2499, 2499, True)
    rows = list(statements.run(wh, "SELECT count(*) AS n, sum(total) AS t FROM s_out"))[-1].table.to_pylist()
    assert rows == [{"n": 2499, "t": sum(range(2499))}]
