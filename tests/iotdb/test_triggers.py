"""IoTDB triggers (reference 004): user classes fired on inserts, re-expressed from IoTDB's
IoTDBTriggerExecutionIT and IoTDBTriggerManagementIT with real Delta tables and Spark.

The trigger classes are in ``trigger_files/counters.py`` (loaded with USING URI, as IoTDB's tests
load TriggerFireTimesCounter.jar); each records its lifecycle and every tablet in a file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_stream_provider.exceptions import StreamError
from tests.conftest import sql

pytestmark = pytest.mark.spark

FILES = Path(__file__).parent / "trigger_files"
SCRIPT = Path(sys.executable).with_name("airflow-stream")


def create(wh, name: str, cls: str, pattern: str, *, event: str = "AFTER", kind: str = "STATELESS",
           uri: Path | None = FILES / "counters.py", **attributes: str) -> None:
    attributes = {"dir": str(Path(os.environ["AIRFLOW_STREAM_HOME"])), "name": name, **attributes}
    with_ = ", ".join(f'"{k}" = "{v}"' for k, v in attributes.items())
    using = f" USING URI '{uri}'" if uri else ""
    sql(wh, f"CREATE {kind} TRIGGER {name} {event} INSERT ON {pattern} AS '{cls}'{using} WITH ({with_})")


def log(name: str) -> list[str]:
    path = Path(os.environ["AIRFLOW_STREAM_HOME"]) / f"{name}.log"
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def fires(name: str, *, pids: bool = False) -> list[dict]:
    """The tablets ``name`` was fired with (with ``pids``, also the process that fired it)."""
    out = [json.loads(line.removeprefix("fire ")) for line in log(name) if line.startswith("fire ")]
    return out if pids else [{k: v for k, v in f.items() if k != "pid"} for f in out]


def rows_seen(name: str) -> int:
    """TriggerFireTimesCounter's count: the rows of every tablet the trigger was fired with."""
    return sum(f["rows"] for f in fires(name))


def points(wh, text: str) -> list[tuple]:
    (result,) = sql(wh, text)
    return [tuple(row.values()) for row in result.table.to_pylist()]


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=240,
                          env=os.environ | (env or {}))


@pytest.fixture
def test_db(wh):
    """IoTDBTriggerExecutionIT's setup: root.test with stateless.{a,b,c} as INT32."""
    sql(wh, "CREATE DATABASE root.test;\n" + ";\n".join(
        f"CREATE TIMESERIES root.test.stateless.{m} WITH DATATYPE=INT32, ENCODING=PLAIN" for m in "abc"))
    return wh


def four_inserts_per_row(device: str) -> str:
    """testFireTimesOfStatelessTrigger's statements: for i in 0..9, one insert of a, b and c,
    then one each of a, b and c."""
    out = []
    for i in range(10):
        out.append(f"INSERT INTO {device}(time, a, b, c) VALUES ({i}, {i}, {i}, {i})")
        out += [f"INSERT INTO {device}(time, {m}) VALUES ({i}, {i})" for m in "abc"]
    return ";\n".join(out)


def test_fire_counts_of_stateless_triggers(test_db):
    for event in ("BEFORE", "AFTER"):
        create(test_db, f"{event.lower()}_all", "counters.Recorder", "root.test.stateless.*", event=event)
        create(test_db, f"{event.lower()}_a", "counters.Recorder", "root.test.stateless.a", event=event)
    sql(test_db, four_inserts_per_row("root.test.stateless"))
    # IoTDB's expected counts: (1 + 3) * 10 for `.*`, (1 + 1) * 10 for `.a`
    assert {n: rows_seen(n) for n in ("before_all", "after_all", "before_a", "after_a")} == {
        "before_all": 40, "after_all": 40, "before_a": 20, "after_a": 20}
    # the three-column insert is one tablet of three columns for `.*`, of `a` alone for `.a`
    assert fires("after_all")[0]["schemas"] == [["a", "INT32"], ["b", "INT32"], ["c", "INT32"]]
    assert fires("after_a")[0]["schemas"] == [["a", "INT32"]]


