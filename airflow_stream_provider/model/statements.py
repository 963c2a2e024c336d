"""Statements: frozen dataclasses of what a statement says, whatever language it was written in."""

from __future__ import annotations

from dataclasses import dataclass, field

from airflow_stream_provider.model.options import LegacyOptions, Notify, StreamOptions
from airflow_stream_provider.model.policies import EmitPolicy, OutputNaming, RowAcceptance
from airflow_stream_provider.model.series import SeriesCompute
from airflow_stream_provider.model.time import Duration, TimePoint
from airflow_stream_provider.model.triggers import OuterWindow, RowTrigger, Trigger
from airflow_stream_provider.model.types import DataType, Position, SqlExpression, TableName, Value


@dataclass(frozen=True)
class OutputColumn:
    name: str
    composite_key: bool = False


@dataclass(frozen=True)
class TagDefinition:
    name: str
    #: None: a tag of the existing output supertable, named without its type (TDengine before 3.3.7)
    type: DataType | None
    expr: SqlExpression
    comment: str | None = None


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
    #: ROLLUP BY tag (TDengine 3.4.2): the groups are the dotted prefixes of this tag's values
    rollup_by: str | None = None
    options: StreamOptions = StreamOptions()
    notify: Notify | None = None
    into: TableName | None = None
    #: NODELAY_CREATE_SUBTABLE (TDengine 3.4.1): each known group's output subtable is created at CREATE
    nodelay_create_subtable: bool = False
    #: TIMEZONE 'Area/City' (TDengine 3.4.3): the zone of the stream's instants and calendar windows
    timezone: str | None = None
    output_subtable: SqlExpression | None = None
    columns: tuple[OutputColumn, ...] = ()
    tags: tuple[TagDefinition, ...] = ()
    query: SqlExpression | None = None
    #: a stream of TDengine's engine before 3.3.7, with that engine's behaviour (None: 3.3.7)
    legacy: LegacyOptions | None = None
    #: an IoTDB continuous query: what it computes and writes at each instant
    series: SeriesCompute | None = None
    #: a nested WINDOW(...) (TDengine 3.4.2): its outer layers, outermost first; ``trigger`` is the leaf
    outer_windows: tuple[OuterWindow, ...] = ()
    #: the leaf layer's name, when the leaf is written ``<trigger> AS name``
    leaf_name: str | None = None

    @property
    def nested(self) -> bool:
        """Its trigger is the leaf of a nested WINDOW(...)."""
        return bool(self.outer_windows)

    @property
    def kind(self) -> str:  # type: ignore[override]  # a continuous query names itself as IoTDB does
        return "CREATE STREAM" if self.series is None else "CREATE CONTINUOUS QUERY"

    @property
    def subject(self) -> str:
        return str(self.name) if self.series is None else self.series.cq_id

    @property
    def emit(self) -> EmitPolicy:
        """When its windows are emitted, as its options say."""
        if self.legacy is None:
            return EmitPolicy.of(self.options)
        return EmitPolicy.of_legacy(self.legacy, self.options, row_trigger=isinstance(self.trigger, RowTrigger))

    @property
    def rows(self) -> RowAcceptance:
        """Which written rows change its windows, and how, as its options say."""
        return RowAcceptance.of(self.options) if self.legacy is None else RowAcceptance.of_legacy(self.legacy)

    @property
    def output_naming(self) -> OutputNaming:
        """How its output subtables are named and tagged."""
        return OutputNaming.GROUP if self.legacy is None else OutputNaming.GROUP_ID

    @property
    def grouped(self) -> bool:
        """It has trigger groups (PARTITION BY or ROLLUP BY), so one output subtable per group."""
        return bool(self.partition_by) or self.rollup_by is not None

    @property
    def group_columns(self) -> tuple[str, ...]:
        """The columns ``%%1``, ``%%2``... name: PARTITION BY's, or ROLLUP BY's tag (``%%1``, the path)."""
        return (self.rollup_by,) if self.rollup_by is not None else self.partition_by

    @property
    def placeholders(self) -> frozenset[str]:
        found: set[str] = set()
        for part in (self.query, self.output_subtable, *(t.expr for t in self.tags)):
            if part is not None:
                found |= part.placeholders
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
    """``SHOW [db.]STREAMS [LIKE 'pattern']`` (LIKE since TDengine 3.4.2): ``%`` any characters,
    ``_`` one, ``\\`` takes the next one as it is."""

    db: str | None = None
    like: str | None = None
    kind = "SHOW STREAMS"

    @property
    def subject(self) -> str:
        return self.db or ""


