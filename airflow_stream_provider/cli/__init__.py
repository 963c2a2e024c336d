"""The ``airflow-stream`` command."""

from airflow_stream_provider.cli.commands import main

__all__ = ["main"]
