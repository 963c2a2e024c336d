"""TDengine's table statements on Delta tables: CREATE/USE/DROP DATABASE, CREATE [S]TABLE, subtables
and their tags, DROP, INSERT and DELETE (DESIGN §2).

Writes (CREATE, INSERT, DROP) commit through the Delta Lake Rust kernel and need no Spark; DELETE
... WHERE runs on Spark (the stream node over Spark Connect, or an in-process session), because its
condition is TDengine SQL translated to Spark SQL.

Each handler takes the :class:`~.warehouse.Warehouse` and one statement and returns a
:class:`~.result.Result`. An INSERT checks every row of every target before it writes, and undoes
the statement's earlier commits when a later one fails.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
from sqlglot import exp

from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import did_you_mean
from airflow_stream_provider.sql import to_spark
from airflow_stream_provider.storage import Location, export_credentials, is_remote
from airflow_stream_provider.warehouse import features, group_commit, listeners, mapping, metastore, retention, writer
from airflow_stream_provider.warehouse.catalog import (
    TBNAME,
    Catalog,
    Column,
    SubTable,
    TableInfo,
    WarehouseError,
    table_columns,
)
from airflow_stream_provider.warehouse.resolve import table_source
from airflow_stream_provider.warehouse.result import Result
from airflow_stream_provider.warehouse.types import BadValue, TimeContext, coerce, coercer
from airflow_stream_provider.warehouse.warehouse import Warehouse

#: a local DELETE matching at most this many rows is done by the kernel, by key (a larger one by Spark)
SMALL_DELETE = 10_000

#: the subtables of one INSERT by (database, name)
Subtables = dict[tuple[str, str], SubTable]


@dataclass
class _Chunk:
    """The checked rows of one INSERT target, column by column."""

    columns: dict[str, list]
    size: int
    #: the subtable of every row; None for a regular table, or when each row names its own (TBNAME)
    tbname: str | None = None


@dataclass
class _Batch:
    """Rows bound for one Delta table."""

    info: TableInfo
    chunks: list[_Chunk] = field(default_factory=list)
    labels: set[str] = field(default_factory=set)

    def table(self, schema: pa.Schema, tags_of: Callable[[str], dict[str, object]] | None = None) -> pa.Table:
        """The rows in ``schema``: each column from the values given, a subtable's tags from
        ``tags_of(tbname)`` first, NULL where neither has one."""
        tags = {t.name for t in self.info.tags} if tags_of is not None else set()
        parts = []
        for chunk in self.chunks:
            names = [chunk.tbname] * chunk.size if chunk.tbname is not None else chunk.columns.get(TBNAME)
            arrays = []
            for f in schema:
                values = chunk.columns.get(f.name)
                if f.name == TBNAME and values is None:
                    values = names
                elif f.name in tags and chunk.tbname is not None and values is None and tags_of is not None:
                    arrays.append(pa.repeat(pa.scalar(tags_of(chunk.tbname).get(f.name), f.type), chunk.size))
                    continue  # (a subtable's rows: its tags on each)
                elif f.name in tags and names is not None and tags_of is not None:
                    given = values or [None] * chunk.size
                    values = [tags_of(n).get(f.name, v) for n, v in zip(names, given, strict=True)]
                arrays.append(pa.nulls(chunk.size, f.type) if values is None else pa.array(values, type=f.type))
            parts.append(pa.Table.from_arrays(arrays, schema=schema))
        return pa.concat_tables(parts) if parts else schema.empty_table()


# --- databases -----------------------------------------------------------------------------------


def create_database(warehouse: Warehouse, stmt: m.CreateDatabase) -> Result:
    created = warehouse.catalog.create_database(stmt.name, stmt.precision, stmt.if_not_exists)
    verb = "created" if created else "exists:"
    if created and stmt.keep is not None:
        retention.set_keep(warehouse.catalog, stmt.name.lower(), stmt.keep.micros)
    keep = f", keep {stmt.keep}" if created and stmt.keep is not None else ""
    return Result(stmt, f"{verb} database {stmt.name.lower()} (precision {stmt.precision}{keep})")


def alter_database(warehouse: Warehouse, stmt: m.AlterDatabase) -> Result:
    """ALTER DATABASE ... KEEP: the retention the next retention run enforces."""
    retention.set_keep(warehouse.catalog, stmt.name.lower(), stmt.keep.micros)
    return Result(stmt, f"database {stmt.name.lower()} keeps its rows for {stmt.keep}; the retention run deletes "
                        "older ones")


def use_database(warehouse: Warehouse, stmt: m.UseDatabase) -> Result:
    warehouse.catalog.precision(stmt.name)
    warehouse.database = stmt.name.lower()
    return Result(stmt, f"using database {warehouse.database}")


def drop_database(warehouse: Warehouse, stmt: m.DropDatabase) -> Result:
    dropped = warehouse.catalog.drop_database(stmt.name, stmt.if_exists)
    if warehouse.database == stmt.name.lower():
        warehouse.database = None
    return Result(stmt, f"dropped database {stmt.name.lower()}" if dropped else "nothing to drop")


# --- tables --------------------------------------------------------------------------------------


def create_table(warehouse: Warehouse, stmt: m.CreateSuperTable | m.CreateTable) -> Result:
    db = warehouse.database_of(stmt.name)
    tags = stmt.tags if isinstance(stmt, m.CreateSuperTable) else ()
    columns = table_columns(stmt.columns, tags)
    created = warehouse.catalog.create_table(db, stmt.name.name, columns, stmt.if_not_exists)
    what = "supertable" if tags else "table"
    name = f"{db}.{stmt.name.name.lower()}"
    return Result(stmt, f"created {what} {name}" if created else f"exists: {what} {name}")


def attach_table(warehouse: Warehouse, stmt: m.AttachTable) -> Result:
    """CREATE [S]TABLE ... FROM DELTA: the table at ``stmt.path`` recorded under a mapping, not copied."""
    db = warehouse.database_of(stmt.name)
    path = stmt.path if stmt.catalog is None else metastore.catalog_table(warehouse.spark, stmt.catalog).location
    location = path if path.startswith("s3://") else str(Path(path).expanduser().resolve())
    named = {c.source.lower() for c in stmt.mapped()}
    metrics = stmt.columns
    if metrics is None:  # every other column of the table
        described = mapping.describe(location)
        metrics = tuple(m.MappedColumn(n.lower(), n, "metric") for n in described.types if n.lower() not in named)
    wanted = [(c.name, c.source, c.role) for c in (stmt.timestamp, *metrics, *((stmt.tbname,) if stmt.tbname else ()),
                                                    *stmt.tags)]
    _check_readable(location)
    info = warehouse.catalog.attach(db, stmt.name.name, location, wanted, writable=stmt.writable,
                                    enable_change_feed=stmt.enable_change_feed, if_not_exists=stmt.if_not_exists)
    what = "supertable" if stmt.stable else "table"
    label = f"{db}.{stmt.name.name.lower()}"
    if info is None:
        return Result(stmt, f"exists: {what} {label}")
    access = "writable" if stmt.writable else "read-only"
    origin = f"{stmt.catalog} of the catalog, at {location}" if stmt.catalog else location
    return Result(stmt, f"attached {what} {label} from {origin} ({access}, {len(info.columns)} columns)")


def _check_readable(location: str) -> None:
    """Refuse, at the attach, a Delta table with a feature no stream reader reads correctly; a location
    that holds no Delta table is left to the attach, which says so."""
    from deltalake.exceptions import DeltaError

    if is_remote(location):
        export_credentials()  # the kernel reads the object store with the warehouse's keys
    try:
        found = features.table_features(location)
    except DeltaError:
        return
    features.refuse_unread(location, found)


def _check_writable(info: TableInfo, label: str, what: str) -> None:
    if not info.writable:
        raise WarehouseError(f"{label} is attached read-only from {info.attached}: {what} would change its owner's "
                             "data", hint="attach it again with WRITABLE to allow it")


def _supertable(catalog: Catalog, name: m.TableName, db: str) -> TableInfo:
    found = catalog.resolve(name, db, "supertable")
    if not isinstance(found, TableInfo) or not found.is_super:
        raise WarehouseError(f"{db}.{name.name.lower()} is not a supertable")
    return found


def _tags(stable: TableInfo, names: tuple[str, ...] | None, values: tuple[m.Value, ...], label: str,
          ctx: TimeContext) -> dict[str, object]:
    """Typed tag values of a new subtable; tags not named are NULL."""
    if names is None:
        if len(values) != len(stable.tags):
            raise WarehouseError(
                f"{label}: {stable.qualified} has {len(stable.tags)} tags "
                f"({', '.join(t.name for t in stable.tags)}), {len(values)} values given")
        columns = list(stable.tags)
    else:
        columns = [_column(stable, n, label, roles=("tag",)) for n in names]
    tags: dict[str, object] = {t.name: None for t in stable.tags}
    for column, value in zip(columns, values, strict=True):
        tags[column.name] = _coerce(value, column, label, ctx, "tag")
    return tags


def _column(info: TableInfo, name: str, label: str, roles: tuple[str, ...]) -> Column:
    column = info.column(name)
    if column is None or column.role not in roles:
        choices = [c.name for c in info.columns if c.role in roles]
        what = "tag" if roles == ("tag",) else "column"
        raise WarehouseError(f"{label}: {info.qualified} has no {what} {name}", hint=did_you_mean(name, choices))
    return column


def _coerce(value: m.Value, column: Column, label: str, ctx: TimeContext, what: str = "column") -> object:
    try:
        return coerce(value, column.dtype, ctx)
    except BadValue as err:
        raise WarehouseError(f"{label}: {what} {column.name} ({column.dtype}): {err}") from None


def create_subtable(warehouse: Warehouse, stmt: m.CreateSubTable) -> Result:
    catalog = warehouse.catalog
    db = warehouse.database_of(stmt.name)
    stable = _supertable(catalog, stmt.stable, db)
    label = f"{db}.{stmt.name.name.lower()}"
    ctx = TimeContext(stable.precision, datetime.now(UTC))
    tags = _tags(stable, stmt.tag_names, stmt.tag_values, label, ctx)
    existing = catalog.lookup(stmt.name, db)
    if existing is not None:
        if stmt.if_not_exists:
            return Result(stmt, f"exists: table {label}")
        raise WarehouseError(f"table {label} already exists")
    catalog.create_subtable(stable, stmt.name.name, tags, stmt.if_not_exists)
    return Result(stmt, f"created table {label} using {stable.qualified}")


def drop_table(warehouse: Warehouse, stmt: m.DropTable) -> Result:
    catalog = warehouse.catalog
    dropped = []
    for name in stmt.names:
        db = warehouse.database_of(name)
        found = catalog.lookup(name, db)
        label = f"{db}.{name.name.lower()}"
        if found is None:
            if stmt.if_exists:
                continue
            raise WarehouseError(f"table {label} does not exist", hint=did_you_mean(name.name, catalog.names(db)))
        is_super = isinstance(found, TableInfo) and found.is_super
        if stmt.stable and not is_super:
            raise WarehouseError(f"{label} is not a supertable; use DROP TABLE")
        if not stmt.stable and is_super:
            raise WarehouseError(f"{label} is a supertable; use DROP STABLE")
        if isinstance(found, TableInfo) and found.attached is not None:
            catalog.detach(found)  # the owner's data stays where it is
            dropped.append(f"{label} (detached; the data at {found.attached} stays)")
            continue
        if isinstance(found, SubTable):
            writer.delete_rows(found.stable.path, writer.string_equals(TBNAME, found.name))
            catalog.drop_subtable_entry(found)
        else:
            catalog.drop_table_files(found)
        dropped.append(label)
    return Result(stmt, f"dropped {', '.join(dropped)}" if dropped else "nothing to drop")


# --- INSERT --------------------------------------------------------------------------------------


def insert(warehouse: Warehouse, stmt: m.Insert) -> Result:
    """Validate every row of every target, then commit one MERGE per Delta table.

    Rows for subtables of one supertable share one commit. When a statement spans several
    Delta tables and a later commit fails, the earlier ones are restored (unless another writer
    has committed on top of them, which the error then reports).
    """
    new_subtables: Subtables = {}
    known: Subtables = {}  # subtables written to, with their registered tags
    batches = _batches(warehouse, stmt, new_subtables, known)
    listening = listeners.active()
    writes: list[listeners.Write] = []
    if listening:  # insert triggers see each row, before anything is registered or committed
        for batch in batches.values():
            rows = batch.table(_row_schema(batch.info))
            writes.extend(listeners.table_writes(batch.info, rows, per_row=True))
        listeners.before(listening, writes)
    for sub in new_subtables.values():
        registered = warehouse.catalog.create_subtable(sub.stable, sub.name, sub.tags, if_not_exists=True)
        known[(sub.db, sub.name)] = registered
    total = _commit(list(batches.values()), known)
    if listening:
        listeners.after(listening, writes)
    targets = ", ".join(sorted(set().union(*(b.labels for b in batches.values()))))
    return Result(stmt, f"{total} row{'s' if total != 1 else ''} written to {targets}", rows=total)


def _batches(warehouse: Warehouse, stmt: m.Insert, new_subtables: Subtables,
             known: Subtables) -> dict[Location, _Batch]:
    """The checked rows of every target by the Delta table they go to; the subtables the statement
    creates go into ``new_subtables``, the existing ones it writes to into ``known``."""
    now = datetime.now(UTC)
    batches: dict[Location, _Batch] = {}
    for target in stmt.targets:
        db = warehouse.database_of(target.table)
        label = f"{db}.{target.table.name.lower()}"
        found = _target(warehouse.catalog, target, db, label, now, new_subtables)
        info, tbname = (found.stable, found.name) if isinstance(found, SubTable) else (found, None)
        if isinstance(found, SubTable):
            known.setdefault((db, target.table.name.lower()), found)
        _check_writable(info, label, "INSERT")
        batch = batches.setdefault(info.path, _Batch(info))
        batch.labels.add(label)
        ctx = TimeContext(info.precision, now)
        columns = _insert_columns(info, target, tbname, label)
        chunk = _Chunk(_values(columns, target.rows, info, label, ctx), len(target.rows), tbname)
        if info.is_super and tbname is None:
            chunk.columns[TBNAME] = [
                _subtable_of_row(warehouse.catalog, info, {n: v[i] for n, v in chunk.columns.items()}, label,
                                 new_subtables, known)
                for i in range(chunk.size)]
        batch.chunks.append(chunk)
    return batches


def _target(catalog: Catalog, target: m.InsertTarget, db: str, label: str, now: datetime,
            new_subtables: Subtables) -> TableInfo | SubTable:
    """The table an INSERT target writes to; a subtable it creates (``USING ... TAGS``) goes into
    ``new_subtables``."""
    found = catalog.lookup(target.table, db)
    key = (db, target.table.name.lower())
    if found is None and key in new_subtables:
        found = new_subtables[key]
    if found is None:
        if target.using is None:
            raise WarehouseError(
                f"table {label} does not exist",
                hint=did_you_mean(target.table.name, catalog.names(db))
                or f"create it with INSERT INTO {target.table.name} USING <supertable> TAGS (...) VALUES ...")
        stable = _supertable(catalog, target.using, db)
        ctx = TimeContext(stable.precision, now)
        tags = _tags(stable, target.tag_names, target.tag_values, label, ctx)
        found = new_subtables[key] = SubTable(db, key[1], stable, tags)
    elif target.using is not None:
        owner = found.stable if isinstance(found, SubTable) else found
        if owner.name != target.using.name.lower():
            raise WarehouseError(f"{label} belongs to {owner.qualified}, not {db}.{target.using.name.lower()}")
    return found


def _insert_columns(info: TableInfo, target: m.InsertTarget, tbname: str | None, label: str) -> list[Column]:
    """The columns a target's values go to, in order: those it names, or every data column."""
    if target.columns is None:
        return list(info.data_columns)
    roles = (("ts", "key", "metric", TBNAME, "tag") if tbname is None and info.is_super
             else ("ts", "key", "metric"))
    columns = [_column(info, name, label, roles) for name in target.columns]
    seen = set()
    for column in columns:
        if column.name in seen:
            raise WarehouseError(f"{label}: column {column.name} is listed twice")
        seen.add(column.name)
    return columns


