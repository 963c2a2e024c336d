"""Values shared by every statement: positions, table names, embedded SQL, data types, literals."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from airflow_stream_provider.model.time import TimePoint

if TYPE_CHECKING:
    from sqlglot import exp


@dataclass(frozen=True)
class Position:
    line: int
    column: int


@dataclass(frozen=True)
class TableName:
    name: str
    db: str | None = None

    def qualified(self, default_db: str | None = None) -> str:
        db = self.db or default_db
        return f"{db}.{self.name}" if db else self.name

    def key(self, default_db: str | None = None) -> tuple[str | None, str]:
        """Identity for comparisons: TDengine names are case-insensitive."""
        db = self.db or default_db
        return (db.lower() if db else None, self.name.lower())

    def __str__(self) -> str:
        return self.qualified()


@dataclass(frozen=True)
class SqlExpression:
    """SQL text with the tree its language parsed it into; equal when the text is equal.

    The tree belongs to the statement: copy it (``tree.copy()``) before transforming it.
    ``placeholders`` names the placeholders the tree uses (``_twstart``, ``%%tbname``, ``%%1``...),
    found by the parser, so that no reader of the model needs the language to walk the tree.
    """

    text: str
    tree: exp.Expr = field(compare=False, hash=False, repr=False)
    position: Position | None = field(default=None, compare=False)
    placeholders: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class DataType:
    """A column type: ``name`` upper-case (``VARCHAR``, ``INT UNSIGNED``...), ``args`` its sizes."""

    name: str
    args: tuple[int, ...] = ()

    def __str__(self) -> str:
        return self.name + (f"({', '.join(map(str, self.args))})" if self.args else "")


Value = int | float | str | bool | None | TimePoint