def test_the_tablet_example_of_004_one_tablet_per_trigger_with_only_its_series(wh):
    # 004: Trigger1 on <device>.*, Trigger2 on <device>.a, Trigger3 on <device>.b, all BEFORE INSERT;
    # insert into <device>(time, a, b) values (1, 1, 1) (a device here is below its database)
    sql(wh, "CREATE DATABASE root.sg")
    for name, pattern in (("Trigger1", "root.sg.d1.*"), ("Trigger2", "root.sg.d1.a"), ("Trigger3", "root.sg.d1.b")):
        create(wh, name, "counters.Recorder", pattern, event="BEFORE")
    sql(wh, "INSERT INTO root.sg.d1(time, a, b) VALUES (1, 1, 1)")
    tablets = {name: fires(name) for name in ("Trigger1", "Trigger2", "Trigger3")}
    assert tablets == {
        "Trigger1": [{"device": "root.sg.d1", "rows": 1, "schemas": [["a", "DOUBLE"], ["b", "DOUBLE"]],
                      "timestamps": [1], "values": [[1.0], [1.0]]}],
        "Trigger2": [{"device": "root.sg.d1", "rows": 1, "schemas": [["a", "DOUBLE"]], "timestamps": [1],
                      "values": [[1.0]]}],
        "Trigger3": [{"device": "root.sg.d1", "rows": 1, "schemas": [["b", "DOUBLE"]], "timestamps": [1],
                      "values": [[1.0]]}],
    }


def test_star_is_one_level_and_double_star_one_or_more(wh):
    sql(wh, "CREATE DATABASE root.ln")
    create(wh, "one", "counters.Recorder", "root.ln.*")
    create(wh, "two", "counters.Recorder", "root.ln.*.*")
    create(wh, "many", "counters.Recorder", "root.ln.**")
    create(wh, "inside", "counters.Recorder", "root.ln.wf*.wt01.temperature")
    sql(wh, "INSERT INTO root.ln.wf01.wt01(time, temperature, status) VALUES (1, 20.5, true);"
            "INSERT INTO root.ln.wf02(time, temperature) VALUES (1, 21.5)")
    assert [f["device"] for f in fires("one")] == []  # root.ln.<x> is a device, not a series
    assert [(f["device"], f["schemas"]) for f in fires("two")] == [("root.ln.wf02", [["temperature", "DOUBLE"]])]
    assert [(f["device"], [s[0] for s in f["schemas"]]) for f in fires("many")] == [
        ("root.ln.wf01.wt01", ["temperature", "status"]), ("root.ln.wf02", ["temperature"])]
    assert [(f["device"], f["values"]) for f in fires("inside")] == [("root.ln.wf01.wt01", [[20.5]])]


def test_a_multi_row_insert_fires_per_row_and_only_for_writes_after_creation(test_db):
    sql(test_db, "INSERT INTO root.test.stateless(time, a) VALUES (100, 1)")  # before the trigger: no fire
    create(test_db, "rows", "counters.Recorder", "root.test.stateless.**")
    sql(test_db, "INSERT INTO root.test.stateless(time, a, b) VALUES (5, 1, 2), (6, 3, NULL)")
    # an old timestamp, written after the registration, fires as well
    assert [(f["timestamps"], [s[0] for s in f["schemas"]], f["values"]) for f in fires("rows")] == [
        ([5], ["a", "b"], [[1], [2]]), ([6], ["a"], [[3]])]


def test_attributes_reach_validate_and_on_create_once_each_and_drop_calls_on_drop_once(test_db):
    create(test_db, "life", "counters.Recorder", "root.test.**", limit="100")
    sql(test_db, "INSERT INTO root.test.stateless(time, a) VALUES (1, 1);"
                 "INSERT INTO root.test.stateless(time, a) VALUES (2, 2)")
    sql(test_db, "DROP TRIGGER life")
    sql(test_db, "INSERT INTO root.test.stateless(time, a) VALUES (3, 3)")  # dropped: no fire
    attributes = json.dumps({"dir": os.environ["AIRFLOW_STREAM_HOME"], "limit": "100", "name": "life"},
                            sort_keys=True)
    assert [line.split(" ")[0] for line in log("life")] == ["validate", "on_create", "fire", "fire", "on_drop"]
    assert log("life")[:2] == [f"validate {attributes}", f"on_create {attributes}"]
    (result,) = sql(test_db, "SHOW TRIGGERS")
    assert result.table.num_rows == 0


