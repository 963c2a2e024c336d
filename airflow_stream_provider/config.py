"""Where the project keeps its files, and the settings read from the environment."""

from __future__ import annotations

import os
from datetime import tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def home() -> Path:
    """``$AIRFLOW_STREAM_HOME``, default ``~/airflow-stream``."""
    return Path(os.environ.get("AIRFLOW_STREAM_HOME") or Path.home() / "airflow-stream").expanduser()


def timezone() -> tzinfo:
    """Zone in which naive timestamp strings are read (``AIRFLOW_STREAM_TIMEZONE``, default UTC)."""
    name = os.environ.get("AIRFLOW_STREAM_TIMEZONE") or "UTC"
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as err:
        raise ValueError(f"AIRFLOW_STREAM_TIMEZONE={name!r} is not a known IANA time zone") from err


def jars_dir() -> Path:
    """Folder holding the Delta Lake jars fetched by ``dev/setup`` (``AIRFLOW_STREAM_JARS``)."""
    return Path(os.environ.get("AIRFLOW_STREAM_JARS") or PROJECT_ROOT / "jars" / "lib")
