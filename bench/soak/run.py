"""The soak's run: start everything, feed and inject the faults, wait for the catch-up, check."""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from airflow_stream_provider.processes import free_port
from bench.soak.checks import Findings, check, foreign_table, stream_status
from bench.soak.cluster import Cluster, Receiver
from bench.soak.faults import Fault, Injector, plan_faults
from bench.soak.feed import Feed, ForeignWriter
from bench.soak.rest import RestClients
from bench.soak.spec import (
    COMPONENTS,
    DB,
    FOREIGN,
    FOREIGN_DEVICES,
    FOREIGN_MAP,
    FOREIGN_SILENT,
    REST_SUBTABLES,
    STREAMS,
    SUBTABLES,
    say,
)
from bench.soak.verified import Verified, verify_all

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass
class Report:
    seed: int
    seconds: float
    faults: list[Fault]
    rows: Counter
    #: what the foreign writer wrote to the attached table
    foreign: Counter
    findings: Findings
    caught_up: bool  # everything matched the oracle within the time allowed after the feed
    catch_up: float  # seconds from the feed's end until it did (or until the time ran out)
    wall: float
    #: what the REST clients wrote through ``airflow-stream serve``, and the requests that failed
    rest: Counter
    rest_errors: list[str]
    #: VERIFY STREAM of every stream at the end (None: not run, the oracle's checks having failed)
    verified: Verified | None

    @property
    def ok(self) -> bool:
        return (self.caught_up and self.findings.ok and not any(f.error for f in self.faults)
                and not self.rest_errors and self.verified is not None and self.verified.ok)

    def table(self) -> str:
        f = self.findings
        killed = Counter(fault.component for fault in self.faults if fault.done)
        missed = Counter(fault.component for fault in self.faults if not fault.done)
        lines = [f"soak of {self.seconds / 60:.1f} min, seed {self.seed}, {self.wall:.0f} s wall time",
                 f"{'component':<12} {'killed':>7} {'missed':>7}"]
        lines += [f"{c:<12} {killed[c]:>7} {missed[c]:>7}" for c in COMPONENTS]
        lines += [f"{'rows':<28} {'count':>8}"]
        lines += [f"{k:<28} {self.rows[k]:>8,}" for k in ("inserts", "late", "updates", "deletes", "statements")]
        lines += [f"{'foreign ' + k:<28} {self.foreign[k]:>8,}" for k in ("inserts", "late", "updates", "deletes",
                                                                         "commits")]
        lines += [f"{k:<28} {self.rest[k]:>8,}" for k in ("rest requests", "rest inserts", "rest updates")]
        lines += [f"{'REST requests failed':<28} {len(self.rest_errors):>8,}"]
        lines += [f"{k:<28} {v:>8,}" for k, v in (
            ("windows checked", f.windows), ("of which attached", f.foreign),
            ("notifications checked", f.notifications),
            ("PERIOD instants checked", f.instants), ("invalidated results", f.invalidated),
            ("messages resent (dropped)", f.resent), ("lost", f.lost), ("duplicated", f.duplicated),
            ("stale, not invalidated", f.stale), ("notifications pending", f.pending),
            ("unreadable messages", f.unreadable), ("failed streams", len(f.failed)))]
        lines.append(f"matched the oracle {self.catch_up:.0f} s after the feed stopped" if self.caught_up
                     else f"did NOT match the oracle within {self.catch_up:.0f} s after the feed stopped")
        v = self.verified
        if v is None:
            lines.append("VERIFY not run: the oracle's checks failed")
        else:
            lines += [f"{k:<28} {n:>8,}" for k, n in (
                ("streams verified", v.streams), ("triggers recomputed", v.triggers),
                ("output rows compared", v.rows), ("invalidated rows kept", v.kept),
                ("VERIFY differences", len(v.problems)))]
            lines.append(f"VERIFY of every stream took {v.seconds:.0f} s")
        lines += self.rest_errors[:10]
        lines += v.problems[:40] if v is not None else []
        lines += [f"fault on {fault.component} at {fault.at:.0f} s: {fault.error}"
                  for fault in self.faults if fault.error]
        lines += [f"failed: {name}" for name in f.failed]
        lines += f.problems[:40]
        return "\n".join(lines)