def test_a_rejecting_validate_registers_nothing_and_calls_no_on_create(test_db):
    with pytest.raises(StreamError, match=r"trigger alert: validate failed \(ValueError: the attribute limit is "
                                          r"required\)"):
        create(test_db, "alert", "counters.Rejecting", "root.test.**")
    (result,) = sql(test_db, "SHOW TRIGGERS")
    assert result.table.num_rows == 0
    assert not (Path(os.environ["AIRFLOW_STREAM_HOME"]) / "triggers" / "install").exists() or not any(
        (Path(os.environ["AIRFLOW_STREAM_HOME"]) / "triggers" / "install").iterdir())
    sql(test_db, "INSERT INTO root.test.stateless(time, a) VALUES (1, 1)")  # nothing fires, nothing fails


def test_show_triggers_lists_each_with_its_counts(test_db):
    # testCreateTriggersNormally, for the stateless half (the stateful half runs with the node)
    for event in ("BEFORE", "AFTER"):
        for suffix, pattern in (("a", "root.test.stateless.a"), ("all", "root.test.stateless.*")):
            create(test_db, f"stateless{event.title()}Insertion_{suffix}", "counters.Recorder", pattern, event=event)
    sql(test_db, "INSERT INTO root.test.stateless(time, a, b) VALUES (1, 1, 1)")
    (result,) = sql(test_db, "SHOW TRIGGERS")
    assert result.table.column_names[:7] == ["TriggerName", "Event", "Type", "State", "PathPattern", "ClassName",
                                             "NodeId"]
    rows = {r["TriggerName"]: r for r in result.table.to_pylist()}
    assert {n: (r["Event"], r["Type"], r["State"], r["PathPattern"], r["ClassName"], r["NodeId"], r["Fired"])
            for n, r in rows.items()} == {
        "statelessBeforeInsertion_a": ("BEFORE_INSERT", "STATELESS", "ACTIVE", "root.test.stateless.a",
                                       "counters.Recorder", "ALL", 1),
        "statelessBeforeInsertion_all": ("BEFORE_INSERT", "STATELESS", "ACTIVE", "root.test.stateless.*",
                                         "counters.Recorder", "ALL", 1),
        "statelessAfterInsertion_a": ("AFTER_INSERT", "STATELESS", "ACTIVE", "root.test.stateless.a",
                                      "counters.Recorder", "ALL", 1),
        "statelessAfterInsertion_all": ("AFTER_INSERT", "STATELESS", "ACTIVE", "root.test.stateless.*",
                                        "counters.Recorder", "ALL", 1),
    }


def test_names_are_case_sensitive_unique_and_can_be_reused_after_a_drop(test_db):
    for name in ("test", "Test", "TEST"):  # testTriggerNameCaseSensitivity
        create(test_db, name, "counters.Recorder", "root.test.stateless.*")
    with pytest.raises(StreamError, match=r"Failed to create trigger \[Test\], the same name trigger has been "
                                          r"created"):
        create(test_db, "Test", "counters.Recorder", "root.test.stateless.*")
    with pytest.raises(StreamError, match=r"Failed to drop trigger \[tEST\], this trigger has not been created"):
        sql(test_db, "DROP TRIGGER tEST")
    for _ in range(2):  # testCreateAndDropMultipleTimes
        sql(test_db, "DROP TRIGGER Test")
        create(test_db, "Test", "counters.Recorder", "root.test.stateless.*")
    (result,) = sql(test_db, "SHOW TRIGGERS")
    assert sorted(result.table.column("TriggerName").to_pylist()) == ["TEST", "Test", "test"]


