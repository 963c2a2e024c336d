"""Small value helpers every layer uses: instants as integers since the Unix epoch."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

#: the Unix epoch, aware
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def epoch_micros(at: datetime) -> int:
    """Microseconds since the epoch of an aware datetime (a naive one is read as UTC)."""
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return (at - EPOCH) // timedelta(microseconds=1)
