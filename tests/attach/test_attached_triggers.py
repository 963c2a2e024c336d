"""AFTER INSERT triggers over attached devices, through the CLI and a real stream node: a delta-rs
writer of the team's own (a process that imports nothing of the project) appends rows; a STATELESS
and a STATEFUL trigger fire in the node on its commits, each tablet holding the rows appended to one
device (counted by hand from the writer's steps); the rows committed while no node ran fire when
it starts, and nothing fires twice."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from airflow_stream_provider.processes import free_port
from tests.attach.test_attached_trigger_rounds import write
from tests.iotdb.test_stateful_triggers import cli, fires, node_pid
from tests.iotdb.test_triggers import FILES

pytestmark = pytest.mark.spark

T0_MS = int(datetime(2025, 3, 1, tzinfo=UTC).timestamp() * 1000)


def create(home: Path, kind: str, name: str, pattern: str):
    return cli(home, "sql", f"CREATE {kind} TRIGGER {name} AFTER INSERT ON {pattern} AS 'counters.Recorder' "
                            f"USING URI '{FILES / 'counters.py'}' WITH (\"dir\" = \"{home}\", \"name\" = \"{name}\")")


def seen(home: Path, name: str, count: int, timeout: float = 90) -> list[tuple]:
    """(device, timestamps, values, pid) of the first fires of ``name``, once there are ``count``."""
    deadline = time.monotonic() + timeout
    while len(fires(home, name)) < count and time.monotonic() < deadline:
        time.sleep(0.3)
    return [(f["device"], f["timestamps"], f["values"], f["pid"]) for f in fires(home, name)]


def at(*seconds: int) -> list[int]:
    return [T0_MS + 1000 * s for s in seconds]


def test_after_triggers_fire_in_the_node_on_the_owners_commits(tmp_path):
    home = tmp_path
    table = tmp_path / "owner" / "readings"
    write(table, {"create": {"delta.enableChangeDataFeed": "true"}}, {"append": [[0, "m1", "a", 220, 1.0]]})
    attached = cli(home, "sql", f"CREATE DEVICES root.plant FROM DELTA '{table}' MAP (TIME event_time, "
                                "DEVICE device_id, MEASUREMENTS (voltage, amps = current))")
    assert attached.returncode == 0, attached.stderr

    # no node: made, with a notice (status 3); the rows the owner commits meanwhile fire later
    early = create(home, "STATELESS", "plant_all", "root.plant.**")
    assert early.returncode == 3, early.stderr
    assert "the stream node, which is not running: start it with `airflow-stream node start`" in early.stderr
    write(table, {"append": [[5, "m2", "b", 230, 2.5], [1, "m1", "a", 219, 0.7]]})  # version 2

    started = cli(home, "node", "start", "--port", str(free_port()))
    assert started.returncode == 0, started.stderr + started.stdout
    try:
        first_node = node_pid(home)
        assert seen(home, "plant_all", 2) == [("root.plant.m1", at(1), [[219], [0.7]], first_node),
                                              ("root.plant.m2", at(5), [[230], [2.5]], first_node)]
        made = create(home, "STATEFUL", "plant_volts", "root.plant.*.voltage")
        assert made.returncode == 0, made.stderr
        write(table, {"append": [[9, "m1", "a", 221, 1.1], [7, "m1", "a", 218, 1.2]]})  # version 3
        assert seen(home, "plant_all", 3)[2:] == [("root.plant.m1", at(7, 9), [[218, 221], [1.2, 1.1]], first_node)]
        assert seen(home, "plant_volts", 1) == [("root.plant.m1", at(7, 9), [[218, 221]], first_node)]
        assert cli(home, "node", "stop", timeout=120).returncode == 0

        # committed while the node is down (versions 4 and 5): fired once it is back
        write(table, {"append": [[12, "m3", "c", 240, 4.0]]}, {"append": [[14, "m2", "b", 231, 2.0]]})
        restarted = cli(home, "node", "start", "--port", str(free_port()))
        assert restarted.returncode == 0, restarted.stderr + restarted.stdout
        second_node = node_pid(home)
        assert seen(home, "plant_all", 5)[3:] == [("root.plant.m3", at(12), [[240], [4.0]], second_node),
                                                  ("root.plant.m2", at(14), [[231], [2.0]], second_node)]
        assert seen(home, "plant_volts", 3)[1:] == [("root.plant.m3", at(12), [[240]], second_node),
                                                    ("root.plant.m2", at(14), [[231]], second_node)]
        time.sleep(2)  # a few more rounds: nothing fires twice
        # the rows appended after each CREATE, by hand: plant_all 2 + 2 + 1 + 1, plant_volts 2 + 1 + 1
        assert sum(len(f["timestamps"]) for f in fires(home, "plant_all")) == 6
        assert sum(len(f["timestamps"]) for f in fires(home, "plant_volts")) == 4
        shown = cli(home, "sql", "--format", "json", "SHOW TRIGGERS")
        assert {r["TriggerName"]: r["Fired"] for r in json.loads(shown.stdout)} == {"plant_all": 5, "plant_volts": 3}
    finally:
        cli(home, "node", "stop", timeout=120)
