"""Airflow plugin of the provider: the entry point through which Airflow finds its parts."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from airflow_stream_provider.timetables import TIMETABLES


class AirflowStreamPlugin(AirflowPlugin):
    name = "airflow_stream"
    timetables = TIMETABLES
