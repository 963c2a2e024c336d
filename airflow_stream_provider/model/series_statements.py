"""IoTDB's statements (reference 004): databases and series, points, queries, continuous queries."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from airflow_stream_provider.model.attach import MappedColumn
from airflow_stream_provider.model.series import SeriesExpr, SeriesPath, SeriesQuery, SeriesType
from airflow_stream_provider.model.statements import Statement
from airflow_stream_provider.model.time import TimePoint

# --- statements --------------------------------------------------------------------------------


@dataclass(frozen=True)
class CreateSeriesDatabase(Statement):
    path: SeriesPath
    kind = "CREATE DATABASE"

    @property
    def subject(self) -> str:
        return str(self.path)


@dataclass(frozen=True)
class SetTtl(Statement):
    """``SET TTL TO path ms`` (``ttl_ms``) or ``UNSET TTL TO path`` (None): the retention of the
    databases at ``path`` (a database, or ``prefix.**``: every database under it)."""

    path: SeriesPath
    ttl_ms: int | None
    kind = "SET TTL"

    @property
    def subject(self) -> str:
        return str(self.path)


@dataclass(frozen=True)
class DropSeriesDatabases(Statement):
    patterns: tuple[SeriesPath, ...]
    kind = "DELETE DATABASE"

    @property
    def subject(self) -> str:
        return ", ".join(map(str, self.patterns))


@dataclass(frozen=True)
class AttachDevices(Statement):
    """``CREATE DEVICES root.plant FROM DELTA 'path' MAP (TIME c, DEVICE c, MEASUREMENTS (...))``: the
    Delta table at ``path`` read as the devices under ``prefix``, never copied or rewritten; each
    row's device is ``prefix`` plus the value of the DEVICE column, its measurements the mapped
    columns. ``timestamp`` maps to ``ts``, ``device`` to the tag ``device``."""

    prefix: SeriesPath
    path: str
    timestamp: MappedColumn
    device: MappedColumn
    measurements: tuple[MappedColumn, ...]
    kind = "CREATE DEVICES"

    @property
    def subject(self) -> str:
        return str(self.prefix)

    def mapped(self) -> tuple[MappedColumn, ...]:
        return (self.timestamp, self.device, *self.measurements)


@dataclass(frozen=True)
class ShowSeriesDatabases(Statement):
    pattern: SeriesPath | None = None
    kind = "SHOW DATABASES"


@dataclass(frozen=True)
class TimeseriesDefinition:
    path: SeriesPath
    type: SeriesType
    encoding: str | None = None
    compression: str | None = None


@dataclass(frozen=True)
class CreateTimeseries(Statement):
    series: tuple[TimeseriesDefinition, ...]
    aligned: bool = False
    kind = "CREATE TIMESERIES"

    @property
    def subject(self) -> str:
        return ", ".join(str(s.path) for s in self.series)


@dataclass(frozen=True)
class DropTimeseries(Statement):
    patterns: tuple[SeriesPath, ...]
    kind = "DELETE TIMESERIES"

    @property
    def subject(self) -> str:
        return ", ".join(map(str, self.patterns))


@dataclass(frozen=True)
class ShowTimeseries(Statement):
    pattern: SeriesPath | None = None
    kind = "SHOW TIMESERIES"


@dataclass(frozen=True)
class ShowDevices(Statement):
    pattern: SeriesPath | None = None
    kind = "SHOW DEVICES"


#: the time of an inserted row: an epoch number in the database's precision, or a time point
RowTime = int | TimePoint


@dataclass(frozen=True)
class InsertPoints(Statement):
    """``INSERT INTO device(time, m1, ...) [ALIGNED] VALUES (...), ...``: one point per non-NULL value."""

    device: SeriesPath
    measurements: tuple[str, ...]
    rows: tuple[tuple[RowTime | None, tuple[int | float | str | bool | None, ...]], ...]
    aligned: bool = False
    kind = "INSERT"

    @property
    def subject(self) -> str:
        return str(self.device)


@dataclass(frozen=True)
class DeletePoints(Statement):
    """``DELETE FROM pattern[, ...] [WHERE time ...]``: the points of the matching series in a time range."""

    patterns: tuple[SeriesPath, ...]
    where: SeriesExpr | None = None
    kind = "DELETE"

    @property
    def subject(self) -> str:
        return ", ".join(map(str, self.patterns))


@dataclass(frozen=True)
class QuerySeries(Statement):
    query: SeriesQuery
    kind = "SELECT"


class TimeoutPolicy(StrEnum):
    BLOCKED = "BLOCKED"
    DISCARD = "DISCARD"


@dataclass(frozen=True)
class DropContinuousQuery(Statement):
    cq_id: str
    kind = "DROP CONTINUOUS QUERY"

    @property
    def subject(self) -> str:
        return self.cq_id


@dataclass(frozen=True)
class ShowContinuousQueries(Statement):
    kind = "SHOW CONTINUOUS QUERIES"


