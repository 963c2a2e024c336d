"""Retention: how long a database keeps its rows (TDengine's ``KEEP``, IoTDB's ``TTL``), and the
retention run that deletes the older rows and vacuums the files they were in.

Each database records its retention and its horizon in ``<db>/.retention.json``: ``keep_micros``
(None: rows are kept for ever) and ``horizon``, the time before which the last run deleted every
row (it only moves forward, so a longer KEEP set later does not bring rows back to a stream's eyes).
A run (:func:`enforce`) takes every table of every database with a retention: the project's own
supertables and regular tables, and an IoTDB database's devices table; attached tables belong to
their owners and are left alone. The rows of a table whose timestamp is before ``now - keep`` are
deleted by their keys (a MERGE, no value in a predicate's text), then the table is vacuumed: files
no longer referenced and older than the table's ``delta.deletedFileRetentionDuration`` (or than
``vacuum_hours`` when given) are removed, after which time travel before them is gone.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import pyarrow as pa
from deltalake import DeltaTable

from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import read_json_object
from airflow_stream_provider.files import write_json
from airflow_stream_provider.warehouse import writer
from airflow_stream_provider.warehouse.catalog import Catalog, TableInfo

FILE = ".retention.json"


@dataclass(frozen=True)
class Retention:
    keep_micros: int | None = None  # None: rows are kept for ever
    horizon: datetime | None = None  # every row before it is gone

    @property
    def keep(self) -> timedelta | None:
        return None if self.keep_micros is None else timedelta(microseconds=self.keep_micros)


@dataclass(frozen=True)
class Expired:
    """What one retention run did to one table."""

    db: str
    table: str
    horizon: datetime
    deleted: int  # rows
    vacuumed: int  # files


def retention(catalog: Catalog, db: str) -> Retention:
    """The database's retention (none recorded: kept for ever)."""
    path = catalog.database_path(db) / FILE
    try:
        payload = read_json_object(path)
    except FileNotFoundError:
        return Retention()
    horizon = payload.get("horizon")
    return Retention(payload.get("keep_micros"), datetime.fromisoformat(horizon) if horizon else None)


def set_keep(catalog: Catalog, db: str, keep_micros: int | None) -> None:
    """Record ``db``'s retention (None: rows are kept for ever); its horizon stays."""
    catalog.precision(db)  # the database exists
    before = retention(catalog, db)
    _save(catalog, db, Retention(keep_micros, before.horizon))


def horizon(catalog: Catalog, db: str) -> datetime | None:
    """The time before which ``db``'s rows are gone (None: none were deleted by retention)."""
    try:
        return retention(catalog, db).horizon
    except (OSError, ValueError):
        return None


def _save(catalog: Catalog, db: str, value: Retention) -> None:
    write_json(catalog.database_path(db) / FILE,
               {"keep_micros": value.keep_micros, "horizon": value.horizon.isoformat() if value.horizon else None})


def enforce(catalog: Catalog, now: datetime, *, vacuum_hours: float | None = None) -> list[Expired]:
    """Delete the rows every database's retention no longer keeps, vacuum its tables, and record
    the new horizons; what was done, table by table."""
    done: list[Expired] = []
    for db in catalog.databases():
        found = retention(catalog, db)
        if found.keep is None:
            continue
        cut = now - found.keep
        if found.horizon is not None and found.horizon > cut:
            cut = found.horizon  # (a longer KEEP set later brings nothing back)
        for name in catalog.store.tables(catalog.database_path(db).name):
            info = catalog.lookup(m.TableName(name, db), db)
            if isinstance(info, TableInfo) and not info.attached:
                done.append(_expire(info, cut, vacuum_hours))
        _save(catalog, db, Retention(found.keep_micros, cut))
    return done


def _expire(info: TableInfo, cut: datetime, vacuum_hours: float | None) -> Expired:
    table = DeltaTable(str(info.path))
    keys = list(info.key_columns)
    ts = info.timestamp_column
    stamp = pa.scalar(cut, pa.timestamp("us", tz="UTC"))
    old = table.to_pyarrow_table(columns=keys, filters=[(ts, "<", stamp)])
    if old.num_rows:
        writer.delete_matching(info.path, old)
    table = DeltaTable(str(info.path))
    removed = table.vacuum(retention_hours=int(vacuum_hours) if vacuum_hours is not None else None,
                           enforce_retention_duration=vacuum_hours is None, dry_run=False)
    return Expired(info.db, info.name, cut, old.num_rows, len(removed))
