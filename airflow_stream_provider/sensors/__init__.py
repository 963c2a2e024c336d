"""Sensors that wait for a stream in the triggerer: each checks once, then defers to its trigger."""

from __future__ import annotations

from airflow_stream_provider.sensors.base import StreamSensor
from airflow_stream_provider.sensors.checkpoint import StreamCheckpointSensor
from airflow_stream_provider.sensors.event_time import StreamEventTimeSensor

__all__ = ["StreamCheckpointSensor", "StreamEventTimeSensor", "StreamSensor"]