def _values(columns: list[Column], rows: tuple[tuple[m.Value, ...], ...], info: TableInfo, label: str,
            ctx: TimeContext) -> dict[str, list]:
    """The checked values of an INSERT target's rows by column: each converted to its column's
    type, every key given."""
    for values in rows:
        if len(values) != len(columns):
            raise WarehouseError(
                f"{label}: {len(values)} values for {len(columns)} columns "
                f"({', '.join(c.name for c in columns)})")
    given = list(zip(*rows, strict=True)) if rows else [() for _ in columns]
    out: dict[str, list] = {}
    for column, values in zip(columns, given, strict=True):
        convert = coercer(column.dtype, ctx)
        try:
            out[column.name] = [convert(v) for v in values]
        except BadValue:  # the general reading says what is wrong, as it says it for every value
            out[column.name] = [_coerce(v, column, label, ctx) for v in values]
    if rows:
        for key in (c for c in info.columns if c.role in ("ts", "key")):
            if key.name not in out or None in out[key.name]:
                raise WarehouseError(
                    f"{label}: column {key.name} ({key.dtype}) is part of the key and needs a value")
    return out


def _subtable_of_row(catalog: Catalog, stable: TableInfo, row: dict, label: str, new_subtables: Subtables,
                     known: Subtables) -> str:
    """For ``INSERT INTO <supertable> (tbname, ...)``: the row's subtable, created from its tags if new."""
    name = row.get(TBNAME)
    if not name:
        raise WarehouseError(f"{label}: an INSERT into a supertable must give tbname for each row")
    name = str(name).lower()
    key = (stable.db, name)
    if key in new_subtables:
        return name
    found = catalog.existing_subtable(stable, name, label)
    if found is not None:
        known[key] = found
        return name
    if not any(t.name in row for t in stable.tags):
        raise WarehouseError(f"{label}: subtable {stable.db}.{name} does not exist and the row gives no tags")
    tags = {t.name: row.get(t.name) for t in stable.tags}
    new_subtables[key] = SubTable(stable.db, name, stable, tags)
    return name


