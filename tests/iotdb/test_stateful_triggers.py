"""STATEFUL triggers: one instance, in the stream node, that every writing process calls; restored
after a node restart; a fire that cannot reach it fails under its strategy. IoTDBTriggerExecutionIT's
testFireTimesOfStatefulTrigger and the stateful half of IoTDBTriggerManagementIT, through the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_stream_provider.processes import free_port
from tests.iotdb.test_triggers import FILES, four_inserts_per_row

pytestmark = pytest.mark.spark

SCRIPT = Path(sys.executable).with_name("airflow-stream")
NAMES = ("stateful_before_all", "stateful_before_a", "stateful_after_all", "stateful_after_a")


def cli(home: Path, *args: str, timeout: int = 240) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout,
                          env=os.environ | {"AIRFLOW_STREAM_HOME": str(home)})


def lines(home: Path, name: str) -> list[str]:
    path = home / f"{name}.log"
    return path.read_text().splitlines() if path.exists() else []


def fires(home: Path, name: str) -> list[dict]:
    return [json.loads(line.removeprefix("fire ")) for line in lines(home, name) if line.startswith("fire ")]


def node_pid(home: Path) -> int:
    return json.loads((home / "node" / "node.json").read_text())["pid"]


def create(home: Path, name: str, event: str, pattern: str) -> subprocess.CompletedProcess:
    return cli(home, "sql", f"CREATE STATEFUL TRIGGER {name} {event} INSERT ON {pattern} AS 'counters.Recorder' "
                            f"USING URI '{FILES / 'counters.py'}' WITH (\"dir\" = \"{home}\", \"name\" = \"{name}\")")


def test_stateful_triggers_live_in_the_node_and_come_back_after_a_restart(tmp_path):
    home = tmp_path
    setup = cli(home, "sql", "CREATE DATABASE root.test;" + ";".join(
        f"CREATE TIMESERIES root.test.stateful.{m} WITH DATATYPE=INT32, ENCODING=PLAIN" for m in "abc"))
    assert setup.returncode == 0, setup.stderr

    # without a node there is nowhere to keep the instance: refused, nothing registered
    refused = create(home, "early", "AFTER", "root.test.stateful.*")
    assert refused.returncode == 2
    assert "a STATEFUL trigger lives in the stream node" in refused.stderr
    assert "airflow-stream node start" in refused.stderr
    assert lines(home, "early") == []

    started = cli(home, "node", "start", "--port", str(free_port()))
    assert started.returncode == 0, started.stderr + started.stdout
    try:
        for name in NAMES:
            event = "BEFORE" if "before" in name else "AFTER"
            made = create(home, name, event, "root.test.stateful." + ("*" if name.endswith("all") else "a"))
            assert made.returncode == 0, made.stderr
        first_node = node_pid(home)
        assert [line.split(" ")[0] for line in lines(home, "stateful_after_a")] == ["validate", "on_create"]

        # testFireTimesOfStatefulTrigger: the same counts as stateless, from one instance in the node
        inserted = cli(home, "sql", four_inserts_per_row("root.test.stateful"))
        assert inserted.returncode == 0, inserted.stderr
        assert {n: sum(f["rows"] for f in fires(home, n)) for n in NAMES} == {
            "stateful_before_all": 40, "stateful_before_a": 20, "stateful_after_all": 40, "stateful_after_a": 20}
        assert {f["pid"] for n in NAMES for f in fires(home, n)} == {first_node}

        shown = cli(home, "sql", "--format", "json", "SHOW TRIGGERS")
        assert shown.returncode == 0, shown.stderr
        rows = {r["TriggerName"]: r for r in json.loads(shown.stdout)}
        assert {n: (r["Type"], r["State"], r["NodeId"], r["Fired"]) for n, r in rows.items()} == {
            "stateful_before_all": ("STATEFUL", "ACTIVE", "node", 40),
            "stateful_before_a": ("STATEFUL", "ACTIVE", "node", 20),
            "stateful_after_all": ("STATEFUL", "ACTIVE", "node", 40),
            "stateful_after_a": ("STATEFUL", "ACTIVE", "node", 20)}

        # a restart re-creates each stateful instance: validate, on_create, then restore
        assert cli(home, "node", "stop", timeout=120).returncode == 0
        restarted = cli(home, "node", "start", "--port", str(free_port()))
        assert restarted.returncode == 0, restarted.stderr + restarted.stdout
        assert [line.split(" ")[0] for line in lines(home, "stateful_after_a")][-3:] == [
            "validate", "on_create", "restore"]
        again = cli(home, "sql", "INSERT INTO root.test.stateful(time, a) VALUES (100, 1)")
        assert again.returncode == 0, again.stderr
        assert fires(home, "stateful_after_a")[-1]["pid"] == node_pid(home) != first_node

        # DROP runs on_drop in the node, once
        dropped = cli(home, "sql", "DROP TRIGGER stateful_before_a")
        assert dropped.returncode == 0, dropped.stderr
        assert lines(home, "stateful_before_a")[-1] == "on_drop"
    finally:
        cli(home, "node", "stop", timeout=120)

    # the node is down: a stateful fire fails under its strategy (OPTIMISTIC: written, status 3)
    down = cli(home, "sql", "INSERT INTO root.test.stateful(time, b) VALUES (200, 2)")
    assert down.returncode == 3, down.stderr
    assert "trigger stateful_after_all failed on root.test.stateful: stateful trigger not reachable: the stream " \
           "node is not running" in down.stderr
    counted = cli(home, "sql", "--format", "json", "SELECT count(b) FROM root.test.stateful")
    assert json.loads(counted.stdout) == [{"count(root.test.stateful.b)": 11}]  # times 0 to 9, and 200
