"""A stream's output table (reference 000, "Stream Processing Output", "Rules and Limitations").

- Without PARTITION BY, ``INTO`` names a regular table; with it, a supertable with one subtable
  per group, named by ``OUTPUT_SUBTABLE(expr)`` or generated (``<stream>_<group id>``: unique and
  the same on every run). A generated name the name rule refuses is encoded (:func:`subtable_name`).
- Columns are those of the computation, renamed by the column list; ``COMPOSITE KEY`` makes the
  second one part of the key. Tags are ``TAGS (name type AS expr)``, or by default the grouping
  columns (``tbname`` becomes ``tag_tbname VARCHAR(270)``).
- The table is created with the stream. An existing table must match column for column.
- The first column is the timestamp key: a result row whose first column is NULL is discarded and
  counted. A write of an existing key replaces the row, so re-running a trigger is idempotent.

Result column names that Delta cannot store (``avg(col1)``) are written with every run of other
characters replaced by ``_`` (``avg_col1``).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import types as T
from sqlglot import exp

from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import StreamDefinitionError, did_you_mean
from airflow_stream_provider.model import names
from airflow_stream_provider.warehouse import listeners, writer
from airflow_stream_provider.warehouse.catalog import (
    TBNAME,
    Catalog,
    Column,
    TableInfo,
    WarehouseError,
)

#: longest table name (TDengine's limit, in bytes); longer generated names are encoded
MAX_NAME = names.TABLE.max_bytes
#: hex digits of the hash that an encoded subtable name ends with
_DIGEST = 8
DEFAULT_STRING = m.DataType("VARCHAR", (65517,))


def spark_to_tdengine(dtype: T.DataType, column: str) -> m.DataType:
    """The TDengine type of a computed column."""
    simple = {
        T.TimestampType: "TIMESTAMP", T.TimestampNTZType: "TIMESTAMP", T.LongType: "BIGINT",
        T.IntegerType: "INT", T.ShortType: "SMALLINT", T.ByteType: "TINYINT", T.DoubleType: "DOUBLE",
        T.FloatType: "FLOAT", T.BooleanType: "BOOL", T.BinaryType: "VARBINARY",
    }
    for kind, name in simple.items():
        if isinstance(dtype, kind):
            return m.DataType(name, (65517,) if name == "VARBINARY" else ())
    if isinstance(dtype, (T.StringType, T.VarcharType, T.CharType)):
        return DEFAULT_STRING
    if isinstance(dtype, T.DecimalType):
        return m.DataType("DECIMAL", (dtype.precision, dtype.scale))
    if isinstance(dtype, T.NullType):
        raise StreamDefinitionError(f"output column {column} is always NULL, so it has no type: CAST it",
                                    clause="AS")
    raise StreamDefinitionError(f"output column {column} has type {dtype.simpleString()}, which a TDengine "
                                "table cannot hold", clause="AS")


def subtable_name(generated: str) -> str:
    """The stored name (lower case) of an output subtable whose name a stream generated, from
    ``OUTPUT_SUBTABLE(expr)`` or as ``<stream>_<group id>``: a name that obeys the name rule is kept
    as it is; another (``eu/paris``, a control character, a ``.``, more than 192 bytes, the
    reserved ``tbname``) has each character the rule rejects replaced by ``_``, is cut to fit, and
    ends with ``_`` and 8 hex digits of the SHA-256 of the whole name, so that two names stay two
    subtables and a data value never blocks the stream."""
    name = generated.lower()
    if name != names.TBNAME and names.name_problem(name, names.TABLE) is None:
        return name
    clean = "".join("_" if names.bad_character(c, names.TABLE) else c for c in name)
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST]
    room = MAX_NAME - len(digest) - 1
    cut = clean.encode("utf-8")[:room].decode("utf-8", "ignore")
    return f"{cut}_{digest}"


def storable(name: str) -> str:
    """A Delta-safe column name: runs of characters other than letters, digits and ``_`` become ``_``."""
    clean = re.sub(r"[^0-9A-Za-z_]+", "_", name).rstrip("_").lower()
    if not name.startswith("_"):
        clean = clean.lstrip("_")
    return clean or "col"


@dataclass(frozen=True)
class Tag:
    name: str
    dtype: m.DataType
    expr: exp.Expr | None  # over the grouping columns; None: the group id


#: the tag a legacy stream's output subtables carry when TAGS names none (reference 001: groupId)
GROUP_ID_TAG = Tag("group_id", m.DataType("BIGINT UNSIGNED"), None)


@dataclass(frozen=True)
class OutputPlan:
    """Where and how a stream's results are written."""

    db: str
    name: str
    columns: tuple[Column, ...]  # timestamp, [composite key], values (without tbname and tags)
    result_names: tuple[str, ...]  # the computation's column names, in order
    tags: tuple[Tag, ...] = ()
    subtable: exp.Expr | None = None  # OUTPUT_SUBTABLE(expr)
    grouped: bool = False
    #: for each of ``columns``, the result column it takes (None: NULL); None: each in its order
    sources: tuple[int | None, ...] | None = None
    #: a named output subtable ends with ``_<table>_<group id>`` (TDengine before 3.3.7, since 3.2.3.0)
    subtable_suffix: bool = False

    def source_of(self, i: int) -> int | None:
        return i if self.sources is None else self.sources[i]

    @property
    def qualified(self) -> str:
        return f"{self.db}.{self.name}"

    def table_columns(self) -> tuple[Column, ...]:
        if not self.grouped:
            return self.columns
        return (*self.columns, Column(TBNAME, m.DataType("VARCHAR", (MAX_NAME,)), TBNAME),
                *(Column(t.name, t.dtype, "tag") for t in self.tags))

    # --- planning -------------------------------------------------------------------------------

    @classmethod
    def build(cls, stmt: m.CreateStream, db: str, schema: T.StructType, group_columns: list[Column]) -> OutputPlan:
        """The output of ``stmt`` for results of ``schema`` (after the ``__idx`` column)."""
        assert stmt.into is not None
        fields = [f for f in schema.fields if f.name != "__idx"]
        if not fields:
            raise StreamDefinitionError("the computation returns no columns", clause="AS")
        if stmt.columns and len(stmt.columns) != len(fields):
            raise StreamDefinitionError(
                f"the column list names {len(stmt.columns)} columns, but the computation returns {len(fields)} "
                f"({', '.join(f.name for f in fields)})", clause="columns")
        names = [c.name.lower() for c in stmt.columns] if stmt.columns else [storable(f.name) for f in fields]
        seen: dict[str, int] = {}
        for i, name in enumerate(names):
            if name in seen:
                names[i] = f"{name}_{i + 1}"
            seen[name] = i
        types = [spark_to_tdengine(f.dataType, names[i]) for i, f in enumerate(fields)]
        if types[0].name != "TIMESTAMP":
            raise StreamDefinitionError(
                f"the first output column ({fields[0].name}) must be a TIMESTAMP, the output table's key; "
                f"the computation gives {types[0]}", clause="AS")
        composite = bool(stmt.columns) and len(stmt.columns) > 1 and stmt.columns[1].composite_key
        if composite and types[1].name not in ("INT", "BIGINT", "INT UNSIGNED", "BIGINT UNSIGNED", "VARCHAR",
                                              "BINARY"):
            raise StreamDefinitionError(f"COMPOSITE KEY column {names[1]} must be an integer or VARCHAR, not "
                                        f"{types[1]}", clause="columns")
        columns = tuple(Column(n, t, "ts" if i == 0 else "key" if i == 1 and composite else "metric")
                        for i, (n, t) in enumerate(zip(names, types)))
        into = stmt.into
        grouped = stmt.grouped  # (PARTITION BY or ROLLUP BY)
        tags: list[Tag] = []
        if grouped and stmt.tags:
            for t in stmt.tags:
                if t.type is None:
                    raise StreamDefinitionError(f"TAGS ({t.name}) names a tag of an existing supertable; give its "
                                                f"type to create {into}: TAGS ({t.name} type)", clause="TAGS")
            tags = [Tag(t.name.lower(), t.type, t.expr.tree) for t in stmt.tags if t.type is not None]
        elif grouped:
            for col in group_columns:
                if col.name == TBNAME:
                    tags.append(Tag("tag_tbname", m.DataType("VARCHAR", (270,)), exp.column(TBNAME)))
                else:
                    tags.append(Tag(col.name, col.dtype, exp.column(col.name, quoted=True)))
        taken = {c.name for c in columns}
        for tag in tags:
            if tag.name in taken:
                raise StreamDefinitionError(f"tag {tag.name} has the name of an output column; name the tags "
                                            "with TAGS (...) or rename the columns", clause="TAGS")
            taken.add(tag.name)
        return cls(db=(into.db or db).lower(), name=into.name.lower(), columns=columns,
                   result_names=tuple(f.name for f in fields), tags=tuple(tags),
                   subtable=stmt.output_subtable.tree if stmt.output_subtable else None, grouped=grouped)

    @classmethod
    def legacy(cls, stmt: m.CreateStream, db: str, schema: T.StructType,
               existing: TableInfo | None) -> OutputPlan:
        """The output of a stream of TDengine's engine before 3.3.7 (references 001 and 003): always a
        supertable, one subtable per group. A new one takes the computation's columns (named by
        the column list), and its tags from TAGS (the values of the PARTITION BY items of the same
        name) or one ``group_id`` tag. Into an existing one, the results go by position, or to the
        columns the list names (the others stay NULL), converted to the column types; TAGS names
        the tags it fills, or else tags are filled by name from the PARTITION BY items and
        ``group_id``, and the rest stay NULL."""
        assert stmt.into is not None
        fields = [f for f in schema.fields if f.name != "__idx"]
        if not fields:
            raise StreamDefinitionError("the computation returns no columns", clause="AS")
        if existing is None:
            plan = cls.build(stmt, db, schema, [])
            if stmt.tags:
                tags = tuple(Tag(t.name.lower(), t.type, t.expr.tree) for t in stmt.tags if t.type is not None)
            else:
                tags = (GROUP_ID_TAG,)
            taken = {c.name for c in plan.columns}
            for tag in tags:
                if tag.name in taken:
                    raise StreamDefinitionError(f"tag {tag.name} has the name of an output column", clause="TAGS")
            return cls(db=plan.db, name=plan.name, columns=plan.columns, result_names=plan.result_names, tags=tags,
                       subtable=plan.subtable, grouped=True, subtable_suffix=True)
        target = existing.qualified
        if not existing.is_super:
            raise WarehouseError(f"output table {target} is a regular table; a stream of TDengine before 3.3.7 "
                                 "writes into a supertable")
        columns = existing.data_columns
        if stmt.columns:
            names = [c.name.lower() for c in stmt.columns]
            if len(names) != len(fields):
                raise StreamDefinitionError(f"the column list names {len(names)} columns of {target}, but the "
                                            f"computation returns {len(fields)}", clause="columns")
            have = {c.name for c in columns}
            for name in names:
                if name not in have:
                    raise StreamDefinitionError(f"{target} has no column {name}", clause="columns",
                                                hint=did_you_mean(name, have))
            sources = tuple(names.index(c.name) if c.name in names else None for c in columns)
            if sources[0] is None:
                raise StreamDefinitionError(f"the column list must name {columns[0].name}, the timestamp of "
                                            f"{target}", clause="columns")
        else:
            if len(columns) != len(fields):
                raise StreamDefinitionError(
                    f"{target} has {len(columns)} columns, but the computation returns {len(fields)}: name the "
                    f"columns it fills, as in INTO {existing.name}({', '.join(c.name for c in columns)})",
                    clause="INTO")
            sources = tuple(range(len(columns)))
        given = {t.name.lower(): t for t in stmt.tags}
        have_tags = {t.name for t in existing.tags}
        for name in given:
            if name not in have_tags:
                raise StreamDefinitionError(f"{target} has no tag {name}", clause="TAGS",
                                            hint=did_you_mean(name, have_tags))
        groups = {k.lower(): k for k in stmt.partition_by}
        filled: list[Tag] = []
        for column in existing.tags:
            if column.name in given:
                expr: exp.Expr | None = given[column.name].expr.tree
            elif not given and column.name in groups:
                expr = exp.column(groups[column.name], quoted=True)
            elif not given and column.name == GROUP_ID_TAG.name:
                expr = None
            else:
                expr = exp.Null()
            filled.append(Tag(column.name, column.dtype, expr))
        return cls(db=existing.db, name=existing.name, columns=columns,
                   result_names=tuple(f.name for f in fields), tags=tuple(filled),
                   subtable=stmt.output_subtable.tree if stmt.output_subtable else None, grouped=True,
                   sources=sources, subtable_suffix=True)

    # --- the table ------------------------------------------------------------------------------

    def ensure_table(self, catalog: Catalog) -> TableInfo:
        """Create the output table, or check that the existing one has this schema."""
        wanted = self.table_columns()
        found = catalog.lookup(m.TableName(self.name, self.db), self.db)
        if found is None:
            catalog.create_table(self.db, self.name, wanted, if_not_exists=True)
            found = catalog.lookup(m.TableName(self.name, self.db), self.db)
        if not isinstance(found, TableInfo):
            raise WarehouseError(f"output table {self.qualified} is a subtable; INTO needs a table or supertable")
        check_schema(found, wanted)
        return found