def _commit(batches: Sequence[_Batch], subtables: Subtables) -> int:
    """One commit per batch, the earlier ones undone when a later one fails; the rows written.

    A statement writing one Delta table joins that table's group commit (:mod:`.group_commit`): its
    rows land in one commit, possibly shared with concurrent statements. A statement writing several
    commits alone to each, since undoing a shared commit would undo the other statements' rows."""
    commits: list[writer.Commit] = []
    total = 0
    upsert = group_commit.upsert if len(batches) == 1 else writer.upsert
    for batch in batches:
        rows = _arrow_rows(batch, subtables)
        try:
            path = batch.info.path
            keys = mapping.sources(path, batch.info.key_columns)
            commits.append(upsert(path, mapping.to_sources(path, rows), keys))
        except Exception as err:
            _undo(commits, batch, err)
        total += rows.num_rows
    return total


def _arrow_rows(batch: _Batch, subtables: Subtables) -> pa.Table:
    """The batch's rows in its table's schema, each subtable's registered tags on its rows."""
    info = batch.info

    def tags_of(name: str) -> dict[str, object]:
        sub = subtables.get((info.db, name))
        return sub.tags if sub else {}

    return batch.table(info.arrow_schema(), tags_of if info.is_super else None)


def _undo(commits: list[writer.Commit], failed: _Batch, err: Exception) -> None:
    kept = [str(c.path) for c in commits if not writer.undo(c)]
    detail = (f"; other writers committed after this statement's changes to {', '.join(kept)}, which stay"
              if kept else "")
    undone = "the statement's earlier writes were undone" if commits else "nothing was written"
    if isinstance(err, group_commit.SharedCommitFailed):
        raise WarehouseError(f"writing {', '.join(sorted(failed.labels))} failed: {err}") from err
    raise WarehouseError(
        f"writing {', '.join(sorted(failed.labels))} failed ({type(err).__name__}: {err}); "
        f"{undone}{detail}") from err


