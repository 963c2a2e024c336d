"""TDengine-style stream processing on Spark tables, orchestrated by Apache Airflow."""

from __future__ import annotations

__version__ = "0.1.0"