def check_schema(info: TableInfo, wanted: tuple[Column, ...]) -> None:
    """Refuse a table whose columns differ from ``wanted`` (name, role, storage type), naming the column."""
    have = info.columns
    for i, col in enumerate(wanted):
        if i >= len(have):
            raise WarehouseError(f"output table {info.qualified} has no column {col.name} ({col.dtype}); the "
                                 f"stream writes {len(wanted)} columns")
        other = have[i]
        if other.name != col.name:
            raise WarehouseError(f"output table {info.qualified}: column {i + 1} is {other.name}, but the stream "
                                 f"writes {col.name} there")
        if other.role != col.role or other.arrow_field().type != col.arrow_field().type:
            raise WarehouseError(f"output table {info.qualified}: column {col.name} is {other.dtype} "
                                 f"({other.role}), but the stream writes {col.dtype} ({col.role})")
    if len(have) > len(wanted):
        raise WarehouseError(f"output table {info.qualified} has a column the stream does not write: "
                             f"{have[len(wanted)].name}")


def write(info: TableInfo, rows: pa.Table) -> tuple[int, int]:
    """Upsert ``rows`` (the table's columns, in order) by the table's key; (written, discarded) where
    discarded rows had a NULL first column."""
    first = info.columns[0].name
    valid = pc.is_valid(rows[first])
    discarded = rows.num_rows - pc.sum(valid).as_py() if rows.num_rows else 0
    if discarded:
        rows = rows.filter(valid)
    if rows.num_rows:
        schema = info.arrow_schema()
        rows = pa.table([rows[f.name].cast(f.type) for f in schema], schema=schema)
        listening = listeners.active()
        writes = listeners.table_writes(info, rows, per_row=False) if listening else []
        listeners.before(listening, writes)
        writer.upsert(info.path, rows, info.key_columns)
        listeners.after(listening, writes)
    return rows.num_rows, discarded
