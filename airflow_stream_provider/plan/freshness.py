"""How stale a stream's results may be: its :class:`Freshness`, and where it is declared.

TDengine's ``STREAM_OPTIONS`` has no such option, so the bound is the project's own setting:
``airflow-stream.toml`` says it for any stream, the DAG-folder declaration for a declared one
(which the deploy task records in the stream's state, and which comes first)::

    [streams.power.max_voltage_1m]
    freshness = "5m"          # late: the trigger table's newest row more than this past the progress
    silent_after = 3          # silent: rows arriving for 3 expected periods (or "90s") and nothing fired

A stream's expected period is its window's step (``INTERVAL ... SLIDING``, ``SLIDING``, ``PERIOD``,
a continuous query's ``EVERY``); a stream without one (session, state, event and count windows) is
silent after ``silent_after`` given as a duration, else after the freshness bound itself.
The conditions are judged in :func:`airflow_stream_provider.streams.status.freshness`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from airflow_stream_provider import config
from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.plan.state import StreamState
from airflow_stream_provider.sql.iotdb.lexer import DurationError, duration_micros

#: the expected periods without a fired window after which a stream whose rows keep arriving is silent
SILENT_AFTER = 3
#: the key of a declared freshness in a stream's state
STATE_KEY = "freshness"
_DURATION = re.compile(r"(?:\d+(?:mo|ms|us|ns|y|w|d|h|m|s))+", re.IGNORECASE)
_NUMBER = re.compile(r"\d+(?:\.\d*)?")


@dataclass(frozen=True)
class Freshness:
    """A stream's freshness bound, and when it is silent.

    :param bound: the stream is late when its realtime lag (the trigger table's newest row minus its
        committed progress) is over this
    :param silent_after: the stream is silent when rows kept arriving on its trigger table this many
        expected periods (a whole number) or this long (a duration) after it last fired a window
    """

    bound: timedelta
    silent_after: int | timedelta = SILENT_AFTER

    def __post_init__(self) -> None:
        if self.bound <= timedelta(0):
            raise StreamDefinitionError(f"freshness {self.bound}: the bound must be positive", clause="freshness")
        if isinstance(self.silent_after, int) and self.silent_after < 1 or \
                isinstance(self.silent_after, timedelta) and self.silent_after <= timedelta(0):
            raise StreamDefinitionError(f"silent_after {self.silent_after}: must be positive", clause="silent_after")

    def silence(self, stmt: m.CreateStream) -> timedelta:
        """How long rows may keep arriving with no window fired before the stream is silent."""
        if isinstance(self.silent_after, timedelta):
            return self.silent_after
        period = expected_period(stmt)
        return self.bound if period is None else period * self.silent_after

    def to_json(self) -> dict[str, Any]:
        after = self.silent_after
        return {"bound_s": self.bound.total_seconds(),
                **({"silent_after": after} if isinstance(after, int) else {"silent_after_s": after.total_seconds()})}

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> Freshness:
        after = value.get("silent_after", SILENT_AFTER)
        if value.get("silent_after_s") is not None:
            after = timedelta(seconds=float(value["silent_after_s"]))
        return cls(timedelta(seconds=float(value["bound_s"])), after)


def expected_period(stmt: m.CreateStream) -> timedelta | None:
    """How often the stream is expected to fire while rows arrive: its window's step, its PERIOD or
    its EVERY; None when no period is implied (session, state, event, count windows, row streams)."""
    trig = stmt.trigger
    if isinstance(trig, (m.IntervalWindow, m.SlidingTrigger)):
        return trig.sliding.longest()  # a calendar step at its longest (31 days a month)
    if isinstance(trig, m.PeriodTrigger):
        return trig.period.longest()
    if isinstance(trig, m.ResampleTrigger):
        return trig.every.to_timedelta()
    return None


def duration(value: Any, what: str) -> timedelta:
    """A duration setting: ``"5m"``, ``"1h30m"``, ``"500ms"``, a number of seconds, or a timedelta."""
    if isinstance(value, timedelta):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return timedelta(seconds=value)
    text = str(value).strip()
    if not isinstance(value, bool) and _NUMBER.fullmatch(text):
        return timedelta(seconds=float(text))
    if isinstance(value, bool) or not _DURATION.fullmatch(text):
        raise StreamDefinitionError(f"{what} = {value!r}: not a duration such as \"5m\", \"90s\" or \"1h30m\"",
                                    clause=what)
    try:
        micros = duration_micros(text)
    except DurationError as err:
        raise StreamDefinitionError(f"{what} = {value!r}: {err}", clause=what) from None
    if micros is None:
        raise StreamDefinitionError(f"{what} = {value!r}: a month or a year has no fixed length", clause=what)
    return timedelta(microseconds=micros)


def of(bound: Any, silent_after: Any = SILENT_AFTER) -> Freshness:
    """The freshness a setting or a declaration writes: ``bound`` a duration, ``silent_after`` a
    whole number of periods or a duration."""
    after = silent_after if isinstance(silent_after, int) and not isinstance(silent_after, bool) \
        else duration(silent_after, "silent_after")
    return Freshness(duration(bound, "freshness"), after)


def configured(db: str, name: str, state: StreamState | None = None) -> Freshness | None:
    """The freshness of stream ``db.name``: its declaration's (recorded in ``state``), else its
    ``[streams.<db>.<name>]`` table of ``airflow-stream.toml``; None when neither says one."""
    if state is not None and state.other.get(STATE_KEY):
        return Freshness.from_json(state.other[STATE_KEY])
    table = config.stream_settings(db, name)
    if table.get("freshness") is None:
        if "silent_after" in table:
            raise StreamDefinitionError(f"[streams.{db}.{name}] silent_after needs a freshness bound",
                                        clause="freshness")
        return None
    try:
        return of(table["freshness"], table.get("silent_after", SILENT_AFTER))
    except StreamDefinitionError as err:
        raise StreamDefinitionError(f"[streams.{db}.{name}] of airflow-stream.toml: {err}",
                                    clause="freshness") from None
