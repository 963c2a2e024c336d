"""Frozen dataclasses of parsed statements; the rules a single object can check are checked here."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlglot import exp

from airflow_stream_provider.sql.dialect import CALENDAR_UNITS, UNIT_MICROS, TDengine


@dataclass(frozen=True)
class Position:
    line: int
    column: int


@dataclass(frozen=True)
class Duration:
    """A TDengine duration such as ``5m``; ``unit`` is one of ``u a s m h d w``."""

    count: int
    unit: str

    @property
    def micros(self) -> int:
        return self.count * UNIT_MICROS[self.unit]

    @property
    def is_calendar(self) -> bool:
        return self.unit in CALENDAR_UNITS

    def to_timedelta(self) -> timedelta:
        return timedelta(microseconds=self.micros)

    def __str__(self) -> str:
        return f"{self.count}{self.unit}"


@dataclass(frozen=True)
class TimePoint:
    """A timestamp written in a statement: an absolute instant, or ``now`` plus a signed offset."""

    at: datetime | None = None
    now_offset_micros: int | None = None

    @property
    def is_relative(self) -> bool:
        return self.at is None

    def resolve(self, now: datetime) -> datetime:
        if self.at is not None:
            return self.at
        return now + timedelta(microseconds=self.now_offset_micros or 0)

    def __str__(self) -> str:
        if self.at is not None:
            return self.at.isoformat()
        off = self.now_offset_micros or 0
        return "now" if off == 0 else f"now {'+' if off > 0 else '-'} {abs(off)}u"


@dataclass(frozen=True)
class TableName:
    name: str
    db: str | None = None

    def qualified(self, default_db: str | None = None) -> str:
        db = self.db or default_db
        return f"{db}.{self.name}" if db else self.name

    def key(self, default_db: str | None = None) -> tuple[str | None, str]:
        """Identity for comparisons: TDengine names are case-insensitive."""
        db = self.db or default_db
        return (db.lower() if db else None, self.name.lower())

    def __str__(self) -> str:
        return self.qualified()


@dataclass(frozen=True)
class SqlExpression:
    """TDengine SQL text with its parsed tree; equal when the text is equal.

    The tree belongs to the statement: copy it (``tree.copy()``) before transforming it.
    """

    text: str
    tree: exp.Expr = field(compare=False, hash=False, repr=False)
    position: Position | None = field(default=None, compare=False)

    @property
    def normalized(self) -> str:
        return self.tree.sql(dialect=TDengine)

    def __str__(self) -> str:
        return self.text


# --- triggers -------------------------------------------------------------------------------


@dataclass(frozen=True)
class PeriodTrigger:
    period: Duration
    offset: Duration | None = None
    keyword = "PERIOD"
    kind = "period"
    notify_type = "Period"

    def __str__(self) -> str:
        return f"PERIOD({self.period}{', ' + str(self.offset) if self.offset else ''})"


@dataclass(frozen=True)
class SlidingTrigger:
    """``SLIDING`` without ``INTERVAL``: fires as event time passes each instant."""

    sliding: Duration
    offset: Duration | None = None
    keyword = "SLIDING"
    kind = "sliding"
    notify_type = "Sliding"

    def __str__(self) -> str:
        return f"SLIDING({self.sliding}{', ' + str(self.offset) if self.offset else ''})"


@dataclass(frozen=True)
class IntervalWindow:
    interval: Duration
    sliding: Duration
    offset: Duration | None = None
    keyword = "INTERVAL"
    kind = "window"
    notify_type = "Interval"

    def __str__(self) -> str:
        off = f", {self.offset}" if self.offset else ""
        return f"INTERVAL({self.interval}{off}) SLIDING({self.sliding})"


@dataclass(frozen=True)
class SessionWindow:
    ts_column: str
    gap: Duration
    keyword = "SESSION"
    kind = "window"
    notify_type = "Session"

    def __str__(self) -> str:
        return f"SESSION({self.ts_column}, {self.gap})"


@dataclass(frozen=True)
class TrueFor:
    """``TRUE_FOR(10m)``, ``TRUE_FOR(COUNT 5)`` or both joined by ``AND``/``OR``."""

    duration: Duration | None = None
    count: int | None = None
    op: str | None = None  # "AND" | "OR" when both are given

    def __str__(self) -> str:
        parts = [str(self.duration)] if self.duration else []
        if self.count is not None:
            parts.append(f"COUNT {self.count}")
        return f"TRUE_FOR({f' {self.op} '.join(parts)})"


@dataclass(frozen=True)
class StateWindow:
    column: SqlExpression
    true_for: TrueFor | None = None
    keyword = "STATE_WINDOW"
    kind = "window"
    notify_type = "State"

    def __str__(self) -> str:
        return f"STATE_WINDOW({self.column}){' ' + str(self.true_for) if self.true_for else ''}"


@dataclass(frozen=True)
class EventWindow:
    start: SqlExpression
    end: SqlExpression
    true_for: TrueFor | None = None
    keyword = "EVENT_WINDOW"
    kind = "window"
    notify_type = "Event"

    def __str__(self) -> str:
        tf = f" {self.true_for}" if self.true_for else ""
        return f"EVENT_WINDOW(START WITH {self.start} END WITH {self.end}){tf}"


@dataclass(frozen=True)
class CountWindow:
    count: int
    sliding: int | None = None
    columns: tuple[str, ...] = ()
    keyword = "COUNT_WINDOW"
    kind = "window"
    notify_type = "Count"

    def __str__(self) -> str:
        args = [str(self.count)] + ([str(self.sliding)] if self.sliding is not None else []) + list(self.columns)
        return f"COUNT_WINDOW({', '.join(args)})"


Trigger = PeriodTrigger | SlidingTrigger | IntervalWindow | SessionWindow | StateWindow | EventWindow | CountWindow


# --- options, notification, output -----------------------------------------------------------

WINDOW_OPEN = "WINDOW_OPEN"
WINDOW_CLOSE = "WINDOW_CLOSE"
ON_TIME = "ON_TIME"


@dataclass(frozen=True)
class FillHistory:
    start: TimePoint | None = None
    first: bool = False  # FILL_HISTORY_FIRST: real-time processing waits for history


@dataclass(frozen=True)
class StreamOptions:
    watermark: Duration | None = None
    expired_time: Duration | None = None
    ignore_disorder: bool = False
    delete_recalc: bool = False
    delete_output_table: bool = False
    fill_history: FillHistory | None = None
    calc_notify_only: bool = False
    low_latency_calc: bool = False
    pre_filter: SqlExpression | None = None
    force_output: bool = False
    max_delay: Duration | None = None
    event_types: tuple[str, ...] = (WINDOW_CLOSE,)
    ignore_nodata_trigger: bool = False
    given: frozenset[str] = frozenset()  # option names written in the statement


@dataclass(frozen=True)
class Notify:
    urls: tuple[str, ...]
    on: tuple[str, ...] = ()
    where: SqlExpression | None = None
    history: bool = False  # NOTIFY_HISTORY
    on_failure_pause: bool = False  # ON_FAILURE_PAUSE


@dataclass(frozen=True)
class OutputColumn:
    name: str
    composite_key: bool = False


@dataclass(frozen=True)
class DataType:
    """A TDengine column type: ``name`` upper-case (``VARCHAR``, ``INT UNSIGNED``...), ``args`` its sizes."""

    name: str
    args: tuple[int, ...] = ()

    def __str__(self) -> str:
        return self.name + (f"({', '.join(map(str, self.args))})" if self.args else "")


@dataclass(frozen=True)
class TagDefinition:
    name: str
    type: DataType
    expr: SqlExpression
    comment: str | None = None


# --- statements ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Statement:
    position: Position = field(compare=False, kw_only=True)
    text: str = field(compare=False, repr=False, kw_only=True)

    kind = "statement"

    @property
    def subject(self) -> str:
        return ""


@dataclass(frozen=True)
class CreateStream(Statement):
    name: TableName
    trigger: Trigger
    if_not_exists: bool = False
    trigger_table: TableName | None = None
    partition_by: tuple[str, ...] = ()
    options: StreamOptions = StreamOptions()
    notify: Notify | None = None
    into: TableName | None = None
    output_subtable: SqlExpression | None = None
    columns: tuple[OutputColumn, ...] = ()
    tags: tuple[TagDefinition, ...] = ()
    query: SqlExpression | None = None
    kind = "CREATE STREAM"

    @property
    def subject(self) -> str:
        return str(self.name)

    @property
    def placeholders(self) -> frozenset[str]:
        from airflow_stream_provider.sql.dialect import placeholders

        found: set[str] = set()
        for part in (self.query, self.output_subtable, *(t.expr for t in self.tags)):
            if part is not None:
                found |= placeholders(part.tree)
        return frozenset(found)


@dataclass(frozen=True)
class DropStream(Statement):
    name: TableName
    if_exists: bool = False
    kind = "DROP STREAM"

    @property
    def subject(self) -> str:
        return str(self.name)


@dataclass(frozen=True)
class ShowStreams(Statement):
    db: str | None = None
    kind = "SHOW STREAMS"

    @property
    def subject(self) -> str:
        return self.db or ""


@dataclass(frozen=True)
class StartStream(Statement):
    name: TableName
    if_exists: bool = False
    ignore_untreated: bool = False
    kind = "START STREAM"

    @property
    def subject(self) -> str:
        return str(self.name)


@dataclass(frozen=True)
class StopStream(Statement):
    name: TableName
    if_exists: bool = False
    kind = "STOP STREAM"

    @property
    def subject(self) -> str:
        return str(self.name)


@dataclass(frozen=True)
class RecalculateStream(Statement):
    name: TableName
    start: TimePoint
    end: TimePoint | None = None
    kind = "RECALCULATE STREAM"

    @property
    def subject(self) -> str:
        return str(self.name)


@dataclass(frozen=True)
class CreateDatabase(Statement):
    name: str
    if_not_exists: bool = False
    precision: str = "ms"
    kind = "CREATE DATABASE"

    @property
    def subject(self) -> str:
        return self.name


@dataclass(frozen=True)
class UseDatabase(Statement):
    name: str
    kind = "USE"

    @property
    def subject(self) -> str:
        return self.name


@dataclass(frozen=True)
class ColumnDefinition:
    name: str
    type: DataType
    primary_key: bool = False  # the second column as part of a composite key
    comment: str | None = None


@dataclass(frozen=True)
class CreateSuperTable(Statement):
    name: TableName
    columns: tuple[ColumnDefinition, ...]
    tags: tuple[ColumnDefinition, ...]
    if_not_exists: bool = False
    kind = "CREATE STABLE"

    @property
    def subject(self) -> str:
        return str(self.name)


@dataclass(frozen=True)
class CreateTable(Statement):
    """A regular table: no tags, no supertable."""

    name: TableName
    columns: tuple[ColumnDefinition, ...]
    if_not_exists: bool = False
    kind = "CREATE TABLE"

    @property
    def subject(self) -> str:
        return str(self.name)


Value = int | float | str | bool | None | TimePoint


@dataclass(frozen=True)
class CreateSubTable(Statement):
    name: TableName
    stable: TableName
    tag_values: tuple[Value, ...]
    tag_names: tuple[str, ...] | None = None
    if_not_exists: bool = False
    kind = "CREATE TABLE USING"

    @property
    def subject(self) -> str:
        return str(self.name)


@dataclass(frozen=True)
class InsertTarget:
    table: TableName
    rows: tuple[tuple[Value, ...], ...]
    columns: tuple[str, ...] | None = None
    using: TableName | None = None
    tag_names: tuple[str, ...] | None = None
    tag_values: tuple[Value, ...] = ()


@dataclass(frozen=True)
class Insert(Statement):
    """One INSERT, possibly into several tables; applied atomically."""

    targets: tuple[InsertTarget, ...]
    kind = "INSERT"

    @property
    def subject(self) -> str:
        return ", ".join(str(t.table) for t in self.targets)

    @property
    def row_count(self) -> int:
        return sum(len(t.rows) for t in self.targets)


@dataclass(frozen=True)
class Delete(Statement):
    table: TableName
    where: SqlExpression | None = None
    kind = "DELETE"

    @property
    def subject(self) -> str:
        return str(self.table)


@dataclass(frozen=True)
class DropTable(Statement):
    names: tuple[TableName, ...]
    if_exists: bool = False
    stable: bool = False
    kind = "DROP TABLE"

    @property
    def subject(self) -> str:
        return ", ".join(map(str, self.names))


@dataclass(frozen=True)
class DropDatabase(Statement):
    name: str
    if_exists: bool = False
    kind = "DROP DATABASE"

    @property
    def subject(self) -> str:
        return self.name


@dataclass(frozen=True)
class Select(Statement):
    query: SqlExpression
    kind = "SELECT"
