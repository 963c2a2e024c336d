"""The object store's connection: the warehouse's credentials and endpoint, read from the Airflow
connection ``AIRFLOW_STREAM_STORAGE_CONN_ID`` names (type ``aws``: login the access key id,
password the secret key, extra ``endpoint_url`` and ``region_name``)."""

from __future__ import annotations

from airflow.sdk import BaseHook


def aws_variables(conn_id: str) -> dict[str, str]:
    """The connection as the AWS variables the Delta kernel, pyarrow and Spark's S3A read."""
    connection = BaseHook.get_connection(conn_id)
    extra = connection.extra_dejson
    values = {
        "AWS_ACCESS_KEY_ID": connection.login or "",
        "AWS_SECRET_ACCESS_KEY": connection.password or "",
        "AWS_ENDPOINT_URL": str(extra.get("endpoint_url") or ""),
        "AWS_REGION": str(extra.get("region_name") or ""),
    }
    return {key: value for key, value in values.items() if value}
