"""The ``spark_connect`` connection: where the Spark Connect server (the stream node) listens and the
token it wants, read with the Apache Spark provider's hook."""

from __future__ import annotations

from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

from airflow_stream_provider.spark.endpoint import with_token


def connection_url(conn_id: str) -> str:
    """The ``sc://`` URL of the Airflow connection ``conn_id``. The node's token is its password
    (the hook sends that as ``;token=``) or ``{"token": "..."}`` in its extra."""
    hook = SparkConnectHook(conn_id=conn_id)
    url = hook.get_connection_url()
    extra = hook.get_connection(conn_id).extra_dejson.get(SparkConnectHook.PARAM_TOKEN)
    return with_token(url, str(extra)) if extra else url
