"""Execute TDengine table statements on Delta tables (DESIGN §2).

Writes (CREATE, INSERT, DROP) commit through the Delta Lake Rust kernel and need no Spark;
SELECT and DELETE ... WHERE run on Spark (the stream node over Spark Connect, or an in-process
session), because their expressions are TDengine SQL translated to Spark SQL.

The table statements stay in one class, a little over the usual module size: they share the name
resolution, the value checks and the undo of a statement's earlier writes when a later one fails.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from sqlglot import exp

from airflow_stream_provider import config
from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import did_you_mean
from airflow_stream_provider.spark.session import arrow_frame, setting, spark_session
from airflow_stream_provider.sql import to_spark
from airflow_stream_provider.storage import Location
from airflow_stream_provider.warehouse import iotdb, listeners, writer
from airflow_stream_provider.warehouse.catalog import (
    TBNAME,
    Catalog,
    Column,
    SubTable,
    TableInfo,
    WarehouseError,
    table_columns,
)
from airflow_stream_provider.warehouse.types import BadValue, TimeContext, coerce

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from typing_extensions import TypeIs

log = logging.getLogger(__name__)


#: a local DELETE matching at most this many rows is done by the kernel, by key (a larger one by Spark)
SMALL_DELETE = 10_000

#: computes a table of ``information_schema`` from the warehouse
SystemView = Callable[["Warehouse"], pa.Table]


@dataclass
class Result:
    statement: m.Statement
    message: str
    table: pa.Table | None = None  # the rows of a SELECT
    rows: int = 0  # rows written or deleted
    #: what went wrong without stopping the statement: an insert trigger that failed after its write
    notices: tuple[str, ...] = ()


@dataclass
class _Batch:
    """Rows bound for one Delta table."""

    info: TableInfo
    rows: list[dict] = field(default_factory=list)
    labels: set[str] = field(default_factory=set)


def _is_session(spark: object) -> TypeIs[SparkSession]:
    """A session rather than a function returning one: a session has ``sql`` (and may itself be
    callable, as a test double is)."""
    return hasattr(spark, "sql")


class Warehouse:
    """The TDengine databases under ``$AIRFLOW_STREAM_HOME/warehouse``.

    :param spark: a session for SELECT and DELETE, or a callable returning one; by default the
        stream node's session when it runs, else an in-process local session (created on first use).
    """

    def __init__(
        self,
        root: Path | None = None,
        *,
        spark: SparkSession | Callable[[], SparkSession] | None = None,
        database: str | None = None,
    ) -> None:
        self.catalog = Catalog(root or config.warehouse())
        self.database = database.lower() if database else None
        self._spark = spark
        #: per thread (the node's streams compute on their queries' threads), the temporary views
        #: made by :meth:`temp_view`, dropped when their :meth:`scratch` ends
        self._local = threading.local()

    # --- entry points ----------------------------------------------------------------------------

    def execute(self, statement: m.Statement) -> Result:
        """Run one table statement (streams and queries run through :mod:`airflow_stream_provider.statements`)."""
        handler = TABLE_STATEMENTS.get(type(statement))
        if handler is None:
            raise WarehouseError(
                f"{statement.kind} is not a table statement; the warehouse runs CREATE DATABASE/STABLE/TABLE, "
                "INSERT, DELETE, DROP and USE")
        return handler(self, statement)

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            self._spark = spark_session()
        elif callable(self._spark) and not _is_session(self._spark):
            self._spark = self._spark()
        return self._spark

    # --- databases -------------------------------------------------------------------------------

    def database_of(self, name: m.TableName) -> str:
        """The database of ``name``: its own, or the current one."""
        db = name.db or self.database
        if db is None:
            raise WarehouseError(f"no database selected for {name.name}: write db.{name.name} or USE a database first")
        return self.catalog.database_path(db).name  # the name rule, and a folder inside the warehouse

    def _create_database(self, stmt: m.CreateDatabase) -> Result:
        created = self.catalog.create_database(stmt.name, stmt.precision, stmt.if_not_exists)
        verb = "created" if created else "exists:"
        return Result(stmt, f"{verb} database {stmt.name.lower()} (precision {stmt.precision})")

    def _use(self, stmt: m.UseDatabase) -> Result:
        self.catalog.precision(stmt.name)
        self.database = stmt.name.lower()
        return Result(stmt, f"using database {self.database}")

    def _drop_database(self, stmt: m.DropDatabase) -> Result:
        dropped = self.catalog.drop_database(stmt.name, stmt.if_exists)
        if self.database == stmt.name.lower():
            self.database = None
        return Result(stmt, f"dropped database {stmt.name.lower()}" if dropped else "nothing to drop")

    # --- tables ----------------------------------------------------------------------------------

    def _create_table(self, stmt: m.CreateSuperTable | m.CreateTable) -> Result:
        db = self.database_of(stmt.name)
        tags = stmt.tags if isinstance(stmt, m.CreateSuperTable) else ()
        columns = table_columns(stmt.columns, tags)
        created = self.catalog.create_table(db, stmt.name.name, columns, stmt.if_not_exists)
        what = "supertable" if tags else "table"
        name = f"{db}.{stmt.name.name.lower()}"
        return Result(stmt, f"created {what} {name}" if created else f"exists: {what} {name}")

    def _supertable(self, name: m.TableName, db: str) -> TableInfo:
        found = self.catalog.resolve(name, db, "supertable")
        if not isinstance(found, TableInfo) or not found.is_super:
            raise WarehouseError(f"{db}.{name.name.lower()} is not a supertable")
        return found

    def _tags(self, stable: TableInfo, names: tuple[str, ...] | None, values: tuple[m.Value, ...],
              label: str, ctx: TimeContext) -> dict[str, object]:
        """Typed tag values of a new subtable; tags not named are NULL."""
        if names is None:
            if len(values) != len(stable.tags):
                raise WarehouseError(
                    f"{label}: {stable.qualified} has {len(stable.tags)} tags "
                    f"({', '.join(t.name for t in stable.tags)}), {len(values)} values given")
            columns = list(stable.tags)
        else:
            columns = [self._column(stable, n, label, roles=("tag",)) for n in names]
        tags: dict[str, object] = {t.name: None for t in stable.tags}
        for column, value in zip(columns, values, strict=True):
            tags[column.name] = _coerce(value, column, label, ctx, "tag")
        return tags

    def _column(self, info: TableInfo, name: str, label: str, roles: tuple[str, ...]) -> Column:
        column = info.column(name)
        if column is None or column.role not in roles:
            choices = [c.name for c in info.columns if c.role in roles]
            what = "tag" if roles == ("tag",) else "column"
            raise WarehouseError(f"{label}: {info.qualified} has no {what} {name}", hint=did_you_mean(name, choices))
        return column

    def _create_subtable(self, stmt: m.CreateSubTable) -> Result:
        db = self.database_of(stmt.name)
        stable = self._supertable(stmt.stable, db)
        label = f"{db}.{stmt.name.name.lower()}"
        ctx = TimeContext(stable.precision, datetime.now(UTC))
        tags = self._tags(stable, stmt.tag_names, stmt.tag_values, label, ctx)
        existing = self.catalog.lookup(stmt.name, db)
        if existing is not None:
            if stmt.if_not_exists:
                return Result(stmt, f"exists: table {label}")
            raise WarehouseError(f"table {label} already exists")
        self.catalog.create_subtable(stable, stmt.name.name, tags, stmt.if_not_exists)
        return Result(stmt, f"created table {label} using {stable.qualified}")

    def _drop_table(self, stmt: m.DropTable) -> Result:
        dropped = []
        for name in stmt.names:
            db = self.database_of(name)
            found = self.catalog.lookup(name, db)
            label = f"{db}.{name.name.lower()}"
            if found is None:
                if stmt.if_exists:
                    continue
                raise WarehouseError(f"table {label} does not exist",
                                     hint=did_you_mean(name.name, self.catalog.names(db)))
            is_super = isinstance(found, TableInfo) and found.is_super
            if stmt.stable and not is_super:
                raise WarehouseError(f"{label} is not a supertable; use DROP TABLE")
            if not stmt.stable and is_super:
                raise WarehouseError(f"{label} is a supertable; use DROP STABLE")
            if isinstance(found, SubTable):
                writer.delete_rows(found.stable.path, writer.string_equals(TBNAME, found.name))
                self.catalog.drop_subtable_entry(found)
            else:
                self.catalog.drop_table_files(found)
            dropped.append(label)
        return Result(stmt, f"dropped {', '.join(dropped)}" if dropped else "nothing to drop")

    # --- INSERT ----------------------------------------------------------------------------------

    def _insert(self, stmt: m.Insert) -> Result:
        """Validate every row of every target, then commit one MERGE per Delta table.

        Rows for subtables of one supertable share one commit. When a statement spans several
        Delta tables and a later commit fails, the earlier ones are restored (unless another writer
        has committed on top of them, which the error then reports).
        """
        now = datetime.now(UTC)
        batches: dict[Location, _Batch] = {}
        new_subtables: dict[tuple[str, str], SubTable] = {}
        known: dict[tuple[str, str], SubTable] = {}  # subtables written to, with their registered tags
        for target in stmt.targets:
            db = self.database_of(target.table)
            label = f"{db}.{target.table.name.lower()}"
            found = self.catalog.lookup(target.table, db)
            key = (db, target.table.name.lower())
            if found is None and key in new_subtables:
                found = new_subtables[key]
            if found is None:
                if target.using is None:
                    raise WarehouseError(
                        f"table {label} does not exist",
                        hint=did_you_mean(target.table.name, self.catalog.names(db))
                        or f"create it with INSERT INTO {target.table.name} USING <supertable> TAGS (...) VALUES ...")
                stable = self._supertable(target.using, db)
                ctx = TimeContext(stable.precision, now)
                tags = self._tags(stable, target.tag_names, target.tag_values, label, ctx)
                found = new_subtables[key] = SubTable(db, key[1], stable, tags)
            elif target.using is not None:
                owner = found.stable if isinstance(found, SubTable) else found
                if owner.name != target.using.name.lower():
                    raise WarehouseError(f"{label} belongs to {owner.qualified}, not {db}.{target.using.name.lower()}")
            info, tbname = (found.stable, found.name) if isinstance(found, SubTable) else (found, None)
            if isinstance(found, SubTable):
                known.setdefault(key, found)
            batch = batches.setdefault(info.path, _Batch(info))
            batch.labels.add(label)
            ctx = TimeContext(info.precision, now)
            for values in target.rows:
                batch.rows.append(self._row(info, target, values, tbname, label, ctx, new_subtables, known))

        listening = listeners.active()
        writes: list[listeners.Write] = []
        if listening:  # insert triggers see each row, before anything is registered or committed
            for batch in batches.values():
                rows = pa.Table.from_pylist(batch.rows, schema=_row_schema(batch.info))
                writes.extend(listeners.table_writes(batch.info, rows, per_row=True))
            listeners.before(listening, writes)
        for sub in new_subtables.values():
            registered = self.catalog.create_subtable(sub.stable, sub.name, sub.tags, if_not_exists=True)
            known[(sub.db, sub.name)] = registered
        commits: list[writer.Commit] = []
        total = 0
        for batch in batches.values():
            rows = self._arrow_rows(batch, known)
            try:
                commits.append(writer.upsert(batch.info.path, rows, batch.info.key_columns))
            except Exception as err:
                self._undo(commits, batch, err)
            total += rows.num_rows
        if listening:
            listeners.after(listening, writes)
        targets = ", ".join(sorted(set().union(*(b.labels for b in batches.values()))))
        return Result(stmt, f"{total} row{'s' if total != 1 else ''} written to {targets}", rows=total)

    def _row(self, info: TableInfo, target: m.InsertTarget, values: tuple[m.Value, ...], tbname: str | None,
             label: str, ctx: TimeContext, new_subtables: dict[tuple[str, str], SubTable],
             known: dict[tuple[str, str], SubTable]) -> dict:
        if target.columns is None:
            columns = list(info.data_columns)
            if len(values) != len(columns):
                raise WarehouseError(
                    f"{label}: {len(values)} values for {len(columns)} columns "
                    f"({', '.join(c.name for c in columns)})")
        else:
            roles = (("ts", "key", "metric", TBNAME, "tag") if tbname is None and info.is_super
                     else ("ts", "key", "metric"))
            columns = [self._column(info, name, label, roles) for name in target.columns]
            seen = set()
            for column in columns:
                if column.name in seen:
                    raise WarehouseError(f"{label}: column {column.name} is listed twice")
                seen.add(column.name)
        row = {c.name: _coerce(v, c, label, ctx) for c, v in zip(columns, values, strict=True)}
        for column in info.columns:
            if column.role in ("ts", "key") and row.get(column.name) is None:
                raise WarehouseError(
                    f"{label}: column {column.name} ({column.dtype}) is part of the key and needs a value")
        if info.is_super:
            if tbname is None:
                tbname = self._subtable_of_row(info, row, label, new_subtables, known)
            row[TBNAME] = tbname
        return row

    def _subtable_of_row(self, stable: TableInfo, row: dict, label: str,
                         new_subtables: dict[tuple[str, str], SubTable], known: dict[tuple[str, str], SubTable]) -> str:
        """For ``INSERT INTO <supertable> (tbname, ...)``: the row's subtable, created from its tags if new."""
        name = row.get(TBNAME)
        if not name:
            raise WarehouseError(f"{label}: an INSERT into a supertable must give tbname for each row")
        name = str(name).lower()
        key = (stable.db, name)
        if key in new_subtables:
            return name
        found = self.catalog.existing_subtable(stable, name, label)
        if found is not None:
            known[key] = found
            return name
        if not any(t.name in row for t in stable.tags):
            raise WarehouseError(f"{label}: subtable {stable.db}.{name} does not exist and the row gives no tags")
        tags = {t.name: row.get(t.name) for t in stable.tags}
        new_subtables[key] = SubTable(stable.db, name, stable, tags)
        return name

    @staticmethod
    def _arrow_rows(batch: _Batch, subtables: dict[tuple[str, str], SubTable]) -> pa.Table:
        info = batch.info
        if info.is_super:
            tag_cache: dict[str, dict[str, object]] = {}
            for row in batch.rows:
                name = row[TBNAME]
                tags = tag_cache.get(name)
                if tags is None:
                    sub = subtables.get((info.db, name))
                    tags = tag_cache[name] = (sub.tags if sub else {})
                row.update(tags)
        return pa.Table.from_pylist(batch.rows, schema=info.arrow_schema())

    def _undo(self, commits: list[writer.Commit], failed: _Batch, err: Exception) -> None:
        kept = [str(c.path) for c in commits if not writer.undo(c)]
        detail = (f"; other writers committed after this statement's changes to {', '.join(kept)}, which stay"
                  if kept else "")
        raise WarehouseError(
            f"writing {', '.join(sorted(failed.labels))} failed ({type(err).__name__}: {err}); "
            f"the statement's earlier writes were undone{detail}") from err

    # --- DELETE and SELECT (Spark) ---------------------------------------------------------------

    def _delete(self, stmt: m.Delete) -> Result:
        db = self.database_of(stmt.table)
        found = self.catalog.resolve(stmt.table, db)
        info = found.stable if isinstance(found, SubTable) else found
        conditions = []
        if isinstance(found, SubTable):
            conditions.append(exp.column(TBNAME).eq(exp.Literal.string(found.name)).sql(dialect="spark"))
        if stmt.where is not None:
            self.check_path_tables(stmt.where.tree)
            where = to_spark(stmt.where.tree, timestamp_column=info.timestamp_column, precision=info.precision)
            conditions.append(f"({where})")
        target = delta_table(info.path).sql(dialect="spark")
        where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
        count = self._delete_by_key(info, target, where, at_most=None if self.catalog.store.remote else SMALL_DELETE)
        if count is None:  # many rows: Spark rewrites the files they are in
            with self.local_time():
                affected = self.spark.sql(f"DELETE FROM {target}{where}").collect()
            count = int(affected[0][0]) if affected else 0
        return Result(stmt, f"{count} row{'s' if count != 1 else ''} deleted from {found.qualified}", rows=count)

    def _delete_by_key(self, info: TableInfo, target: str, where: str, *, at_most: int | None) -> int | None:
        """Spark finds the keys of the rows the condition matches, and the kernel deletes those rows;
        how many (None: more than ``at_most``, and nothing was deleted).

        On an object store every DELETE goes this way (``at_most`` None): the kernel's commit is a
        conditional PUT, while Spark's own commit through S3A would be a plain one, which a concurrent
        writer's commit of the same version could overwrite. On local disk a DELETE of a few rows
        does, since a Spark DELETE costs seconds however few rows it removes; a larger one is left
        to Spark, which does not collect the keys."""
        keys = ", ".join(f"`{k}`" for k in info.key_columns)
        limit = "" if at_most is None else f" LIMIT {at_most + 1}"
        with self.local_time():
            doomed = self.spark.sql(f"SELECT {keys} FROM {target}{where}{limit}").toArrow()
        if at_most is not None and doomed.num_rows > at_most:
            return None
        if doomed.num_rows:
            writer.delete_matching(info.path, doomed.cast(pa.schema(
                [info.arrow_schema().field(name) for name in info.key_columns])))
        return doomed.num_rows

    def spark_sql(self, query: m.SqlExpression) -> str:
        """The Spark SQL of a TDengine query, its tables resolved to the Delta tables they live in."""
        translate, _, _ = self.translator(query.tree)
        return translate(query.tree)

    def translator(self, tree: exp.Expr, *, also: tuple[TableInfo, ...] = (),
                   views: Mapping[str, SystemView] | None = None) -> tuple[Callable[..., str], str | None, str]:
        """(TDengine tree -> Spark SQL, timestamp column, precision) for trees over the tables
        ``tree`` reads; the timestamp column is known when it reads one table (counting ``also``,
        tables read through views or paths). Delta paths (``delta.`/path```) are left as they are; a
        path table the project did not build itself must pass :meth:`check_path_tables`.
        ``views`` computes the tables of ``information_schema`` that the caller offers.

        The translation takes the placeholder ``bindings`` of :func:`~airflow_stream_provider.sql.to_spark`.
        """
        self.check_path_tables(tree)
        ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
        resolved: dict[tuple[str, str], TableInfo | SubTable] = {}
        system: dict[str, str] = {}
        for node in tree.find_all(exp.Table):
            if (node.db or "").lower() == INFORMATION_SCHEMA:
                system[node.name.lower()] = self._system_view(node.name.lower(), views or {})
            elif node.name.lower() not in ctes and not is_path_table(node):
                name = m.TableName(node.name, node.db or None)
                db = self.database_of(name)
                resolved[(db, name.name.lower())] = self.catalog.resolve(name, db)

        def table_ref(node: exp.Table) -> exp.Expr:
            if (node.db or "").lower() == INFORMATION_SCHEMA:
                return exp.to_table(system[node.name.lower()]).as_(node.alias or node.name)
            found = resolved.get(((node.db or self.database or "").lower(), node.name.lower()))
            if found is None:
                return node
            alias = node.alias or node.name
            if isinstance(found, SubTable):
                inner = exp.select("*").from_(delta_table(found.stable.path)).where(
                    exp.column(TBNAME).eq(exp.Literal.string(found.name)))
                return inner.subquery(alias)
            return delta_table(found.path).as_(alias)

        infos = {found.stable if isinstance(found, SubTable) else found for found in resolved.values()}
        if not infos:  # _c0 means the first column of the table in FROM: a named one, else `also`
            infos = set(also)
        ts_column, precision = None, "ms"
        if len(infos) == 1:
            (info,) = infos
            ts_column, precision = info.timestamp_column, info.precision

        def translate(node: exp.Expr, bindings: dict | None = None) -> str:
            return to_spark(node, tables=table_ref, timestamp_column=ts_column, precision=precision,
                            bindings=bindings)

        return translate, ts_column, precision

    def frame(self, query: m.SqlExpression | exp.Expr, *, bindings: dict | None = None,
              also: tuple[TableInfo, ...] = (), views: Mapping[str, SystemView] | None = None) -> DataFrame:
        """A TDengine query without a window clause as a Spark DataFrame (window clauses are run by
        :func:`airflow_stream_provider.windows.select.frame`).

        :param bindings: placeholder values (see :func:`~airflow_stream_provider.sql.to_spark`).
        :param also: tables the query reads through views or Delta paths (for ``_c0``).
        """
        tree = query.tree if isinstance(query, m.SqlExpression) else query
        translate, _, _ = self.translator(tree, also=also, views=views)
        return self.spark.sql(translate(tree, bindings))

    def check_path_tables(self, tree: exp.Expr) -> None:
        """Refuse the path tables of a query text that read files: only ``delta.`<path>``` inside
        the warehouse root may be named (Spark reads ``csv.`/etc/passwd``` as readily as a table).
        The path tables :func:`delta_table` builds for the project's own queries pass."""
        store = self.catalog.store
        for node in tree.find_all(exp.Table):
            if not is_path_table(node) or node.meta.get(_BUILT):
                continue
            source = (node.db or "").lower()
            if source != "delta" or node.catalog:
                raise WarehouseError(
                    f"{node.sql(dialect='spark')}: queries read tables by name, or Delta tables of the "
                    "warehouse as delta.`<path>`; files are not read through other data sources")
            if not store.contains(node.name):
                raise WarehouseError(
                    f"{node.sql(dialect='spark')}: a Delta path must lie inside the warehouse {store.root}")

    def _system_view(self, name: str, views: Mapping[str, SystemView]) -> str:
        """A temporary view holding ``information_schema.<name>`` as it is now."""
        if name not in views:
            offered = ", ".join(sorted(views)) or "none here"
            raise WarehouseError(f"information_schema.{name} does not exist; the system tables are {offered}")
        view = f"__information_schema_{name}"
        arrow_frame(self.spark, views[name](self)).createOrReplaceTempView(view)
        return view

    def temp_view(self, df: DataFrame, prefix: str) -> str:
        """Register ``df`` as a temporary view with a new name starting with ``prefix``; the
        innermost :meth:`scratch` around the call drops it."""
        name = f"{prefix}{uuid.uuid4().hex[:12]}"
        df.createOrReplaceTempView(name)
        self._temp_views().append(name)
        return name

    def _temp_views(self) -> list[str]:
        views: list[str] | None = getattr(self._local, "views", None)
        if views is None:
            views = self._local.views = []
        return views

    @contextlib.contextmanager
    def scratch(self) -> Iterator[None]:
        """Drop the temporary views made inside when leaving (after the queries reading them ran).

        A session lives long (the stream node's, for days): each view keeps its plan, and with
        local data its rows, so views left behind fill the driver's memory run by run."""
        views = self._temp_views()
        mark = len(views)
        try:
            yield
        finally:
            made, views[mark:] = views[mark:], []
            for name in made:
                with contextlib.suppress(Exception):  # the session is gone: so are its views
                    self.spark.catalog.dropTempView(name)

    @contextlib.contextmanager
    def local_time(self) -> Iterator[None]:
        """Read timestamp strings in the statement in ``AIRFLOW_STREAM_TIMEZONE``, as INSERT does."""
        spark = self.spark
        zone = config.timezone_name()
        previous = setting(spark, "spark.sql.session.timeZone")
        if previous == zone:
            yield
            return
        spark.conf.set("spark.sql.session.timeZone", zone)
        try:
            yield
        finally:
            spark.conf.set("spark.sql.session.timeZone", previous)


