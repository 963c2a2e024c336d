"""Where the project keeps its files, and the settings read from the environment."""

from __future__ import annotations

import os
import tomllib
from datetime import tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def home() -> Path:
    """``$AIRFLOW_STREAM_HOME``, default ``~/airflow-stream``."""
    return Path(os.environ.get("AIRFLOW_STREAM_HOME") or Path.home() / "airflow-stream").expanduser()


def warehouse() -> Path:
    """Root of the Delta tables: ``$AIRFLOW_STREAM_HOME/warehouse``."""
    return home() / "warehouse"


def timezone_name() -> str:
    return os.environ.get("AIRFLOW_STREAM_TIMEZONE") or "UTC"


def timezone() -> tzinfo:
    """Zone in which naive timestamp strings are read (``AIRFLOW_STREAM_TIMEZONE``, default UTC)."""
    name = timezone_name()
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as err:
        raise ValueError(f"AIRFLOW_STREAM_TIMEZONE={name!r} is not a known IANA time zone") from err


def jars_dir() -> Path:
    """Folder holding the Delta Lake jars fetched by ``dev/setup`` (``AIRFLOW_STREAM_JARS``)."""
    return Path(os.environ.get("AIRFLOW_STREAM_JARS") or PROJECT_ROOT / "jars" / "lib")


def conn_id() -> str:
    """Airflow connection of the stream node (``AIRFLOW_STREAM_CONN_ID``, default ``spark_connect``)."""
    return os.environ.get("AIRFLOW_STREAM_CONN_ID") or "spark_connect"


def settings() -> dict:
    """``$AIRFLOW_STREAM_HOME/airflow-stream.toml``, or an empty dict when there is none."""
    path = home() / "airflow-stream.toml"
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"{path}: {err}") from None
