"""Names in TDengine queries resolved to the Delta tables they live in, and the queries translated
to Spark SQL over those tables.

A query reads tables by name (``db.table``, or the current database's ``table``), the tables of
``information_schema`` that its caller offers, or Delta tables of the warehouse by path
(``delta.`/path```). A path table the project did not build itself through :func:`delta_table` must
pass :func:`check_path_tables`: Spark reads ``csv.`/etc/passwd``` as readily as a table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
from sqlglot import exp

from airflow_stream_provider import model as m
from airflow_stream_provider.spark.session import arrow_frame
from airflow_stream_provider.sql import to_spark
from airflow_stream_provider.storage import TableStore
from airflow_stream_provider.warehouse import mapping
from airflow_stream_provider.warehouse.catalog import TBNAME, Catalog, SubTable, TableInfo, WarehouseError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

INFORMATION_SCHEMA = "information_schema"

#: the mark :func:`delta_table` puts on the path tables it builds
_BUILT = "airflow_stream_provider.delta_table"

#: the table holding ``information_schema.<name>`` (a temporary view of the session, :func:`system_view`)
SystemTables = Callable[[str], str]

#: (TDengine tree, placeholder bindings) -> Spark SQL
Translate = Callable[..., str]


def database_of(catalog: Catalog, current: str | None, name: m.TableName) -> str:
    """The database of ``name``: its own, or ``current``."""
    db = name.db or current
    if db is None:
        raise WarehouseError(f"no database selected for {name.name}: write db.{name.name} or USE a database first")
    return catalog.database_path(db).name  # the name rule, and a folder inside the warehouse


def delta_table(path: Path | str) -> exp.Table:
    """``delta.`/path```: the Delta table at ``path``, as Spark SQL reads it, marked as built by the
    project so that :func:`check_path_tables` lets it through (query text cannot set the mark)."""
    node = exp.Table(this=exp.to_identifier(str(path), quoted=True), db=exp.to_identifier("delta"))
    node.meta[_BUILT] = True
    return node


def table_source(path: Path | str) -> exp.Expr:
    """The rows of the table at ``path`` for a FROM clause: :func:`delta_table`, or for an attached
    table the projection that reads its columns under the model's names (:mod:`.mapping`)."""
    pairs = mapping.select_list(path)
    if pairs is None:
        return delta_table(path)
    items = [exp.alias_(exp.column(source, quoted=True), name, quoted=True) for source, name in pairs]
    return exp.select(*items).from_(delta_table(path)).subquery()


def aliased_source(path: Path | str, alias: str) -> exp.Expr:
    """:func:`table_source` under ``alias``."""
    source = table_source(path)
    if isinstance(source, exp.Subquery):
        source.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
        return source
    return source.as_(alias)


def is_path_table(node: exp.Table) -> bool:
    """``delta.`/path```: a table read by path (no TDengine name holds a slash)."""
    return "/" in node.name


def check_path_tables(store: TableStore, tree: exp.Expr) -> None:
    """Refuse the path tables of a query text that read files: only ``delta.`<path>``` inside
    the warehouse root may be named. The path tables :func:`delta_table` builds for the project's
    own queries pass."""
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


def query_trees(stmt: m.Statement) -> Iterator[exp.Expr]:
    """The query texts of ``stmt`` that may name tables: a SELECT's, a stream's, a DELETE's condition."""
    if isinstance(stmt, m.Select) or (isinstance(stmt, m.CreateStream) and stmt.query is not None):
        assert stmt.query is not None
        yield stmt.query.tree
    elif isinstance(stmt, m.Delete) and stmt.where is not None:
        yield stmt.where.tree


def system_view(session: Callable[[], SparkSession], name: str, views: Mapping[str, Callable[[], pa.Table]]) -> str:
    """A temporary view of the ``session`` holding ``information_schema.<name>`` as ``views``
    computes it now (a table not offered is refused before a session is opened)."""
    if name not in views:
        offered = ", ".join(sorted(views)) or "none here"
        raise WarehouseError(f"information_schema.{name} does not exist; the system tables are {offered}")
    view = f"__information_schema_{name}"
    arrow_frame(session(), views[name]()).createOrReplaceTempView(view)
    return view


def translator(catalog: Catalog, current: str | None, tree: exp.Expr, *, system_tables: SystemTables,
               also: tuple[TableInfo, ...] = ()) -> tuple[Translate, str | None, str]:
    """(TDengine tree -> Spark SQL, timestamp column, precision) for trees over the tables
    ``tree`` reads, in ``catalog`` with ``current`` the current database; the timestamp column is
    known when it reads one table (counting ``also``, tables read through views or paths). Delta
    paths (``delta.`/path```) are left as they are, once they pass :func:`check_path_tables`.
    ``system_tables`` gives the table of each ``information_schema`` table the caller offers.

    The translation takes the placeholder ``bindings`` of :func:`~airflow_stream_provider.sql.to_spark`.
    """
    check_path_tables(catalog.store, tree)
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    resolved: dict[tuple[str, str], TableInfo | SubTable] = {}
    system: dict[str, str] = {}
    for node in tree.find_all(exp.Table):
        if (node.db or "").lower() == INFORMATION_SCHEMA:
            system[node.name.lower()] = system_tables(node.name.lower())
        elif node.name.lower() not in ctes and not is_path_table(node):
            name = m.TableName(node.name, node.db or None)
            db = database_of(catalog, current, name)
            resolved[(db, name.name.lower())] = catalog.resolve(name, db)

    def table_ref(node: exp.Table) -> exp.Expr:
        if (node.db or "").lower() == INFORMATION_SCHEMA:
            return exp.to_table(system[node.name.lower()]).as_(node.alias or node.name)
        found = resolved.get(((node.db or current or "").lower(), node.name.lower()))
        if found is None:
            return node
        alias = node.alias or node.name
        if isinstance(found, SubTable):
            inner = exp.select("*").from_(table_source(found.stable.path)).where(
                exp.column(TBNAME).eq(exp.Literal.string(found.name)))
            return inner.subquery(alias)
        return aliased_source(found.path, alias)

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
