"""ROLLUP BY tag (TDengine 3.4.2): a tag value ``A.B.C`` puts its subtable's rows in the groups ``A``,
``A.B`` and ``A.B.C``.

A rollup group is one path prefix; its rows are those of every subtable whose path is the prefix
itself or lies below it. A NULL or empty value makes no group. Any other value must be a path:
segments separated by ``.``, none empty (so no leading, trailing or repeated ``.``), none with a
control character or with spaces at either end. A value that is not a path puts the stream in
error (:class:`RollupPathError`), as TDengine does, rather than being skipped.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from airflow_stream_provider.exceptions import StreamDefinitionError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

SEPARATOR = "."
CLAUSE = "ROLLUP BY"


class RollupPathError(StreamDefinitionError):
    """A ROLLUP BY tag value that is not a dotted path: the stream stops with this as its error."""

    #: how its message begins (a stream failed by it is well again once a run passes)
    PREFIX = "ROLLUP BY "


def path_problem(value: str) -> str | None:
    """Why the non-empty ``value`` is not a rollup path, or None when it is one."""
    segments = value.split(SEPARATOR)
    if segments[0] == "":
        return f"it begins with the separator '{SEPARATOR}'"
    if segments[-1] == "":
        return f"it ends with the separator '{SEPARATOR}'"
    for number, segment in enumerate(segments, start=1):
        if segment == "":
            return f"segment {number} is empty (a repeated '{SEPARATOR}')"
        if any(unicodedata.category(ch) == "Cc" for ch in segment):
            return f"segment {number} holds a control character"
        if segment != segment.strip():
            return f"segment {number} ({segment!r}) has spaces at its start or end"
    return None


def prefixes(value: object, *, tag: str = "tag", table: object = None) -> tuple[str, ...]:
    """The rollup groups of one subtable whose ROLLUP BY tag holds ``value``, from the root down;
    none for NULL or an empty string.

    :param tag: the tag's name and ``table`` the subtable's, for the error.
    """
    if value is None or (isinstance(value, float) and np.isnan(value)) or value == "":
        return ()
    text = str(value)
    problem = path_problem(text)
    if problem is not None:
        where = f" of subtable {table}" if table is not None else ""
        raise RollupPathError(f"ROLLUP BY {tag}: the value {text!r}{where} is not a rollup path: {problem}",
                              clause=CLAUSE, hint="write segments separated by single dots, as factory.workshop.line")
    segments = text.split(SEPARATOR)
    return tuple(SEPARATOR.join(segments[:n]) for n in range(1, len(segments) + 1))


def leaf(path: str) -> str:
    """``%%rollup_tag``: the last segment of a group's path (the whole path when it has no ``.``)."""
    return path.rsplit(SEPARATOR, 1)[-1]


def covers(group: str, path: object) -> bool:
    """The rows of a subtable at ``path`` belong to the rollup ``group``."""
    return isinstance(path, str) and (path == group or path.startswith(group + SEPARATOR))


def table_counts(tables: Iterable[tuple[object, object]], *, tag: str = "tag") -> dict[str, int]:
    """``_trollup_tbcount`` of each group that (subtable, tag value) pairs make: how many distinct
    subtables each path prefix gathers."""
    members: dict[str, set] = {}
    for table, value in tables:
        for group in prefixes(value, tag=tag, table=table):
            members.setdefault(group, set()).add(table)
    return {group: len(found) for group, found in members.items()}


