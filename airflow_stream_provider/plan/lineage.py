"""A stream's lineage as plain data: the tables it reads, the table it writes, and which input
columns each output column comes from. The operators report it to OpenLineage
(:mod:`airflow_stream_provider.operators.lineage`); this module knows nothing of either.

- inputs: the trigger table (``FROM`` of ``CREATE STREAM``) and every table the ``AS`` query reads
  (``%%trows`` and ``%%tbname`` are the trigger table);
- output: the ``INTO`` table;
- columns: the projection, by position: output column *i* comes from the columns its expression
  names, each from the table of its own ``FROM`` (a subquery's from the subquery's); the window
  placeholders (``_twstart``, ``_twend``, ``_c0``, ...) from the trigger table's timestamp column.

A dataset is named as the stream's asset is: namespace ``airflow-stream://<db>``, name ``<table>``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import exp

from airflow_stream_provider import model as m
from airflow_stream_provider.sql.ast import PlaceholderTable, PseudoColumn, StreamPlaceholder

SCHEME = "airflow-stream"


@dataclass(frozen=True)
class TableRef:
    db: str
    name: str

    @property
    def namespace(self) -> str:
        return f"{SCHEME}://{self.db}"

    @classmethod
    def of(cls, table: m.TableName, db: str) -> TableRef:
        return cls((table.db or db).lower(), table.name.lower())


@dataclass(frozen=True)
class ColumnLineage:
    column: str
    #: (table, column) of every input field it comes from
    sources: tuple[tuple[TableRef, str], ...]


@dataclass(frozen=True)
class StreamLineage:
    inputs: tuple[TableRef, ...]
    output: TableRef | None
    columns: tuple[ColumnLineage, ...]


def _from_tables(select: exp.Select, db: str, trigger: TableRef | None) -> dict[str, TableRef]:
    """The tables of ``select``'s FROM and JOINs by alias and name ("" for the first one)."""
    found: dict[str, TableRef] = {}
    sources = [select.args.get("from") or select.args.get("from_")] + list(select.args.get("joins") or [])
    for source in sources:
        if source is None:
            continue
        node = source.this
        ref = None
        if isinstance(node, PlaceholderTable):
            ref = trigger
        elif isinstance(node, exp.Table):
            ref = TableRef(((node.db or db) or "").lower(), node.name.lower())
        if ref is None:
            continue
        found.setdefault("", ref)
        found[ref.name] = ref
        alias = node.alias if isinstance(node, exp.Table) else ""
        if alias:
            found[alias.lower()] = ref
    return found


def _sources(expression: exp.Expression, db: str, trigger: TableRef | None,
             ts_column: str | None) -> tuple[tuple[TableRef, str], ...]:
    out: dict[tuple[TableRef, str], None] = {}
    for node in expression.walk():
        if isinstance(node, exp.Column):
            select = node.find_ancestor(exp.Select)
            tables = _from_tables(select, db, trigger) if select is not None else {}
            ref = tables.get(node.table.lower()) if node.table else tables.get("")
            if ref is not None:
                out[(ref, node.name.lower())] = None
        elif isinstance(node, (StreamPlaceholder, PseudoColumn)) and trigger is not None and ts_column:
            out[(trigger, ts_column.lower())] = None
    return tuple(out)


def lineage_of(stmt: m.CreateStream, db: str, *, output_columns: Sequence[str] | None = None,
               ts_column: str | None = None) -> StreamLineage:
    """The lineage of stream ``stmt`` of database ``db``.

    :param output_columns: the result's column names in order (the stream's result schema); by
        default the projection's aliases or names.
    :param ts_column: the trigger table's timestamp column, which the window placeholders come from.
    """
    trigger = TableRef.of(stmt.trigger_table, db) if stmt.trigger_table is not None else None
    inputs: dict[TableRef, None] = {trigger: None} if trigger is not None else {}
    columns: list[ColumnLineage] = []
    tree = stmt.query.tree if stmt.query is not None else None
    if tree is not None:
        for table in tree.find_all(exp.Table):
            inputs[TableRef(((table.db or db) or "").lower(), table.name.lower())] = None
        if isinstance(tree, exp.Select):
            for position, projection in enumerate(tree.expressions):
                name = output_columns[position] if output_columns and position < len(output_columns) \
                    else projection.alias_or_name
                columns.append(ColumnLineage(name, _sources(projection, db, trigger, ts_column)))
    output = TableRef.of(stmt.into, db) if stmt.into is not None else None
    return StreamLineage(tuple(inputs), output, tuple(columns))