def _row_schema(info: TableInfo) -> pa.Schema:
    """The schema of an INSERT's rows before their tags are added: the data columns (and tbname)."""
    fields = [c.arrow_field() for c in info.data_columns]
    if info.is_super:
        fields.append(pa.field(TBNAME, pa.string()))
    return pa.schema(fields)


# --- DELETE (Spark) ------------------------------------------------------------------------------


def delete(warehouse: Warehouse, stmt: m.Delete) -> Result:
    db = warehouse.database_of(stmt.table)
    found = warehouse.catalog.resolve(stmt.table, db)
    info = found.stable if isinstance(found, SubTable) else found
    _check_writable(info, found.qualified, "DELETE")
    conditions = []
    if isinstance(found, SubTable):
        conditions.append(exp.column(TBNAME).eq(exp.Literal.string(found.name)).sql(dialect="spark"))
    if stmt.where is not None:
        warehouse.check_path_tables(stmt.where.tree)
        where = to_spark(stmt.where.tree, timestamp_column=info.timestamp_column, precision=info.precision)
        conditions.append(f"({where})")
    target = table_source(info.path).sql(dialect="spark")
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    # an attached table is read through its mapping: its keys are found by Spark, deleted by the kernel
    at_most = None if warehouse.catalog.store.remote or info.attached is not None else SMALL_DELETE
    count = _delete_by_key(warehouse, info, target, where, at_most=at_most)
    if count is None:  # many rows: Spark rewrites the files they are in
        with warehouse.local_time():
            affected = warehouse.spark.sql(f"DELETE FROM {target}{where}").collect()
        count = int(affected[0][0]) if affected else 0
    return Result(stmt, f"{count} row{'s' if count != 1 else ''} deleted from {found.qualified}", rows=count)


def _delete_by_key(warehouse: Warehouse, info: TableInfo, target: str, where: str, *,
                   at_most: int | None) -> int | None:
    """Spark finds the keys of the rows the condition matches, and the kernel deletes those rows;
    how many (None: more than ``at_most``, and nothing was deleted).

    On an object store every DELETE goes this way (``at_most`` None): the kernel's commit is a
    conditional PUT, while Spark's own commit through S3A would be a plain one, which a concurrent
    writer's commit of the same version could overwrite. On local disk a DELETE of a few rows
    does, since a Spark DELETE costs seconds however few rows it removes; a larger one is left
    to Spark, which does not collect the keys."""
    keys = ", ".join(f"`{k}`" for k in info.key_columns)
    limit = "" if at_most is None else f" LIMIT {at_most + 1}"
    with warehouse.local_time():
        doomed = warehouse.spark.sql(f"SELECT {keys} FROM {target}{where}{limit}").toArrow()
    if at_most is not None and doomed.num_rows > at_most:
        return None
    if doomed.num_rows:
        keys_schema = pa.schema([info.arrow_schema().field(name) for name in info.key_columns])
        writer.delete_matching(info.path, mapping.to_sources(info.path, doomed.cast(keys_schema)))
    return doomed.num_rows
