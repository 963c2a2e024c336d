"""The stream plan: one decision per stream, as plain data, and the DAGs rendered from it alone.

Expected values come from the DAG layout the README and DESIGN §4/§7 document (task chains per
trigger kind, a recalculation DAG for every stream but PERIOD, the recalculation slice) and from
reference 000's worked PERIOD example (PERIOD(330m, 1m) created at 12:00 fires at 16:31).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import islice

import pytest

from airflow_stream_provider import config
from airflow_stream_provider.model.events import StreamKind
from airflow_stream_provider.plan import ids
from airflow_stream_provider.plan.schedule import schedule_of
from airflow_stream_provider.plan.state import StreamState
from airflow_stream_provider.plan.stream import TaskRole, TriggerTable, plan_stream
from airflow_stream_provider.sql import parse
from airflow_stream_provider.streams.store import StreamStore

CREATED = datetime(2025, 5, 1, 12, 0, tzinfo=UTC)
STATE = StreamState.from_json({"created": CREATED.isoformat(),
                               "trigger_table": {"path": "/wh/d/meters", "ts_column": "ts"}})


def stream(text: str):
    (stmt,) = parse(text)
    return stmt


def chain(tasks) -> list[tuple[str, str]]:
    """(task, its role) in order, and each task's downstream must be the next one."""
    for before, after in zip(tasks, tasks[1:]):
        assert before.downstream == (after.task_id,)
    assert tasks[-1].downstream == ()
    return [(t.task_id, t.role) for t in tasks]


@pytest.mark.parametrize("text, kind, tasks, step", [
    ("CREATE STREAM s PERIOD(330m, 1m) INTO o AS SELECT cast(_tlocaltime/1000000 as timestamp) ts, count(*) n "
     "FROM d.meters", StreamKind.PERIOD, [("compute", TaskRole.COMPUTE), ("commit", TaskRole.COMMIT)], None),
    ("CREATE STREAM s SLIDING(1m) FROM d.meters INTO o AS SELECT _tcurrent_ts ts, count(*) n FROM %%trows",
     StreamKind.SLIDING, [("wait_for_event_time", TaskRole.WAIT_EVENT_TIME), ("compute", TaskRole.COMPUTE),
                          ("commit", TaskRole.COMMIT)], timedelta(minutes=1)),
    ("CREATE STREAM s INTERVAL(10m) SLIDING(5m) FROM d.meters INTO o AS SELECT _twstart ts, avg(v) a FROM %%trows",
     StreamKind.WINDOW, [("compute", TaskRole.COMPUTE), ("commit", TaskRole.COMMIT)], timedelta(minutes=5)),
    ("CREATE STREAM s SESSION(ts, 10s) FROM d.meters NOTIFY('ws://127.0.0.1:1/x') ON (WINDOW_CLOSE) INTO o AS "
     "SELECT _twstart ts, count(*) n FROM %%trows",
     StreamKind.WINDOW, [("compute", TaskRole.COMPUTE), ("notify", TaskRole.NOTIFY), ("commit", TaskRole.COMMIT)],
     timedelta(hours=1)),
    ("CREATE STREAM s COUNT_WINDOW(10) FROM d.meters INTO o AS SELECT _twstart ts, count(*) n FROM %%trows",
     StreamKind.WINDOW, [("compute", TaskRole.COMPUTE), ("commit", TaskRole.COMMIT)], timedelta(hours=1)),
])
def test_plan_per_trigger_kind(text, kind, tasks, step):
    plan = plan_stream(stream(text), "d", STATE, home="/home")
    assert plan.kind is kind
    assert (plan.dag_id, plan.qualified) == ("stream__d__s", "d.s")
    assert chain(plan.tasks) == tasks
    assert all(t.args["stream"] == "d.s" and t.args["home"] == "/home" for t in plan.tasks)
    assert plan.recalc_step == step
    # the tasks the stream node serves start in the triggerer: a window stream's, and a PERIOD
    # stream's, whose compute the node does on its running Spark session
    served = kind in (StreamKind.WINDOW, StreamKind.PERIOD)
    compute = plan.tasks[[t.role for t in plan.tasks].index(TaskRole.COMPUTE)]
    assert compute.args.get("on_node", False) is (kind is StreamKind.PERIOD)
    assert all(t.args.get("from_trigger", False) is served for t in plan.tasks if t.role is not TaskRole.COMPUTE
               and t.role is not TaskRole.WAIT_EVENT_TIME)
    if kind is StreamKind.PERIOD:  # scheduled triggers are not recalculated
        assert (plan.recalc_dag_id, plan.recalc_tasks) == (None, ())
    else:
        assert plan.recalc_dag_id == "stream__d__s__recalc"
        assert [(t.task_id, t.role) for t in plan.recalc_tasks] == [(ids.RECALCULATE_TASK, TaskRole.RECALCULATE)]


def test_period_plan_schedule_is_the_reference_example():
    plan = plan_stream(stream("CREATE STREAM s PERIOD(330m, 1m) INTO o AS SELECT cast(_tlocaltime/1000000 as "
                              "timestamp) ts, count(*) n FROM d.meters"), "d", STATE)
    assert plan.schedule is not None
    assert [t.strftime("%m-%d %H:%M") for t in islice(plan.schedule.instants(CREATED), 3)] == \
        ["05-01 16:31", "05-01 22:01", "05-02 00:01"]