def _row_schema(info: TableInfo) -> pa.Schema:
    """The schema of an INSERT's rows before their tags are added: the data columns (and tbname)."""
    fields = [c.arrow_field() for c in info.data_columns]
    if info.is_super:
        fields.append(pa.field(TBNAME, pa.string()))
    return pa.schema(fields)


def delta_table(path: Path | str) -> exp.Table:
    """``delta.`/path```: the Delta table at ``path``, as Spark SQL reads it, marked as built by the
    project so that :meth:`Warehouse.check_path_tables` lets it through (query text cannot set the mark)."""
    node = exp.Table(this=exp.to_identifier(str(path), quoted=True), db=exp.to_identifier("delta"))
    node.meta[_BUILT] = True
    return node


#: the mark :func:`delta_table` puts on the path tables it builds
_BUILT = "airflow_stream_provider.delta_table"


def is_path_table(node: exp.Table) -> bool:
    """``delta.`/path```: a table read by path (no TDengine name holds a slash)."""
    return "/" in node.name


def _coerce(value: m.Value, column: Column, label: str, ctx: TimeContext, what: str = "column") -> object:
    try:
        return coerce(value, column.dtype, ctx)
    except BadValue as err:
        raise WarehouseError(f"{label}: {what} {column.name} ({column.dtype}): {err}") from None


INFORMATION_SCHEMA = "information_schema"

#: the statements the warehouse runs, by type
TABLE_STATEMENTS: dict[type, Callable[[Warehouse, Any], Result]] = {
    m.CreateSeriesDatabase: iotdb.create_database,
    m.DropSeriesDatabases: iotdb.drop_databases,
    m.ShowSeriesDatabases: iotdb.show_databases,
    m.CreateTimeseries: iotdb.create_timeseries,
    m.DropTimeseries: iotdb.drop_timeseries,
    m.ShowTimeseries: iotdb.show_timeseries,
    m.ShowDevices: iotdb.show_devices,
    m.InsertPoints: iotdb.insert,
    m.DeletePoints: iotdb.delete,
    m.QuerySeries: iotdb.select,
    m.CreateDatabase: Warehouse._create_database,
    m.UseDatabase: Warehouse._use,
    m.DropDatabase: Warehouse._drop_database,
    m.CreateSuperTable: Warehouse._create_table,
    m.CreateTable: Warehouse._create_table,
    m.CreateSubTable: Warehouse._create_subtable,
    m.DropTable: Warehouse._drop_table,
    m.Insert: Warehouse._insert,
    m.Delete: Warehouse._delete,
}