@pytest.mark.parametrize(("uri", "cls", "message"), [
    ("", "counters.Recorder", "USING URI needs a file path"),
    ("file:///data/trigger/upload-test.py", "counters.Recorder",
     "USING URI 'file:///data/trigger/upload-test.py' cannot be read: /data/trigger/upload-test.py does not exist"),
    ("ftp://host/x.py", "counters.Recorder", "the scheme ftp:// is not supported"),
    (str(FILES / "counters.py"), "missing.Recorder", "module missing cannot be imported"),
    (str(FILES / "counters.py"), "counters.Nobody", "module counters has no class Nobody"),
    (str(FILES / "counters.py"), "counters.NotATrigger", "is not a subclass of"),
    (str(FILES / "counters.py"), "counters.BrokenCreate", "on_create failed (OSError: cannot open the alert channel)"),
    (None, "tests.nowhere.Trigger", "cannot be imported from the Python path"),
])
def test_bad_code_locations_and_classes_are_clear_errors_and_leave_nothing(test_db, uri, cls, message):
    using = "" if uri is None else f" USING URI '{uri}'"
    with pytest.raises(StreamError) as info:
        sql(test_db, f"CREATE TRIGGER t AFTER INSERT ON root.test.** AS '{cls}'{using} "
                     f"WITH (\"dir\" = \"{os.environ['AIRFLOW_STREAM_HOME']}\", \"name\" = \"t\")")
    assert message in str(info.value)
    (result,) = sql(test_db, "SHOW TRIGGERS")
    assert result.table.num_rows == 0
    install = Path(os.environ["AIRFLOW_STREAM_HOME"]) / "triggers" / "install"
    assert not install.exists() or not any(install.iterdir())


def test_a_class_from_the_python_path(test_db):
    create(test_db, "from_path", "tests.iotdb.trigger_files.counters.Recorder", "root.test.**", uri=None)
    sql(test_db, "INSERT INTO root.test.stateless(time, a) VALUES (1, 7)")
    assert [f["values"] for f in fires("from_path")] == [[[7]]]


def test_two_files_with_the_same_module_and_class_names_do_not_collide(test_db):
    create(test_db, "first", "counters.Recorder", "root.test.**")
    create(test_db, "second", "counters.Recorder", "root.test.**", uri=FILES / "other" / "counters.py")
    sql(test_db, "INSERT INTO root.test.stateless(time, a) VALUES (1, 1)")
    assert rows_seen("first") == 1
    assert log("second") == ["the other recorder"]


def test_a_package_folder_with_relative_imports(test_db, tmp_path):
    package = tmp_path / "src" / "alerts"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "limits.py").write_text("LIMIT = 50\n")
    (package / "checks.py").write_text(
        "from pathlib import Path\nfrom airflow_stream_provider import InsertTrigger\n"
        "from .limits import LIMIT\n\n"
        "class Over(InsertTrigger):\n"
        "    def on_create(self, attributes):\n"
        "        self.out = Path(attributes.get_string('dir')) / 'over.txt'\n"
        "    def fire(self, tablet):\n"
        "        with self.out.open('a') as f:\n"
        "            f.writelines(f'{v}\\n' for c in tablet.values for v in c if v > LIMIT)\n"
        "        return True\n")
    create(test_db, "over", "alerts.checks.Over", "root.test.**", uri=package)
    (package / "limits.py").write_text("LIMIT = 0\n")  # the copy taken at CREATE is what runs
    sql(test_db, "INSERT INTO root.test.stateless(time, a, b) VALUES (1, 40, 60)")
    assert (tmp_path / "over.txt").read_text().split() == ["60"]


def test_on_drop_raising_still_drops_and_says_so(test_db):
    create(test_db, "brittle", "counters.BrokenDrop", "root.test.**")
    (result,) = sql(test_db, "DROP TRIGGER brittle")
    assert result.notices == ("trigger brittle dropped, but its on_drop raised OSError: cannot close the alert "
                              "channel",)
    (shown,) = sql(test_db, "SHOW TRIGGERS")
    assert shown.table.num_rows == 0


def test_a_fire_that_hangs_times_out_as_a_failure(test_db, monkeypatch):
    monkeypatch.setenv("AIRFLOW_STREAM_TRIGGER_TIMEOUT", "1")
    create(test_db, "slow", "counters.Sleeper", "root.test.**")
    (result,) = sql(test_db, "INSERT INTO root.test.stateless(time, a) VALUES (1, 1)")
    assert result.notices == ("trigger slow failed on root.test.stateless: fire did not return within 1 s "
                              "(AIRFLOW_STREAM_TRIGGER_TIMEOUT) (the data is written)",)
    assert points(test_db, "SELECT a FROM root.test.stateless")[0][1] == 1
    (shown,) = sql(test_db, "SHOW TRIGGERS")
    assert shown.table.select(["Fired", "Failed"]).to_pylist() == [{"Fired": 1, "Failed": 1}]


# --- failure strategies, through the CLI: exit status 2 = nothing written, 3 = written, a trigger failed --


