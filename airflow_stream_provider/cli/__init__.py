"""The ``airflow-stream`` command."""

from airflow_stream_provider.cli.commands import main
from airflow_stream_provider.processes import exit_process

__all__ = ["main", "run"]


def run() -> None:
    """The console script: :func:`main`, then the process ends with its status."""
    exit_process(main)
