"""Delta tables found by name in the shared catalog (:mod:`airflow_stream_provider.spark.metastore`),
and the project's own tables registered there by name.

:func:`catalog_table` is the one door for a table some other job registered (``iot.readings``): it
answers the table's location and schema, read through the session's catalog, and refuses with a
clear message an unreachable metastore, an unknown database or table, and a table that is not Delta.
:func:`register_table` makes a Delta table of the warehouse (a stream's output) known by name, so
that ``spark.table("power.avg_out")`` reads it from any Spark sharing the metastore. Registered
tables are external: dropping one from the catalog leaves its files.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple
from urllib.parse import unquote, urlsplit

from sqlglot import exp

from airflow_stream_provider.exceptions import did_you_mean
from airflow_stream_provider.spark import metastore
from airflow_stream_provider.spark.metastore import MetastoreError
from airflow_stream_provider.storage import Location
from airflow_stream_provider.warehouse.catalog import WarehouseError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

__all__ = ["CatalogTable", "MetastoreError", "catalog_table", "register_table"]


class CatalogTable(NamedTuple):
    """A Delta table of the shared catalog: where it is (a local path, or an ``s3://`` URL) and its
    columns as Spark reads them."""

    location: str
    schema: StructType


def _configured() -> metastore.Metastore:
    found = metastore.configured()
    if found is None:
        raise MetastoreError("no catalog is configured: set [catalog] url in airflow-stream.toml (or "
                             "AIRFLOW_STREAM_CATALOG_URL) to the metastore's jdbc:postgresql:// URL; see "
                             "docs/catalog.md")
    return found


def split_name(name: str) -> tuple[str, str]:
    """``db.table`` as its two parts, in lower case as the metastore keeps them."""
    parts = name.strip().split(".")
    if len(parts) != 2 or not all(p.strip().strip("`") for p in parts):
        raise WarehouseError(f"catalog name {name!r}: write database.table, such as iot.readings")
    db, table = (p.strip().strip("`").lower() for p in parts)
    return db, table


def _identifier(db: str, table: str | None = None) -> str:
    names = [exp.to_identifier(db, quoted=True).sql(dialect="spark")]
    if table is not None:
        names.append(exp.to_identifier(table, quoted=True).sql(dialect="spark"))
    return ".".join(names)


def catalog_table(spark: SparkSession, name: str) -> CatalogTable:
    """The Delta table registered in the shared catalog as ``name`` (``database.table``).

    Raises :class:`MetastoreError` when no catalog is configured or its metastore cannot be reached
    (naming the URL without its password), and :class:`WarehouseError` for an unknown database or
    table (with the nearest names) or a table that is not a Delta table.
    """
    shared = _configured()
    db, table = split_name(name)
    described = _described(spark, shared, db, table)
    provider = described.get("provider", "").lower()
    if provider != "delta":
        kind = provider or described.get("type", "non-Delta").lower()
        raise WarehouseError(f"{db}.{table} in the catalog is a {kind} table, not a Delta table: streams read "
                             "Delta tables only",
                             hint="convert it with CONVERT TO DELTA, or register a Delta copy")
    detail = spark.sql(f"DESCRIBE DETAIL {_identifier(db, table)}").first()
    assert detail is not None
    return CatalogTable(local_location(str(detail["location"])), spark.table(_identifier(db, table)).schema)


def _described(spark: SparkSession, shared: metastore.Metastore, db: str, table: str) -> dict[str, str]:
    """The rows of ``DESCRIBE TABLE EXTENDED`` below its columns (Provider, Location, Type...), by
    lower-case key; the database and table must exist."""
    metastore.check_reachable(shared)
    catalog = spark.catalog
    try:
        if not catalog.databaseExists(db):
            raise WarehouseError(f"database {db} does not exist in the catalog at {shared.shown_url}",
                                 hint=did_you_mean(db, [d.name for d in catalog.listDatabases()]))
        if not catalog.tableExists(table, db):
            raise WarehouseError(f"table {db}.{table} does not exist in the catalog at {shared.shown_url}",
                                 hint=did_you_mean(table, [t.name for t in catalog.listTables(db)]))
        rows = spark.sql(f"DESCRIBE TABLE EXTENDED {_identifier(db, table)}").collect()
    except WarehouseError:
        raise
    except Exception as err:
        if _metastore_failure(err):
            raise MetastoreError(f"the catalog's metastore at {shared.shown_url} failed: {_first_line(err)}") from None
        raise
    # the table's facts follow its columns (and partitioning), after this heading: a column may be
    # called "provider" too
    names = [str(r["col_name"] or "").strip() for r in rows]
    start = next((i for i, n in enumerate(names) if n.startswith("# Detailed Table Information")), len(rows))
    return {names[i].lower(): str(rows[i]["data_type"] or "").strip() for i in range(start + 1, len(rows)) if names[i]}


def _metastore_failure(err: Exception) -> bool:
    text = str(err)
    return any(mark in text for mark in ("SessionHiveMetaStoreClient", "MetaException", "JDOFatalDataStoreException"))


def _first_line(err: Exception) -> str:
    return str(err).strip().splitlines()[0][:300] if str(err).strip() else type(err).__name__


def local_location(location: str) -> str:
    """A location as the warehouse names it: ``file:`` URLs as plain local paths, others unchanged."""
    if location.startswith("file:"):
        return str(Path(unquote(urlsplit(location).path)))
    return location


def register_table(spark: SparkSession, db: str, name: str, location: Location) -> bool:
    """Register the Delta table at ``location`` in the shared catalog as ``db.name`` (an external
    table: the catalog holds its name and location, the Delta log its schema). True when this call
    registered it, False when it already was; refused when the name is registered at another
    location, which belongs to someone else's table."""
    shared = _configured()
    metastore.check_reachable(shared)
    db, name = db.lower(), name.lower()
    wanted = local_location(str(location))
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {_identifier(db)}")
    if spark.catalog.tableExists(name, db):
        found = _described(spark, shared, db, name)
        have = local_location(found.get("location", ""))
        if have.rstrip("/") != wanted.rstrip("/"):
            raise WarehouseError(f"{db}.{name} is registered in the catalog at {shared.shown_url} for the table at "
                                 f"{have}, not for {wanted}; the stream keeps its output unregistered",
                                 hint="drop that registration, or write the stream into another table")
        return False
    literal = exp.Literal.string(wanted).sql(dialect="spark")
    spark.sql(f"CREATE TABLE IF NOT EXISTS {_identifier(db, name)} USING DELTA LOCATION {literal}")
    return True
