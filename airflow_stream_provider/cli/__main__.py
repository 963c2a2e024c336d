"""``python -m airflow_stream_provider.cli``: the same as ``airflow-stream``."""

from airflow_stream_provider.cli import run

run()