@pytest.mark.parametrize(("event", "strategy", "status", "written"), [
    ("BEFORE", "PESSIMISTIC", 2, []),
    ("BEFORE", "OPTIMISTIC", 3, [1, 2, 3]),
    ("AFTER", "PESSIMISTIC", 3, [1, 2, 3]),
    ("AFTER", "OPTIMISTIC", 3, [1, 2, 3]),
])
def test_failure_strategies_through_the_cli(wh, event, strategy, status, written):
    home = os.environ["AIRFLOW_STREAM_HOME"]
    setup = cli("sql", "CREATE DATABASE root.fs; "
                f"CREATE TRIGGER check {event} INSERT ON root.fs.** AS 'counters.Refuser' "
                f"USING URI '{FILES / 'counters.py'}' "
                f"WITH (\"dir\" = \"{home}\", \"name\" = \"check\", \"bad\" = \"2\", \"strategy\" = \"{strategy}\"); "
                f"CREATE TRIGGER later {event} INSERT ON root.fs.** AS 'counters.Recorder' "
                f"USING URI '{FILES / 'counters.py'}' WITH (\"dir\" = \"{home}\", \"name\" = \"later\")")
    assert setup.returncode == 0, setup.stderr
    # a multi-row INSERT whose row 2 fails the trigger
    done = cli("sql", "INSERT INTO root.fs.d1(time, s1) VALUES (1, 1), (2, 2), (3, 3)")
    assert done.returncode == status, done.stderr
    assert "trigger check failed on root.fs.d1: fire returned False" in done.stderr
    if status == 2:
        assert "Failed to complete the insertion because trigger error before the insertion" in done.stderr
    assert [v for _, v in points(wh, "SELECT s1 FROM root.fs.d1")] == written
    later = [f["timestamps"][0] for f in fires("later")]
    if strategy == "PESSIMISTIC":
        assert later == [1]  # row 2 failed: nothing fires after it
    else:
        assert later == [1, 2, 3]


def test_a_raising_fire_is_a_failure_that_names_the_error(wh):
    sql(wh, "CREATE DATABASE root.fs")
    create(wh, "raiser", "counters.Refuser", "root.fs.**", bad="2", strategy="OPTIMISTIC", **{"raise": "true"})
    (result,) = sql(wh, "INSERT INTO root.fs.d1(time, s1) VALUES (1, 2)")
    assert result.notices == ("trigger raiser failed on root.fs.d1: fire raised RuntimeError: value 2.0 is not "
                              "allowed (the data is written)",)
    (shown,) = sql(wh, "SHOW TRIGGERS")
    assert shown.table.select(["Fired", "Failed", "LastError"]).to_pylist() == [
        {"Fired": 1, "Failed": 1, "LastError": "fire raised RuntimeError: value 2.0 is not allowed"}]


# --- every write through the warehouse fires: TDengine INSERT, load, CQ output --------------------


def test_tdengine_inserts_fire_as_root_database_table(wh):
    create(wh, "power", "counters.Recorder", "root.power.*.current", event="BEFORE")
    sql(wh, "CREATE DATABASE power; USE power;"
            "CREATE STABLE meters (ts TIMESTAMP, current FLOAT, voltage INT) TAGS (location VARCHAR(24));"
            "INSERT INTO d1001 USING meters TAGS ('SF') VALUES ('2025-01-01 00:00:01', 10.5, 220) "
            "('2025-01-01 00:00:02', 11.5, 221) "
            "d1002 USING meters TAGS ('LA') VALUES ('2025-01-01 00:00:03', 9.5, 219)")
    assert [(f["device"], f["schemas"], f["timestamps"], f["values"]) for f in fires("power")] == [
        ("root.power.d1001", [["current", "FLOAT"]], [1735689601000], [[10.5]]),
        ("root.power.d1001", [["current", "FLOAT"]], [1735689602000], [[11.5]]),
        ("root.power.d1002", [["current", "FLOAT"]], [1735689603000], [[9.5]]),
    ]


