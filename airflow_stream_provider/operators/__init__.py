"""The tasks of a stream's DAGs: the compute, notify, commit and recalculation steps (the sensors
that wait in the triggerer are in :mod:`airflow_stream_provider.sensors`). Each task calls the same
functions as ``airflow-stream run``.

A window DAG run is ``compute [>> notify] >> commit``. ``compute`` waits in the triggerer for the
detector's next batches, writes their results (upserts by key), queues their notifications in the
stream's outbox and returns what it consumed; ``notify`` delivers the outbox; ``commit`` records
the progress. A task killed and retried anywhere recomputes the same batches into the same rows
and queues no event twice, so nothing is lost or duplicated, and a resent message keeps its id.
"""

from __future__ import annotations

from typing import Any

from airflow_stream_provider.operators.base import StreamTask
from airflow_stream_provider.operators.commit import StreamCommitOperator
from airflow_stream_provider.operators.compute import StreamComputeOperator
from airflow_stream_provider.operators.deploy import StreamDeployOperator
from airflow_stream_provider.operators.notify import StreamNotifyOperator
from airflow_stream_provider.operators.recalculate import StreamRecalculateOperator
from airflow_stream_provider.plan.ids import COMPUTE_TASK, NOTIFY_TASK, WAIT_EVENT_TIME_TASK

#: the sensors, still importable from here where they used to live (deprecated: import them from
#: :mod:`airflow_stream_provider`); looked up on first use because the sensors package imports this one's base
_SENSORS = frozenset({"StreamCheckpointSensor", "StreamEventTimeSensor", "StreamSensor"})


def __getattr__(name: str) -> Any:
    if name in _SENSORS:
        import warnings

        from airflow_stream_provider import sensors

        warnings.warn(f"airflow_stream_provider.operators.{name} is deprecated: import it from "
                      "airflow_stream_provider", DeprecationWarning, stacklevel=2)
        return getattr(sensors, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["COMPUTE_TASK", "NOTIFY_TASK", "WAIT_EVENT_TIME_TASK", "StreamCommitOperator", "StreamComputeOperator",
           "StreamDeployOperator", "StreamNotifyOperator", "StreamRecalculateOperator", "StreamTask"]
