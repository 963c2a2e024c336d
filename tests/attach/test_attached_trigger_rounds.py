"""The stream node's follower of attached tables (:class:`AttachedTriggers`), one round at a time in
this process, over a table written by delta-rs: the tablets an AFTER INSERT trigger sees are the rows
of each commit worked by hand (inserts and the new values of a MERGE's updates; no delete, no
compaction), it fires from the version at its CREATE, never twice for a version once handled, and a
BEFORE INSERT trigger is refused at its keyword. No Spark, no node process."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.node.attached_triggers import AttachedTriggers
from airflow_stream_provider.warehouse import Warehouse
from tests.conftest import sql
from tests.iotdb.test_triggers import FILES

WRITER = Path(__file__).parent / "writers" / "delta_rs_writer.py"
ATTACH = ("CREATE DEVICES root.plant FROM DELTA '{path}' "
          "MAP (TIME event_time, DEVICE device_id, MEASUREMENTS (voltage, amps = current))")
T0_MS = int(datetime(2025, 3, 1, tzinfo=UTC).timestamp() * 1000)


def write(path: Path, *steps: dict) -> None:
    done = subprocess.run([sys.executable, str(WRITER), str(path), json.dumps(list(steps))], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def fires(home: Path, name: str) -> list[dict]:
    path = home / f"{name}.log"
    lines = path.read_text().splitlines() if path.exists() else []
    return [json.loads(line.removeprefix("fire ")) for line in lines if line.startswith("fire ")]


def trigger(name: str, event: str, pattern: str, home: Path) -> str:
    return (f"CREATE TRIGGER {name} {event} INSERT ON {pattern} AS 'counters.Recorder' "
            f"USING URI '{FILES / 'counters.py'}' WITH (\"dir\" = \"{home}\", \"name\" = \"{name}\")")


def test_rounds_fire_the_tablets_of_each_commit_once(tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(tmp_path))
    wh = Warehouse(tmp_path / "warehouse")
    table = tmp_path / "owner" / "readings"
    write(table, {"create": {"delta.enableChangeDataFeed": "true"}}, {"append": [[0, "m1", "a", 220, 1.0]]})
    sql(wh, ATTACH.format(path=table))

    with pytest.raises(StreamDefinitionError, match=r"line 1, col 22: BEFORE INSERT: .* cannot be put on "
                                                    r"root\.plant\.\*\*.*cannot be refused"):
        sql(wh, trigger("early", "BEFORE", "root.plant.**", tmp_path))
    (made,) = sql(wh, trigger("volts", "AFTER", "root.plant.*.voltage", tmp_path))
    assert any("stream node, which is not running" in n for n in made.notices)

    # written after the CREATE: version 2 two devices, version 3 a MERGE updating m1 at 0 s and adding
    # m2 at 7 s, version 4 a delete (fires nothing)
    write(table, {"append": [[5, "m2", "b", 230, 2.5], [3, "m1", "a", 221, 0.5], [1, "m1", "a", 219, 0.7]]},
          {"merge": [[0, "m1", "a", 225, 9.0], [7, "m2", "b", 231, 3.0]]},
          {"delete": "device_id = 'm2'"})
    follower = AttachedTriggers(stateful=None)  # type: ignore[arg-type]  (stateless triggers only)
    assert follower.round() == 3
    got = [(f["device"], f["schemas"], f["timestamps"], f["values"]) for f in fires(tmp_path, "volts")]
    assert got == [
        ("root.plant.m1", [["voltage", "INT32"]], [T0_MS + 1000, T0_MS + 3000], [[219, 221]]),
        ("root.plant.m2", [["voltage", "INT32"]], [T0_MS + 5000], [[230]]),
        ("root.plant.m1", [["voltage", "INT32"]], [T0_MS], [[225]]),
        ("root.plant.m2", [["voltage", "INT32"]], [T0_MS + 7000], [[231]])]
    assert follower.round() == 0  # nothing new: nothing fired again
    assert len(fires(tmp_path, "volts")) == 4
    # a follower made again (a node restart) goes on from the version handled
    # (a device value that is no path node belongs to no device: its row fires nothing, the rest do)
    write(table, {"append": [[9, "m3", "c", 240, 4.0], [9, "bad.node", "c", 1, 1.0]]})
    assert AttachedTriggers(stateful=None).round() == 1  # type: ignore[arg-type]
    assert [(f["device"], f["values"]) for f in fires(tmp_path, "volts")][4:] == [("root.plant.m3", [[240]])]
    (shown,) = sql(wh, "SHOW TRIGGERS")
    assert shown.table.to_pylist()[0]["Fired"] == 5