def test_a_load_fires_once_per_batch_and_device(wh, tmp_path):
    from airflow_stream_provider import model as m
    from airflow_stream_provider.warehouse.load import load

    sql(wh, "CREATE DATABASE power; USE power;"
            "CREATE TABLE m1 (ts TIMESTAMP, v DOUBLE)")
    create(wh, "loads", "counters.Recorder", "root.power.m1.v")
    csv = tmp_path / "m1.csv"
    csv.write_text("ts,v\n" + "".join(f"2025-01-01 00:00:{i:02d},{i}.5\n" for i in range(5)))
    load(wh, csv, m.TableName("m1", "power"), batch_rows=2)
    assert [(f["rows"], f["values"]) for f in fires("loads")] == [
        (2, [[0.5, 1.5]]), (2, [[2.5, 3.5]]), (1, [[4.5]])]


def test_a_continuous_querys_output_fires_the_triggers_on_its_target(wh):
    from datetime import UTC, datetime

    from airflow_stream_provider.streams.run import run
    from airflow_stream_provider.streams.run_request import RunRequest
    from airflow_stream_provider.streams.store import StreamStore

    sql(wh, "CREATE DATABASE root.ln;"
            "INSERT INTO root.ln.wf01.wt01(time, temperature) VALUES (2024-06-01T12:00:01Z, 10), "
            "(2024-06-01T12:00:03Z, 20), (2024-06-01T12:00:11Z, 40)")
    create(wh, "averages", "counters.Recorder", "root.ln.**.temperature_avg")
    create(wh, "raw", "counters.Recorder", "root.ln.wf01.wt01.temperature")  # the CQ's reads fire nothing
    sql(wh, "CREATE CQ cq_avg RESAMPLE EVERY 10s BOUNDARY 2024-06-01T12:00:10Z RANGE 20s BEGIN "
            "SELECT avg(temperature) INTO root.ln.wf01.wt01(temperature_avg) FROM root.ln.wf01.wt01 "
            "GROUP BY(10s) END")
    with StreamStore().updating("root", "cq_avg") as saving:  # created before its BOUNDARY
        saving.state = saving.state.replace(created=datetime(2024, 6, 1, 12, 0, 0, tzinfo=UTC))
    run(wh, "root", "cq_avg", RunRequest(now=datetime(2024, 6, 1, 12, 0, 20, tzinfo=UTC)))
    sql(wh, "CREATE CQ cq_empty RESAMPLE EVERY 10s BOUNDARY 2024-06-01T13:00:00Z BEGIN "
            "SELECT avg(temperature) INTO root.ln.wf01.wt01(temperature_avg) FROM root.ln.wf01.wt01 GROUP BY(10s) END")
    with StreamStore().updating("root", "cq_empty") as saving:
        saving.state = saving.state.replace(created=datetime(2024, 6, 1, 12, 0, 0, tzinfo=UTC))
    # [12:59:50, 13:00): no rows
    run(wh, "root", "cq_empty", RunRequest(now=datetime(2024, 6, 1, 13, 0, 0, tzinfo=UTC)))
    # executions at 12:00:10 over [11:59:50, 12:00:10) and at 12:00:20 over [12:00:00, 12:00:20): the
    # empty window 11:59:50 writes no point, [12:00:00, 12:00:10) averages 10 and 20
    assert [(f["device"], f["schemas"], f["timestamps"], f["values"]) for f in fires("averages")] == [
        ("root.ln.wf01.wt01", [["temperature_avg", "DOUBLE"]], [1717243200000], [[15.0]]),
        ("root.ln.wf01.wt01", [["temperature_avg", "DOUBLE"]], [1717243200000, 1717243210000], [[15.0, 40.0]])]
    assert fires("raw") == []


# --- reference 004's alerting example, ported (examples/triggers/alerting.py) ----------------------


