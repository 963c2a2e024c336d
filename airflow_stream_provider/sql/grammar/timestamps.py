"""Timestamp strings of the stream languages, read in the configured time zone."""

from __future__ import annotations

import re
from datetime import datetime

from airflow_stream_provider import config

_SHORT_OFFSET = re.compile(r"([+-]\d{2})(\d{2})$")


def parse_timestamp(text: str) -> datetime:
    """``2025-01-01``, ``2025-01-01 08:00:00.123``, ISO-8601 with ``T``, ``Z`` or an offset.

    A string without an offset is read in ``AIRFLOW_STREAM_TIMEZONE`` (default UTC).
    Raises ``ValueError`` with a readable message.
    """
    cleaned = _SHORT_OFFSET.sub(r"\1:\2", text.strip())
    try:
        value = datetime.fromisoformat(cleaned)
    except ValueError:
        raise ValueError(
            f"{text!r} is not a timestamp; write 'YYYY-MM-DD HH:MM:SS[.ffffff][+HH:MM]'"
        ) from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=config.timezone())
    return value
