"""A stream resolved against the warehouse (:class:`StreamRuntime`) and the report of one run.

Everything a run, a recalculation and the lifecycle statements share: the trigger table found in
the catalog, the PARTITION BY columns and their placeholder types, the compute (on Spark, and by
DuckDB when its rows are few), and the output plan.

The result schema and the output plan are found when first asked for, not when the runtime is made:
finding the schema without the one CREATE STREAM recorded is a Spark job, which the statements that
only need the trigger table (STOP and START STREAM) never start.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
from deltalake import DeltaTable
from pyspark.sql import types as T

from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import StreamDefinitionError, StreamError, did_you_mean
from airflow_stream_provider.notify.delivery import DeliveryReport
from airflow_stream_provider.plan.stream import TriggerTable
from airflow_stream_provider.sql import to_spark
from airflow_stream_provider.sql.tdengine.nested import bind_layers
from airflow_stream_provider.streams import output as out
from airflow_stream_provider.streams.compute import Compute
from airflow_stream_provider.streams.duckdb import DuckDBCompute
from airflow_stream_provider.streams.fired import (
    ROLLUP_BELOW,
    TIMESTAMPS,
    TROWS_FROM,
    TROWS_TO,
    Fired,
    TriggerSource,
    base_name,
)
from airflow_stream_provider.values import epoch_micros
from airflow_stream_provider.warehouse import Warehouse, mapping
from airflow_stream_provider.warehouse.catalog import TBNAME, Column, SubTable, TableInfo
from airflow_stream_provider.warehouse.types import spark_type
from airflow_stream_provider.windows import rollup
from airflow_stream_provider.windows.trigger_plan import TriggerPlan

#: fired triggers computed and written together
BATCH = 20_000


#: the most triggers computed in one job without reporting progress
STEP = 2_000


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def nanos(at: datetime) -> int:
    return epoch_micros(at) * 1_000


_SAMPLE = {"string": "", "timestamp": _EPOCH, "boolean": False, "float": 0.0, "double": 0.0, "binary": b""}


@dataclass
class RunReport:
    stream: str
    triggers: int = 0
    result_rows: int = 0
    written: int = 0
    discarded: int = 0  # result rows with a NULL first column
    retracted: int = 0  # results removed: their windows are gone (TDengine before 3.3.7)
    forced: int = 0  # FORCE_OUTPUT rows
    skipped: int = 0  # IGNORE_NODATA_TRIGGER
    expired: int = 0  # windows left alone: their source rows are partly gone (retention)
    discarded_instants: int = 0  # a continuous query's missed instants, under TIMEOUT POLICY DISCARD
    deleted_subtables: list[str] = field(default_factory=list)
    per_trigger: str | None = None  # why the compute ran per trigger
    local: int = 0  # jobs computed in the process, without Spark (few rows)
    notified: int = 0  # events queued for notification
    delivery: DeliveryReport | None = None  # the report of a run that delivered
    seconds: float = 0.0
    progress: dict = field(default_factory=dict)  # what the run consumed, for commit_progress
    superseded: str | None = None  # why the run did nothing: a later try of its Airflow run committed
    windows: list[dict[str, str]] = field(default_factory=list)  # the windows computed ({start, end}, ISO)

    def summary(self) -> str:
        parts = [f"{self.triggers} trigger{'s' if self.triggers != 1 else ''}",
                 f"{self.written} row{'s' if self.written != 1 else ''} written"]
        if self.discarded:
            parts.append(f"{self.discarded} discarded (NULL timestamp)")
        if self.retracted:
            parts.append(f"{self.retracted} retracted (window gone)")
        if self.forced:
            parts.append(f"{self.forced} forced (FORCE_OUTPUT)")
        if self.skipped:
            parts.append(f"{self.skipped} skipped (IGNORE_NODATA_TRIGGER)")
        if self.expired:
            parts.append(f"{self.expired} window{'s' if self.expired != 1 else ''} skipped (source rows partly "
                         "gone: retention)")
        if self.discarded_instants:
            parts.append(f"{self.discarded_instants} missed instant{'s' if self.discarded_instants != 1 else ''} "
                         "discarded (TIMEOUT POLICY DISCARD)")
        if self.deleted_subtables:
            parts.append(f"output subtables deleted: {', '.join(self.deleted_subtables)}")
        if self.notified:
            parts.append(f"{self.notified} notification event{'s' if self.notified != 1 else ''} queued")
        if self.delivery is not None:
            parts.append(self.delivery.summary())
        if self.superseded:
            parts.append(self.superseded)
        return f"{self.stream}: " + ", ".join(parts) + f" in {self.seconds:.1f}s"


class StreamRuntime:
    """A stored (or about to be stored) stream resolved against the warehouse."""

    def __init__(self, warehouse: Warehouse, stmt: m.CreateStream, db: str,
                 skip_versions: tuple[tuple[int, int], ...] = (), *, text: str | None = None,
                 schema: str | None = None) -> None:
        self.warehouse = warehouse
        #: the stored statement's text, when resolved for a stored stream: a later run may reuse this
        #: runtime only for the same text
        self.text = text
        self.skip_versions = tuple((lo, hi) for lo, hi in skip_versions)  # JSON state holds them as lists
        self.stmt = stmt
        self.db = db
        self.name = stmt.name.name.lower()
        self.found: TableInfo | SubTable | None = None
        self.info: TableInfo | None = None
        if stmt.trigger_table is not None:
            tdb = (stmt.trigger_table.db or db).lower()
            self.found = warehouse.catalog.resolve(stmt.trigger_table, tdb, "trigger table")
            self.info = self.found.stable if isinstance(self.found, SubTable) else self.found
        self.group_columns = self._group_columns()
        self.group_types = {f"%%{i}": spark_type(c.dtype) for i, c in enumerate(self.group_columns, start=1)}
        if any(c.name == TBNAME for c in self.group_columns):
            self.group_types["%%tbname"] = "string"
        if stmt.rollup_by is not None:  # (TDengine 3.4.2) the group's last path segment
            self.group_types["%%rollup_tag"] = "string"
            self.group_types[ROLLUP_BELOW] = "string"
        self._rollup_counts: tuple[int, dict[str, int]] | None = None
        self.source = self._source()
        self.compute = (Compute(warehouse, bind_layers(stmt.query.tree, stmt), self.source,
                                group_types=self.group_types, also=(self.info,) if self.info else ())
                        if stmt.query is not None else None)
        self.duckdb_compute = DuckDBCompute(self.compute) if self.compute is not None else None
        self._output: out.OutputPlan | None = None
        # the result's types as CREATE STREAM found them (recorded in the stream's state): a run of few
        # rows then computes and writes without a Spark session
        self._schema: T.StructType | None = T.StructType.fromJson(json.loads(schema)) if schema else None
        self.outputs: dict[str, str] = {}  # output subtable -> the trigger subtable it serves
        self.tables: dict[str, str] = {}  # group id -> the output (sub)table it writes
        self.groups: dict[str, tuple[str, list]] = {}  # group id -> its output subtable and tag values
        self.registered: dict[str, Path] = {}  # group id -> the catalog's record of its output subtable

    @property
    def qualified(self) -> str:
        return f"{self.db}.{self.name}"

    @property
    def trigger_table(self) -> TriggerTable | None:
        """Where the trigger table lives, as the plan records it: its timestamp column as the Delta
        table names it (an attached table's own name), for the probes that read its files."""
        if self.info is None:
            return None
        (ts,) = mapping.sources(self.info.path, [self.info.timestamp_column])
        return TriggerTable(str(self.info.path), ts)

    @property
    def precision(self) -> str:
        return self.info.precision if self.info else self.warehouse.catalog.precision(self.db)

    def _group_columns(self) -> list[Column]:
        """The columns %%1, %%2... name: PARTITION BY's, or the ROLLUP BY tag (its values then the
        groups' paths)."""
        if not self.stmt.group_columns:
            return []
        assert self.info is not None
        clause = "PARTITION BY" if self.stmt.rollup_by is None else "ROLLUP BY"
        cols = []
        for name in self.stmt.group_columns:
            col = self.info.column(name)
            if col is None:
                raise StreamDefinitionError(
                    f"{clause}: column {name} is not in {self.info.qualified}", clause=clause,
                    hint=did_you_mean(name, [c.name for c in self.info.columns]))
            if col.role == "ts":
                raise StreamDefinitionError(f"PARTITION BY: {name} is the timestamp column; a group needs a "
                                            "subtable, tag or value column", clause="PARTITION BY")
            cols.append(col)
        return cols

    def _source(self) -> TriggerSource | None:
        if self.info is None:
            return None
        opts, trig = self.stmt.options, self.stmt.trigger
        pre = to_spark(opts.pre_filter.tree, timestamp_column=self.info.timestamp_column,
                       precision=self.info.precision) if opts.pre_filter else None
        return TriggerSource(
            path=str(self.info.path), ts_column=self.info.timestamp_column,
            keys=tuple(c.name for c in self.group_columns),
            subtable=self.found.name if isinstance(self.found, SubTable) else None, pre_filter=pre,
            count_columns=tuple(c.lower() for c in trig.columns) if isinstance(trig, m.CountWindow) else (),
            rollup=self.stmt.rollup_by is not None,
            end_inclusive=not isinstance(trig, (m.IntervalWindow, m.SlidingTrigger)),
            changes=isinstance(trig, m.PeriodTrigger),
            # RESUME ... IGNORE UNTREATED: the rows written while paused fire nothing; into incremental
            # windows they come with the next rows
            skip_versions=() if self.stmt.rows.incremental else self.skip_versions)

    def table_version(self) -> int | None:
        if self.info is None:
            return None
        return DeltaTable(str(self.info.path)).version()

    # --- output ---------------------------------------------------------------------------------

    def sample(self) -> Fired:
        """A trigger with a typed value for every placeholder: enough for Spark to type the results."""
        values: dict = {}
        assert self.compute is not None
        names = set(self.compute.used) | set(self.group_types) | {TROWS_FROM, TROWS_TO}
        for name in names:
            kind = "timestamp" if base_name(name) in TIMESTAMPS else self.group_types.get(name) or \
                ("bigint" if not name.startswith("%%") else "string")
            values[name] = _SAMPLE.get(kind, 0)
        return Fired(0, values, version=self.table_version(), since_version=self.table_version())

    @property
    def result_schema(self) -> T.StructType:
        """The computation's result columns (``__idx`` first), found once with typed sample values
        (``schema_json`` records them)."""
        if self._schema is None:
            assert self.compute is not None
            with self.warehouse.scratch():
                self._schema = self.compute.frame([self.sample()]).schema
        return self._schema

    def schema_json(self) -> str | None:
        """The result columns as a stream's state records them (None: no computation)."""
        return self.result_schema.json() if self.compute is not None else None

    @property
    def output_plan(self) -> out.OutputPlan | None:
        """The output table plan (None when results are not stored), found once."""
        stmt = self.stmt
        if stmt.query is None or stmt.into is None or stmt.options.calc_notify_only:
            return None
        if self._output is None:
            schema = self.result_schema
            if stmt.output_naming is m.OutputNaming.GROUP_ID:
                found = self.warehouse.catalog.lookup(stmt.into, (stmt.into.db or self.db).lower())
                if found is not None and not isinstance(found, TableInfo):
                    raise StreamDefinitionError(f"output table {found.qualified} is a subtable; INTO needs a "
                                                "supertable", clause="INTO")
                self._output = out.OutputPlan.legacy(stmt, self.db, schema, found)
            else:
                self._output = out.OutputPlan.build(stmt, self.db, schema, self.group_columns)
        return self._output

    # --- triggers -> values ---------------------------------------------------------------------

    def group_key(self, values: dict) -> tuple:
        """The PARTITION BY values of a group, in order, from its %%1.. placeholder values."""
        return tuple(values.get(f"%%{j}") for j in range(1, len(self.group_columns) + 1))

    def group_values(self, keys: dict | tuple) -> dict:
        """%%1.., %%tbname of a group given as {column: value} or a tuple in PARTITION BY order."""
        if isinstance(keys, dict):
            lowered = {k.lower(): v for k, v in keys.items()}
            ordered = tuple(lowered.get(c.name) for c in self.group_columns)
        else:
            ordered = tuple(keys)
        values = {}
        for i, (col, value) in enumerate(zip(self.group_columns, ordered), start=1):
            if value is not None and self.group_types[f"%%{i}"] == "timestamp" and not isinstance(value, datetime):
                value = pd.Timestamp(value, tz="UTC").to_pydatetime()
            values[f"%%{i}"] = value
            if col.name == TBNAME:
                values["%%tbname"] = value
        if self.stmt.rollup_by is not None:
            path = ordered[0] if ordered else None
            values["%%rollup_tag"] = rollup.leaf(path) if isinstance(path, str) else None
            values[ROLLUP_BELOW] = path + rollup.SEPARATOR if isinstance(path, str) else None
            values["_trollup_tbcount"] = self.rollup_counts().get(path, 0) if isinstance(path, str) else 0
        return values

    def rollup_counts(self) -> dict[str, int]:
        """``_trollup_tbcount`` of each rollup group: the subtables of the trigger supertable under
        its path, from the catalog (found again when the subtables change). A subtable whose tag is
        not a rollup path raises :class:`~airflow_stream_provider.windows.rollup.RollupPathError`:
        the stream fails, as TDengine's does."""
        assert self.info is not None and self.stmt.rollup_by is not None
        catalog = self.warehouse.catalog
        names = catalog.subtables(self.info)
        if self._rollup_counts is None or self._rollup_counts[0] != len(names):
            tag = self.group_columns[0].name
            subs = [s for s in (catalog.lookup(m.TableName(n), self.info.db) for n in names) if isinstance(s, SubTable)]
            self._rollup_counts = (len(names), rollup.table_counts(((s.name, s.tags.get(tag)) for s in subs), tag=tag))
        return self._rollup_counts[1]


class StreamStopped(StreamError):
    """The stream is stopped (STOP STREAM); START STREAM resumes it."""


@contextmanager
def in_database(warehouse: Warehouse, db: str) -> Iterator[None]:
    """Resolve unqualified names in the stream's database while it runs, whatever the caller USEd."""
    previous = warehouse.database
    warehouse.database = db
    try:
        yield
    finally:
        warehouse.database = previous


def group_id(runtime: StreamRuntime, group: tuple) -> str:
    return TriggerPlan.group_id({c.name: v for c, v in zip(runtime.group_columns, group)})