def test_the_alerting_example_posts_alerts_to_a_receiver(wh):
    import http.server
    import threading

    received: list = []

    class Receiver(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            received.extend(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    example = Path(__file__).parents[2] / "examples" / "triggers" / "alerting.py"
    try:
        sql(wh, "CREATE DATABASE root.ln")
        with pytest.raises(StreamError, match='the attribute "url" must be an http'):
            sql(wh, f"CREATE TRIGGER alert AFTER INSERT ON root.ln.** AS 'alerting.ClusterAlertingExample' "
                    f"USING URI '{example}'")
        sql(wh, f"CREATE TRIGGER alert AFTER INSERT ON root.ln.**.temperature AS 'alerting.ClusterAlertingExample' "
                f"USING URI '{example}' WITH (\"url\" = \"http://127.0.0.1:{server.server_port}/api/v2/alerts\")")
        (result,) = sql(wh, "INSERT INTO root.ln.wf01.wt01(time, temperature, humidity) VALUES "
                            "(1, 40.0, 90.0), (2, 75.5, 91.0), (3, 120.25, 92.0)")
        assert result.notices == ()
    finally:
        server.shutdown()
        server.server_close()
    # 40 is no alert, 75.5 a warning, 120.25 critical; humidity is not listened to
    assert [(a["labels"]["series"], a["labels"]["value"], a["labels"]["severity"]) for a in received] == [
        ("root.ln.wf01.wt01.temperature", "75.5", "warning"), ("root.ln.wf01.wt01.temperature", "120.25", "critical")]
    assert received[1]["annotations"] == {"summary": "high temperature",
                                          "description": "alert_test: root.ln.wf01.wt01.temperature is 120.25"}


def test_a_refused_tdengine_insert_creates_no_subtable_and_writes_no_row(wh):
    create(wh, "guard", "counters.Refuser", "root.power.**", event="BEFORE", bad="9", strategy="PESSIMISTIC")
    sql(wh, "CREATE DATABASE power; USE power;"
            "CREATE STABLE meters (ts TIMESTAMP, current FLOAT) TAGS (location VARCHAR(24));"
            "INSERT INTO d1 USING meters TAGS ('SF') VALUES ('2025-01-01 00:00:01', 1.5)")
    with pytest.raises(StreamError, match="Failed to complete the insertion because trigger error before the "
                                          "insertion: trigger guard failed on root.power.d9"):
        sql(wh, "INSERT INTO d1 VALUES ('2025-01-01 00:00:02', 2.5) "
                "d9 USING meters TAGS ('LA') VALUES ('2025-01-01 00:00:03', 9)")
    assert points(wh, "SELECT tbname, current FROM power.meters") == [("d1", 1.5)]
    with pytest.raises(StreamError, match="table power.d9 does not exist"):
        sql(wh, "INSERT INTO d9 VALUES ('2025-01-01 00:00:04', 1)")


def test_a_load_refused_by_a_trigger_keeps_its_earlier_batches_and_says_so(wh, tmp_path):
    from airflow_stream_provider import model as m
    from airflow_stream_provider.warehouse.load import load

    sql(wh, "CREATE DATABASE power; USE power; CREATE TABLE m1 (ts TIMESTAMP, v DOUBLE)")
    create(wh, "guard", "counters.Refuser", "root.power.m1.v", event="BEFORE", bad="3.5", strategy="PESSIMISTIC")
    csv = tmp_path / "m1.csv"
    csv.write_text("ts,v\n" + "".join(f"2025-01-01 00:00:{i:02d},{i}.5\n" for i in range(6)))
    with pytest.raises(StreamError, match=r"trigger guard failed on root.power.m1: fire returned False .*; the load "
                                          r"stopped after 2 rows in 1 commit$"):
        load(wh, csv, m.TableName("m1", "power"), batch_rows=2)
    assert [v for _, v in points(wh, "SELECT * FROM power.m1")] == [0.5, 1.5]


def test_a_streams_output_fires_the_triggers_on_its_table(wh):
    from airflow_stream_provider.streams.run import run

    sql(wh, "CREATE DATABASE power; USE power;"
            "CREATE TABLE m1 (ts TIMESTAMP, v DOUBLE);"
            "CREATE STREAM avg1m INTERVAL(1m) SLIDING(1m) FROM m1 INTO avg1m_out "
            "AS SELECT _twstart ts, avg(v) AS a, count(*) AS n FROM %%trows")
    create(wh, "outputs", "counters.Recorder", "root.power.avg1m_out.a")
    sql(wh, "INSERT INTO m1 VALUES ('2025-01-01 00:00:10', 1) ('2025-01-01 00:00:50', 3) ('2025-01-01 00:01:30', 8) "
            "('2025-01-01 00:02:05', 4)")
    run(wh, "power", "avg1m")
    # [00:00, 00:01) averages 1 and 3, [00:01, 00:02) is 8; [00:02, 00:03) is still open; one write
    assert [(f["device"], f["schemas"], f["timestamps"], f["values"]) for f in fires("outputs")] == [
        ("root.power.avg1m_out", [["a", "DOUBLE"]], [1735689600000, 1735689660000], [[2.0, 8.0]])]
