"""The Airflow roles without a running Airflow: the classpaths serialized triggers and timetables
carry, a trigger's error event and the task that raises on it, the old import paths, and the
connection lookups the hooks lend to delivery and the Spark session."""

from __future__ import annotations

import asyncio
import importlib
import json

import pytest
from airflow.sdk.exceptions import AirflowException

from airflow_stream_provider.hooks import bind
from airflow_stream_provider.notify import delivery
from airflow_stream_provider.spark import session
from airflow_stream_provider.triggers import CheckpointCommitTrigger, EventTimeTrigger
from airflow_stream_provider.triggers.base import poll


@pytest.mark.parametrize("trigger, path", [
    (CheckpointCommitTrigger("/state", "/data/t", 0.5), "airflow_stream_provider.triggers.CheckpointCommitTrigger"),
    (EventTimeTrigger("/state", "/data/t", "ts", "2025-01-01T00:00:00+00:00", 5.0),
     "airflow_stream_provider.triggers.EventTimeTrigger"),
])
def test_triggers_serialize_to_their_package_path(trigger, path):
    """Deferred triggers of running deployments carry this path: it must keep importing."""
    classpath, kwargs = trigger.serialize()
    assert classpath == path
    assert json.loads(json.dumps(kwargs)) == kwargs
    module, _, name = classpath.rpartition(".")
    assert getattr(importlib.import_module(module), name) is type(trigger)
    assert type(trigger)(**kwargs).serialize() == (classpath, kwargs)


def _events(check) -> list[dict]:
    async def collect():
        return [event.payload async for event in poll(check, 0.01)]
    return asyncio.run(asyncio.wait_for(collect(), 10))


def test_a_failing_check_becomes_one_error_event():
    def broken() -> dict | None:
        raise OSError("disk gone")

    assert _events(broken) == [{"status": "error", "message": "OSError: disk gone"}]
    calls = iter([None, None, {"status": "committed"}])
    assert _events(lambda: next(calls)) == [{"status": "committed"}]


def test_tasks_raise_on_a_trigger_error_event():
    from airflow_stream_provider.operators import StreamComputeOperator
    from airflow_stream_provider.sensors import StreamCheckpointSensor

    error = {"status": "error", "message": "OSError: disk gone"}
    sensor = StreamCheckpointSensor(task_id="wait", stream="d.s")
    with pytest.raises(AirflowException, match="stream d.s: OSError: disk gone"):
        sensor.execute_complete({}, error)
    assert sensor.execute_complete({}, {"status": "committed"}) == {"status": "committed"}
    compute = StreamComputeOperator(task_id="compute", stream="d.s", kind="window", wait=True)
    with pytest.raises(AirflowException, match="disk gone"):
        compute.execute_complete({}, error)


def test_old_class_paths_still_import():
    from airflow_stream_provider.operators import (  # noqa: F401
        StreamCheckpointSensor,
        StreamCommitOperator,
        StreamComputeOperator,
        StreamEventTimeSensor,
        StreamNotifyOperator,
        StreamRecalculateOperator,
    )
    from airflow_stream_provider.sensors import StreamCheckpointSensor as sensor
    from airflow_stream_provider.timetables import PeriodTimetable, RecalcTimetable, SlidingTimetable  # noqa: F401
    from airflow_stream_provider.triggers import check_windows, last_commit  # noqa: F401

    assert StreamCheckpointSensor is sensor


def test_without_the_hooks_bound_connections_are_refused(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CONNECT", json.dumps({"conn_type": "spark_connect", "host": "h", "port": 1}))
    monkeypatch.delenv("AIRFLOW_STREAM_SPARK_REMOTE", raising=False)
    delivery.use_credentials(None)
    session.use_connection_url(None)
    try:
        with pytest.raises(session.ConnectionUnreadable, match="'spark_connect'.*hooks.bind"):
            session.remote_url()
        with pytest.raises(delivery.CredentialsUnavailable):
            delivery.access_for("ws://h:1/n", ("stream_ws_default",))
    finally:
        bind()
    assert session.remote_url() == "sc://h:1/"
    assert delivery.access_for("ws://h:1/n", ("stream_ws_missing",)).headers == ()