def expand(frame: pd.DataFrame, column: str, *, table_column: str | None = "tbname") -> pd.DataFrame:
    """Each row of ``frame`` once per rollup group of its ``column`` value, that column then naming
    the group; rows of a NULL or empty value leave, and the groups keep the order of the rows.

    Each distinct value is split once, so the cost is one ``take`` of the rows.
    """
    values = frame[column].to_numpy(object)
    codes, distinct = pd.factorize(values, use_na_sentinel=True)
    tables = frame[table_column].to_numpy(object) if table_column is not None and table_column in frame else None
    first_of = pd.Series(np.arange(len(values))).groupby(codes).first() if tables is not None else None
    paths: list[tuple[str, ...]] = []
    for code, value in enumerate(distinct):
        table = tables[first_of[code]] if tables is not None and first_of is not None else None
        paths.append(prefixes(value, tag=column, table=table))
    counts = np.array([len(p) for p in paths] + [0], dtype=np.int64)  # the last: NULL (code -1)
    per_row = counts[codes]
    rows = np.repeat(np.arange(len(values)), per_row)
    flat = np.array([g for p in paths for g in p] + [None], dtype=object)
    starts = np.concatenate([[0], np.cumsum(counts[:-1])])[:len(paths)]
    row_codes = codes[rows]
    offsets = np.arange(len(rows)) - np.repeat(np.cumsum(per_row) - per_row, per_row)
    out = frame.take(rows).reset_index(drop=True)
    out[column] = flat[starts[row_codes] + offsets] if len(rows) else np.empty(0, object)
    return out


def expand_arrow(table: pa.Table, column: str, *, table_column: str | None = "tbname") -> pa.Table:
    """:func:`expand` of an Arrow table: each row once per rollup group of its ``column`` value,
    that column then naming the group (a string column)."""
    if not table.num_rows:
        return table.set_column(table.schema.get_field_index(column), column, pa.array([], pa.string()))
    values = table[column].combine_chunks()
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    encoded = pc.dictionary_encode(values.cast(pa.string()))
    distinct = encoded.dictionary.to_pylist()
    codes = encoded.indices.fill_null(len(distinct)).to_numpy(zero_copy_only=False).astype(np.int64)
    tables = table[table_column] if table_column is not None and table_column in table.column_names else None
    paths: list[tuple[str, ...]] = []
    if tables is not None:
        first = np.full(len(distinct), -1, np.int64)
        seen = codes < len(distinct)
        first[codes[seen][::-1]] = np.nonzero(seen)[0][::-1]
    for code, value in enumerate(distinct):
        owner = tables[int(first[code])].as_py() if tables is not None and first[code] >= 0 else None
        paths.append(prefixes(value, tag=column, table=owner))
    counts = np.array([len(p) for p in paths] + [0], dtype=np.int64)  # the last: NULL
    per_row = counts[codes]
    rows = np.repeat(np.arange(len(codes)), per_row)
    flat = pa.array([g for p in paths for g in p], pa.string())  # each distinct path's groups, in turn
    starts = np.concatenate([[0], np.cumsum(counts[:-1])])[:len(paths) + 1]
    offsets = np.arange(len(rows)) - np.repeat(np.cumsum(per_row) - per_row, per_row)
    out = table.take(pa.array(rows, pa.int64()))
    groups = flat.take(pa.array(starts[codes[rows]] + offsets, pa.int64()))  # (one take in Arrow)
    return out.set_column(out.schema.get_field_index(column), column, groups)


def member_mask(values: pd.Series, group: object) -> np.ndarray:
    """The rows of ``values`` (ROLLUP BY tag values) that belong to the rollup ``group``."""
    if not isinstance(group, str):
        return np.zeros(len(values), bool)
    text = values.astype(object)
    return np.fromiter((covers(group, v) for v in text), bool, len(text))


def spark_expand(df: DataFrame, column: str) -> DataFrame:
    """:func:`expand` in Spark: each row once per path prefix of its ``column`` value (the column then
    naming the group); NULL and empty values make none. The values are checked where the rows are
    read in the process (:func:`expand`, :func:`table_counts`); here a path is split as it stands."""
    from pyspark.sql import functions as F

    name = f"`{column}`"
    parts = f"split({name}, '[.]')"
    groups = F.expr(f"CASE WHEN {name} IS NULL OR {name} = '' THEN array() ELSE "
                    f"transform(sequence(1, size({parts})), n -> array_join(slice({parts}, 1, n), '.')) END")
    return df.withColumn(column, F.explode(groups))