def test_sliding_plan_waits_on_the_recorded_trigger_table_with_the_watermark():
    plan = plan_stream(stream("CREATE STREAM s SLIDING(1m) FROM d.meters STREAM_OPTIONS(WATERMARK(15s)) INTO o AS "
                              "SELECT _tcurrent_ts ts, count(*) n FROM %%trows"), "d", STATE)
    wait = plan.tasks[0]
    assert (wait.args["table"], wait.args["ts_column"], wait.args["watermark_s"]) == ("/wh/d/meters", "ts", 15.0)
    assert plan.watermark == timedelta(seconds=15)


def test_window_plan_hands_the_trigger_table_to_compute():
    plan = plan_stream(stream("CREATE STREAM s STATE_WINDOW(v) FROM d.meters INTO o AS SELECT _twstart ts, "
                              "count(*) n FROM %%trows"), "d", STATE)
    compute = plan.tasks[0]
    assert (compute.args["kind"], compute.args["wait"], compute.args["table"]) == ("window", True, "/wh/d/meters")
    assert plan.schedule is None


def test_a_stopped_stream_plans_paused_dags():
    plan = plan_stream(stream("CREATE STREAM s COUNT_WINDOW(10) FROM d.meters INTO o AS SELECT _twstart ts, "
                              "count(*) n FROM %%trows"), "d", STATE.replace(stopped=True))
    assert plan.paused


def test_trigger_table_round_trips_through_the_state():
    table = TriggerTable("/wh/d/meters", "ts")
    assert TriggerTable.from_state(table.to_state()) == table
    assert TriggerTable.from_state(None) is None


@pytest.mark.parametrize("text", [
    "CREATE STREAM s PERIOD(1h) INTO o AS SELECT cast(_tlocaltime/1000000 as timestamp) ts, count(*) n FROM d.meters",
    "CREATE STREAM s SLIDING(1h) FROM d.meters INTO o AS SELECT _tcurrent_ts ts, count(*) n FROM %%trows",
])
def test_schedule_of_is_the_one_schedule_of_the_trigger(text):
    stmt = stream(text)
    schedule = schedule_of(stmt, CREATED, config.timezone())
    assert schedule is not None and (schedule.period, schedule.offset) == (timedelta(hours=1), timedelta(0))
    assert plan_stream(stmt, "d", STATE).schedule == schedule


def test_dags_render_from_the_streams_folder_alone(tmp_path):
    """The DAG renderer reads the streams folder and the recorded state, never the catalog: here no
    warehouse exists at all."""
    from airflow_stream_provider.dag_factory import render_streams

    text = "CREATE STREAM s SLIDING(1m) FROM d.meters INTO o AS SELECT _tcurrent_ts ts, count(*) n FROM %%trows"
    StreamStore(tmp_path).create("d", stream(text), text, STATE)
    assert not (tmp_path / "warehouse").exists()
    dags = render_streams(tmp_path)
    assert sorted(dags) == ["stream__d__s", "stream__d__s__recalc"]
    main = dags["stream__d__s"]
    assert [t.task_id for t in main.topological_sort()] == ["wait_for_event_time", "compute", "commit"]
    assert main.get_task("wait_for_event_time").table == "/wh/d/meters"
    assert main.timetable.summary == "SLIDING(1m)"


def test_a_verification_dag_is_rendered_only_when_asked_for(tmp_path, monkeypatch):
    """``[verify] every`` (here its variable) adds ``stream__<db>__<name>__verify`` to each stream that
    writes an output or notifies its results; a stream that computes nothing gets none, and nothing is
    rendered without the setting."""
    from airflow_stream_provider.dag_factory import render_streams

    texts = {"s": "CREATE STREAM s SLIDING(1m) FROM d.meters INTO o AS SELECT _tcurrent_ts ts, count(*) n FROM %%trows",
             "p": "CREATE STREAM p PERIOD(10s) NOTIFY('ws://127.0.0.1:9/')",
             "n": "CREATE STREAM n PERIOD(10s) NOTIFY('ws://127.0.0.1:9/') AS SELECT "
                  "cast(_tlocaltime / 1000000 AS timestamp) ts, count(*) c FROM d.meters"}
    for text in texts.values():
        StreamStore(tmp_path).create("d", stream(text), text, STATE)
    assert sorted(render_streams(tmp_path)) == ["stream__d__n", "stream__d__p", "stream__d__s", "stream__d__s__recalc"]
    monkeypatch.setenv("AIRFLOW_STREAM_VERIFY_EVERY", "3600")
    monkeypatch.setenv("AIRFLOW_STREAM_VERIFY_LOOKBACK", "86400")
    dags = render_streams(tmp_path)
    assert sorted(dags) == ["stream__d__n", "stream__d__n__verify", "stream__d__p", "stream__d__s",
                            "stream__d__s__recalc", "stream__d__s__verify"]
    verifying = dags["stream__d__s__verify"]
    assert "delta=datetime.timedelta(seconds=3600)" in repr(verifying.timetable)
    task = verifying.get_task("verify")
    assert (task.stream, task.lookback, task.repair) == ("d.s", timedelta(days=1), False)
    monkeypatch.setenv("AIRFLOW_STREAM_VERIFY_EVERY", "soon")
    with pytest.raises(ValueError, match="is not a number of seconds"):
        config.verify_every()
