"""The ``spark_connect`` connection: where the Spark Connect server (the stream node) listens, read
with the Apache Spark provider's hook."""

from __future__ import annotations

from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook


def connection_url(conn_id: str) -> str:
    """The ``sc://`` URL of the Airflow connection ``conn_id``."""
    return SparkConnectHook(conn_id=conn_id).get_connection_url()
