"""TDengine-style stream processing on Spark tables, orchestrated by Apache Airflow.

The public API has one stable home, this package: what users import from it keeps its path
whatever moves inside::

    from airflow_stream_provider import InsertTrigger, Tablet, StreamComputeOperator, PeriodTimetable

- the insert trigger API (IoTDB's triggers): :class:`InsertTrigger`, :class:`Tablet`,
  :class:`TriggerAttributes`, :class:`Measurement`, :class:`FailureStrategy`, :class:`TriggerEvent`,
  :class:`TriggerType`
- the operators, sensors, deferrable triggers and timetables of the stream DAGs
- :class:`StreamProject` and :class:`StreamDeclaration`: streams declared in the DAG folder
- :class:`WebSocketNotifier`, a TDengine-format notification from any DAG's callbacks
- :class:`WebSocketHook`, the ``stream_ws`` connection

Each name is imported on first use, so ``import airflow_stream_provider.model`` (or the triggerer
loading one trigger) does not pull in Airflow's operator machinery.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

__version__ = "0.1.0"

#: public name -> the module that defines it
_PUBLIC = {
    **dict.fromkeys(
        ("FailureStrategy", "InsertTrigger", "Measurement", "Tablet", "TriggerAttributes", "TriggerEvent",
         "TriggerType"),
        "airflow_stream_provider.model.insert_triggers"),
    **dict.fromkeys(
        ("StreamCommitOperator", "StreamComputeOperator", "StreamDeployOperator", "StreamNotifyOperator",
         "StreamRecalculateOperator"),
        "airflow_stream_provider.operators"),
    "StreamProject": "airflow_stream_provider.dag_factory",
    "StreamDeclaration": "airflow_stream_provider.plan.declaration",
    **dict.fromkeys(("StreamCheckpointSensor", "StreamEventTimeSensor", "StreamSensor"),
                    "airflow_stream_provider.sensors"),
    **dict.fromkeys(
        ("CheckpointCommitTrigger", "EventTimeTrigger", "StreamCommitTrigger", "StreamComputeTrigger",
         "StreamInstantTrigger", "StreamNotifyTrigger"),
        "airflow_stream_provider.triggers"),
    **dict.fromkeys(("PeriodTimetable", "RecalcTimetable", "ResampleTimetable", "SlidingTimetable"),
                    "airflow_stream_provider.timetables"),
    "WebSocketNotifier": "airflow_stream_provider.notifications.websocket",
    "WebSocketHook": "airflow_stream_provider.hooks.websocket",
}

if TYPE_CHECKING:
    from airflow_stream_provider.dag_factory import StreamProject
    from airflow_stream_provider.hooks.websocket import WebSocketHook
    from airflow_stream_provider.model.insert_triggers import (
        FailureStrategy,
        InsertTrigger,
        Measurement,
        Tablet,
        TriggerAttributes,
        TriggerEvent,
        TriggerType,
    )
    from airflow_stream_provider.notifications.websocket import WebSocketNotifier
    from airflow_stream_provider.operators import (
        StreamCommitOperator,
        StreamComputeOperator,
        StreamDeployOperator,
        StreamNotifyOperator,
        StreamRecalculateOperator,
    )
    from airflow_stream_provider.plan.declaration import StreamDeclaration
    from airflow_stream_provider.sensors import StreamCheckpointSensor, StreamEventTimeSensor, StreamSensor
    from airflow_stream_provider.timetables import (
        PeriodTimetable,
        RecalcTimetable,
        ResampleTimetable,
        SlidingTimetable,
    )
    from airflow_stream_provider.triggers import (
        CheckpointCommitTrigger,
        EventTimeTrigger,
        StreamCommitTrigger,
        StreamComputeTrigger,
        StreamInstantTrigger,
        StreamNotifyTrigger,
    )

__all__ = ["CheckpointCommitTrigger", "EventTimeTrigger", "FailureStrategy", "InsertTrigger", "Measurement",
           "PeriodTimetable", "RecalcTimetable", "ResampleTimetable", "SlidingTimetable", "StreamCheckpointSensor",
           "StreamCommitOperator", "StreamCommitTrigger", "StreamComputeOperator", "StreamComputeTrigger",
           "StreamDeclaration", "StreamDeployOperator", "StreamEventTimeSensor", "StreamInstantTrigger",
           "StreamNotifyOperator", "StreamNotifyTrigger", "StreamProject", "StreamRecalculateOperator",
           "StreamSensor", "Tablet", "TriggerAttributes", "TriggerEvent", "TriggerType", "WebSocketHook",
           "WebSocketNotifier"]


def __getattr__(name: str) -> object:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})
