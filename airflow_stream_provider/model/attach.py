"""Attaching a Delta table the project did not create: which of its columns is the timestamp,
the subtable name, the tags and the metrics, whatever language said so."""

from __future__ import annotations

from dataclasses import dataclass

from airflow_stream_provider.model.statements import Statement
from airflow_stream_provider.model.types import Position, TableName

#: the roles a mapped column takes in the model (as :class:`~airflow_stream_provider.warehouse.catalog.Column`)
ROLES = ("ts", "tbname", "tag", "metric")


@dataclass(frozen=True)
class MappedColumn:
    """Model column ``name`` read from the table's column ``source``."""

    name: str
    source: str
    role: str
    position: Position | None = None

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"a mapped column's role is one of {ROLES}, not {self.role!r}")


@dataclass(frozen=True)
class AttachTable(Statement):
    """``CREATE [S]TABLE name FROM DELTA 'path' MAP (...)``: the table at ``path`` read as a
    supertable (with a ``tbname`` column) or a regular table, never copied or rewritten.

    ``columns`` None: every column of the table the map does not name otherwise is a metric.
    ``catalog``: the table's ``database.table`` in the shared catalog, whose location the attach
    reads there (``path`` is then empty).
    """

    name: TableName
    path: str
    timestamp: MappedColumn
    tbname: MappedColumn | None
    tags: tuple[MappedColumn, ...]
    columns: tuple[MappedColumn, ...] | None
    writable: bool = False
    enable_change_feed: bool = False
    if_not_exists: bool = False
    catalog: str | None = None
    kind = "ATTACH TABLE"

    def __post_init__(self) -> None:
        if self.tags and self.tbname is None:
            raise ValueError("tags need a TBNAME column: a table with tags is a supertable")

    @property
    def stable(self) -> bool:
        return self.tbname is not None

    @property
    def subject(self) -> str:
        return str(self.name)

    def mapped(self) -> tuple[MappedColumn, ...]:
        """The columns the map names, timestamp first."""
        return (self.timestamp, *((self.tbname,) if self.tbname else ()), *self.tags, *(self.columns or ()))


@dataclass(frozen=True)
class ShowTables(Statement):
    """``SHOW [db.]STABLES`` or ``SHOW [db.]TABLES``: the tables of a database, attached ones with
    where they come from."""

    db: str | None = None
    stable: bool = False
    kind = "SHOW TABLES"


@dataclass(frozen=True)
class Describe(Statement):
    """``DESCRIBE [db.]table``: its columns, their types and roles, and an attached table's columns they read."""

    name: TableName
    kind = "DESCRIBE"

    @property
    def subject(self) -> str:
        return str(self.name)
