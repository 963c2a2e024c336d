"""Small value helpers every layer uses: instants as integers since the Unix epoch, and the range of
instants a timestamp can hold. The files the project writes are :mod:`airflow_stream_provider.files`'s."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

#: the Unix epoch, aware
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


#: the first and the last instant a timestamp can hold: the years 1 to 9999
FIRST_INSTANT = datetime(1, 1, 1, tzinfo=UTC)
LAST_INSTANT = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)


def epoch_micros(at: datetime) -> int:
    """Microseconds since the epoch of an aware datetime (a naive one is read as UTC)."""
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return (at - EPOCH) // timedelta(microseconds=1)


#: :data:`FIRST_INSTANT` and :data:`LAST_INSTANT` in microseconds since the epoch
FIRST_MICROS, LAST_MICROS = epoch_micros(FIRST_INSTANT), epoch_micros(LAST_INSTANT)


def instant(micros: int) -> datetime:
    """The instant ``micros`` microseconds after the epoch; ValueError when it is outside the years 1
    to 9999, the instants a timestamp can hold."""
    if not FIRST_MICROS <= micros <= LAST_MICROS:
        raise ValueError(f"{micros} microseconds since 1970 is outside the years 1 to 9999")
    return EPOCH + timedelta(microseconds=micros)


def json_default(value: object) -> object:
    """What :func:`json.dumps` writes for a value it cannot: a numpy scalar's Python value, anything
    else as its text (``default=json_default``)."""
    if hasattr(value, "item"):
        return value.item()
    return str(value)