@dataclass(frozen=True)
class ShowCreateStream(Statement):
    """``SHOW CREATE STREAM [db.]name`` (TDengine 3.4.1.13): the statement that created it."""

    name: TableName
    kind = "SHOW CREATE STREAM"

    @property
    def subject(self) -> str:
        return str(self.name)


@dataclass(frozen=True)
class StartStream(Statement):
    name: TableName
    if_exists: bool = False
    ignore_untreated: bool = False
    verb: str = "START"  # RESUME in TDengine before 3.3.7
    kind = "START STREAM"

    @property
    def subject(self) -> str:
        return str(self.name)


@dataclass(frozen=True)
class StopStream(Statement):
    name: TableName
    if_exists: bool = False
    verb: str = "STOP"  # PAUSE in TDengine before 3.3.7
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
class VerifyStream(Statement):
    """VERIFY STREAM (and VERIFY CQ): the stream's triggers whose windows (or instants) fall in
    ``[start, end)`` computed again in batch and compared with its output; ``repair``: the ones
    that differ are recalculated, and verified again. No ``start``: from the first row; no
    ``end``: as far as the stream has processed."""

    name: TableName
    start: TimePoint | None = None
    end: TimePoint | None = None
    repair: bool = False
    kind = "VERIFY STREAM"

    @property
    def subject(self) -> str:
        return str(self.name)


@dataclass(frozen=True)
class CreateDatabase(Statement):
    name: str
    if_not_exists: bool = False
    precision: str = "ms"
    keep: Duration | None = None  # KEEP: rows older than this are deleted by the retention run
    kind = "CREATE DATABASE"

    @property
    def subject(self) -> str:
        return self.name


@dataclass(frozen=True)
class AlterDatabase(Statement):
    """``ALTER DATABASE name KEEP d``: the database's retention."""

    name: str
    keep: Duration
    kind = "ALTER DATABASE"

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


def spark_refusal_of(stmt: CreateStream) -> tuple[str, str] | None:
    """What of ``stmt`` the ``spark`` detector engine does not run: (the option's word, what it is),
    or None (the engine runs it). The engine's query has no processing-time timers (MAX_DELAY,
    IDLE_TIMEOUT), computes nothing inside its batches (LOW_LATENCY_CALC), reads no snapshot before
    the changes (FILL_HISTORY) and runs the window step of TDengine 3.3.7 only."""
    options = stmt.options
    if stmt.legacy is not None:
        return "trigger", "the triggers of TDengine's engine before 3.3.7 (AT_ONCE, WINDOW_CLOSE, MAX_DELAY, ...)"
    if options.max_delay is not None:
        return "MAX_DELAY", "MAX_DELAY (a processing-time timer per window)"
    if options.idle_timeout is not None:
        return "IDLE_TIMEOUT", "IDLE_TIMEOUT (a processing-time timer per group)"
    if options.low_latency_calc:
        return "LOW_LATENCY_CALC", "LOW_LATENCY_CALC (results computed inside the detector's batch)"
    if options.fill_history is not None:
        word = "FILL_HISTORY_FIRST" if options.fill_history.first else "FILL_HISTORY"
        return word, f"{word} (the table's snapshot read before its changes)"
    return None
