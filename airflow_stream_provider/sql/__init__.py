"""The stream language: parse TDengine statements into the model, translate queries to Spark SQL."""

from __future__ import annotations

from airflow_stream_provider.sql.parser import parse
from airflow_stream_provider.sql.translate import to_spark

__all__ = ["parse", "to_spark"]