def run_soak(home: Path, seconds: float, seed: int, spark: SparkSession, *, tick: float = 1.5,
             settle: float = 300.0) -> Report:
    """The soak in ``home`` (the process's ``AIRFLOW_STREAM_HOME``): ``seconds`` of feed and faults
    (a tick every ``tick`` seconds, and at least two thirds of ``seconds / tick`` ticks), then up to
    ``settle`` seconds for the streams to catch up, then the checks."""
    from airflow_stream_provider import statements
    from airflow_stream_provider.airflow_api import AirflowApiError
    from airflow_stream_provider.local_airflow import LocalAirflow
    from airflow_stream_provider.warehouse import Warehouse

    began = time.monotonic()
    say(f"seed {seed}; home {home}")
    rng = random.Random(seed)
    wh = Warehouse(home / "warehouse", spark=spark)
    receiver = Receiver(home / "received.jsonl")
    airflow = LocalAirflow(home / "airflow", home)
    # a supervisor's Airflow notices a dead scheduler or triggerer in seconds, not Airflow's default
    # half a minute, and resets the tasks a dead scheduler had queued within 15 s, not 5 minutes
    airflow.env |= {"AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_THRESHOLD": "10",
                    "AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL": "15",
                    "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "10",
                    "AIRFLOW__SCHEDULER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "10"}
    cluster = Cluster(home, airflow, receiver, free_port(), random.Random(rng.random()))
    feed = Feed(rng)
    faults = plan_faults(rng, seconds)
    # the attached table's rows, from a generator of their own, so a seed replays the same feed of ours
    foreign = Feed(random.Random(f"{seed} foreign"), FOREIGN_DEVICES, FOREIGN_DEVICES, FOREIGN_SILENT)
    injector = None
    writer = None
    rest = RestClients(home, random.Random(f"{seed} rest"), lambda: feed.tick)
    try:
        receiver.start()
        foreign_table(home).parent.mkdir(parents=True, exist_ok=True)
        writer = ForeignWriter(foreign_table(home), home / "owner" / "writer.log")
        tables = f"CREATE DATABASE {DB}; CREATE STABLE {DB}.m (ts TIMESTAMP, v DOUBLE, st INT) TAGS (loc VARCHAR(8));"
        tables += "".join(f"CREATE TABLE {DB}.{s} USING {DB}.m TAGS ('{s}');" for s in (*SUBTABLES, *REST_SUBTABLES))
        tables += f"CREATE STABLE {DB}.{FOREIGN} FROM DELTA '{foreign_table(home)}' {FOREIGN_MAP};"
        list(statements.run(wh, tables))
        for spec in STREAMS:
            list(statements.run(wh, spec.sql(receiver.url)))
        os.environ["AIRFLOW_STREAM_API_URL"] = airflow.url
        cluster.start_node()
        airflow.start()
        dags = {f"stream__{DB}__{spec.name}" for spec in STREAMS}

        def registered() -> bool:
            try:
                known = {d["dag_id"] for d in airflow.api("/api/v2/dags?limit=100")["dags"] if not d["is_paused"]}
            except AirflowApiError:
                return False
            return dags <= known

        from airflow_stream_provider.processes import wait_for

        wait_for(registered, 180, "the streams' DAGs", every=2)
        say(f"node and Airflow up after {time.monotonic() - began:.0f} s; feeding for {seconds:.0f} s, "
            f"{len(faults)} faults planned")
        started = time.monotonic()
        injector = Injector(cluster, faults, started)
        injector.start()
        rest.start()
        # a busy machine writes a tick's statements slower than one per ``tick``: the feed goes on
        # past ``seconds`` until two thirds of its ticks are written, so the checks see as many
        # windows, late rows, updates and deletes on any machine
        least = int(seconds / tick * 2 / 3)
        while time.monotonic() < started + seconds or feed.tick < least:
            due = started + feed.tick * tick
            time.sleep(max(0.0, due - time.monotonic()))
            for text in feed.statements():
                list(statements.run(wh, text))
                feed.counts["statements"] += 1
            steps = foreign.steps()
            writer.write(steps)
            foreign.counts["commits"] += len(steps)
        writer.stop()
        rest.stop()
        say(f"feed stopped after {feed.tick} ticks: {dict(feed.counts)}; the foreign writer's: {dict(foreign.counts)}")
        fed = time.monotonic()
        injector.finish(300)
        cluster.ensure_running()
        settle_until = time.monotonic() + settle
        findings = Findings()
        while True:
            findings = check(home, receiver, stream_status(wh))
            if findings.ok or time.monotonic() > settle_until:
                break
            say(f"catching up: {findings.lost} lost, {findings.stale} stale, {findings.pending} pending so far")
            time.sleep(10)
        caught = time.monotonic() - fed
        verified = None
        while findings.ok:
            # a stream whose DAG computes, notifies, then records its run has written outputs that its
            # recorded progress names only once the run's last task is done: VERIFY judges the table
            # versions the progress names, so it is asked again until those runs are recorded
            verified = verify_all(wh, findings.invalidated_keys, verifiable)
            if not verified.problems or time.monotonic() > settle_until:
                break
            say(f"VERIFY: {len(verified.problems)} difference(s) while runs may still be recording; again in 10 s")
            time.sleep(10)
        return Report(seed, seconds, faults, feed.counts, foreign.counts, findings, findings.ok,
                      caught, time.monotonic() - began, rest.counts, rest.errors, verified)
    finally:
        if injector is not None:
            injector.finish(60)
        if writer is not None:
            writer.stop()
        rest.stop()
        cluster.stop()


def verifiable(spec) -> bool:
    """Whether the soak's VERIFY judges ``spec``: not the notify-only stream (it writes no output),
    nor the PERIOD one (which of its instants ran depends on when the scheduler was up, and VERIFY
    computes every instant up to the last fired; the checks above judge the instants that ran)."""
    return spec.kind not in ("notify", "period")


def main() -> int:
    import bench.soak

    parser = argparse.ArgumentParser(description=bench.soak.__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0, help="how long rows are fed and faults injected")
    parser.add_argument("--seed", type=int, default=None, help="the fault and feed generator's seed (default: random)")
    parser.add_argument("--settle", type=float, default=600.0, help="seconds allowed to catch up after the feed")
    parser.add_argument("--home", type=Path, default=None, help="the folder to run in (default: a new temporary one)")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    home = (args.home or Path(tempfile.mkdtemp(prefix="airflow-stream-soak-"))).resolve()
    home.mkdir(parents=True, exist_ok=True)
    os.environ["AIRFLOW_STREAM_HOME"] = str(home)
    os.environ.setdefault("AIRFLOW_STREAM_TIMEZONE", "UTC")
    os.environ["AIRFLOW_STREAM_API_URL"] = "http://127.0.0.1:9"  # no Airflow until run_soak starts its own
    os.environ["TZ"] = "UTC"
    time.tzset()
    print(f"seed {seed}", flush=True)
    from airflow_stream_provider.spark.session import local_session

    spark = local_session("airflow-stream-soak")
    try:
        report = run_soak(home, args.minutes * 60, seed, spark, settle=args.settle)
    finally:
        spark.stop()
    print(report.table())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
