"""TDengine's schemaless rules, from parsed rows to typed columns: the measurement is the
supertable, the sorted tag set names the subtable (``t_`` and the MD5 of
``measurement,key1=value1,key2=value2``, or the value of the configured name tag), tags are NCHAR,
a field's type comes from its suffix (``i8``..``u64``, ``f32``, ``f64`` or none: DOUBLE), its
quotes (``"..."`` VARCHAR, ``L"..."`` NCHAR) or its word (``t``/``true``/``f``/``false``: BOOL),
and the time column is ``_ts``. Dots in made names become underscores, as TDengine's do.

Every value of a column must have the column's type: a field written as ``4`` (DOUBLE) in one row
and ``4i`` (BIGINT) in another is an error naming both lines, as TDengine's schema check is.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_stream_provider import model as m
from airflow_stream_provider.serve.lineproto import Measurement, ProtocolError

#: the name of the time column of a supertable made by schemaless writing (TDengine's smlTsDefaultName)
TIME_COLUMN = "_ts"
#: the tag of a supertable whose rows have no tags
NULL_TAG = "_tag_null"
#: the value column of OpenTSDB's rows
VALUE_COLUMN = "_value"

#: microseconds per unit of each precision a request may give (InfluxDB's names and TDengine's)
MICROS_PER = {"ns": 0.001, "n": 0.001, "u": 1, "us": 1, "µ": 1, "ms": 1_000, "s": 1_000_000,
              "m": 60_000_000, "h": 3_600_000_000}

_TRUE = ("t", "T", "true", "True", "TRUE")
_FALSE = ("f", "F", "false", "False", "FALSE")
_NUMBER = r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?"
_INTEGER = r"[-+]?\d+"

#: (TDengine type, pattern of the whole raw value, the suffix to strip), tried in order
_NUMERIC = (
    ("BIGINT", rf"^{_INTEGER}(i64|i)$", r"(i64|i)$"),
    ("BIGINT UNSIGNED", r"^\+?\d+(u64|u)$", r"(u64|u)$"),
    ("INT", rf"^{_INTEGER}i32$", r"i32$"),
    ("INT UNSIGNED", r"^\+?\d+u32$", r"u32$"),
    ("SMALLINT", rf"^{_INTEGER}i16$", r"i16$"),
    ("SMALLINT UNSIGNED", r"^\+?\d+u16$", r"u16$"),
    ("TINYINT", rf"^{_INTEGER}i8$", r"i8$"),
    ("TINYINT UNSIGNED", r"^\+?\d+u8$", r"u8$"),
    ("FLOAT", rf"^{_NUMBER}f32$", r"f32$"),
    ("DOUBLE", rf"^{_NUMBER}(f64)?$", r"f64$"),
)
_ARROW = {"BIGINT": pa.int64(), "BIGINT UNSIGNED": pa.uint64(), "INT": pa.int32(), "INT UNSIGNED": pa.uint32(),
          "SMALLINT": pa.int16(), "SMALLINT UNSIGNED": pa.uint16(), "TINYINT": pa.int8(),
          "TINYINT UNSIGNED": pa.uint8(), "FLOAT": pa.float32(), "DOUBLE": pa.float64()}


@dataclass(frozen=True)
class TypedColumn:
    name: str
    dtype: m.DataType
    values: pa.Array


@dataclass(frozen=True)
class SupertableRows:
    """The rows of one request bound for one supertable, in columns."""

    stable: str
    times: pa.Array  # epoch microseconds (int64)
    tbnames: pa.Array  # string
    metrics: tuple[TypedColumn, ...]
    tags: tuple[TypedColumn, ...]
    lines: tuple[int, ...]

    @property
    def rows(self) -> int:
        return len(self.times)


def made_name(name: str) -> str:
    """A supertable or subtable name as schemaless writing makes it: dots become underscores."""
    return name.replace(".", "_")


def child_table_name(measurement: str, tags: Sequence[tuple[str, str]]) -> str:
    """TDengine's subtable name of a tag set: ``t_`` and the MD5 (hex) of ``measurement,k1=v1,...``
    with the tags sorted by key."""
    text = ",".join([measurement, *(f"{k}={v}" for k, v in sorted(tags))])
    return "t_" + hashlib.md5(text.encode("utf-8")).hexdigest()


def kind_of(raw: str) -> str:
    """The TDengine type of one raw field value (see :mod:`.lineproto`), or raises ValueError."""
    if raw.startswith('"'):
        return "VARCHAR"
    if raw.startswith('L"'):
        return "NCHAR"
    if raw[:2] in ('G"', 'B"'):
        raise ValueError("GEOMETRY and VARBINARY fields are not supported")
    if raw in _TRUE or raw in _FALSE:
        return "BOOL"
    for name, whole, _ in _NUMERIC:
        if re.match(whole, raw):
            return name
    raise ValueError(f"{raw!r} is no value of a type TDengine's schemaless writing knows")


def typed(measurement: str, name: str, raw: list[str | None], lines: Sequence[int]) -> TypedColumn:
    """A field column as its TDengine type (that of its first value) and values."""
    first = next(i for i, v in enumerate(raw) if v is not None)
    try:
        kind = kind_of(raw[first])  # type: ignore[arg-type]
    except ValueError as err:
        raise ProtocolError(f"{measurement} field {name}: {err}", lines[first]) from None
    array = pa.array(raw, pa.string())
    valid = array.is_valid()
    if kind in ("VARCHAR", "NCHAR"):
        fits = pc.starts_with(array, '"' if kind == "VARCHAR" else 'L"')
        if kind == "VARCHAR":
            fits = pc.and_(fits, pc.invert(pc.starts_with(array, 'L"')))
        _check(fits, valid, measurement, name, kind, raw, lines, first)
        values = pc.utf8_slice_codeunits(array, 1 if kind == "VARCHAR" else 2)
        size = pc.max(pc.binary_length(values) if kind == "VARCHAR" else pc.utf8_length(values)).as_py() or 1
        return TypedColumn(name, m.DataType(kind, (max(size, 1),)), values)
    if kind == "BOOL":
        _check(pc.is_in(array, pa.array(_TRUE + _FALSE)), valid, measurement, name, kind, raw, lines, first)
        return TypedColumn(name, m.DataType("BOOL"), pc.if_else(valid, pc.is_in(array, pa.array(_TRUE)), None))
    whole, suffix = next((w, s) for n, w, s in _NUMERIC if n == kind)
    _check(pc.match_substring_regex(array, whole), valid, measurement, name, kind, raw, lines, first)
    stripped = pc.replace_substring_regex(array, suffix, "")
    try:
        values = pc.cast(stripped, _ARROW[kind])
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        bad = next(i for i, v in enumerate(stripped.to_pylist()) if v is not None and not _fits(v, _ARROW[kind]))
        raise ProtocolError(f"{measurement} field {name}: {raw[bad]} is out of the {kind} range", lines[bad]) from None
    return TypedColumn(name, m.DataType(kind), values)


def _fits(text: str, kind: pa.DataType) -> bool:
    try:
        pc.cast(pa.array([text]), kind)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False
    return True


def _check(fits: pa.Array, valid: pa.Array, measurement: str, name: str, kind: str, raw: list[str | None],
           lines: Sequence[int], first: int) -> None:
    ok = pc.or_(pc.invert(valid), pc.fill_null(fits, False))
    if pc.all(ok).as_py():
        return
    bad = pc.index(ok, False).as_py()
    try:
        other = kind_of(raw[bad] or "")
    except ValueError as err:
        raise ProtocolError(f"{measurement} field {name}: {err}", lines[bad]) from None
    raise ProtocolError(f"{measurement} field {name} is {kind} (line {lines[first]}) but {other} here: "
                        "a column has one type", lines[bad])


def micros(times: list[str | None], precision: str, now_us: int, lines: Sequence[int]) -> pa.Array:
    """The rows' times as epoch microseconds; a row without one gets ``now_us``."""
    if precision not in MICROS_PER:
        raise ProtocolError(f"precision {precision!r} is not one of {', '.join(MICROS_PER)}")
    array = pa.array(times, pa.string())
    try:
        numbers = pc.cast(array, pa.int64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        bad = next(i for i, v in enumerate(times) if v is not None and not re.fullmatch(_INTEGER, v))
        raise ProtocolError(f"the timestamp {times[bad]!r} is not an integer", lines[bad]) from None
    values = numbers.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    factor = MICROS_PER[precision]
    scaled = values // 1000 if factor < 1 else values * int(factor)
    scaled = np.where(numbers.is_valid().to_numpy(zero_copy_only=False), scaled, now_us)
    return pa.array(scaled, pa.int64())


def rows_of(found: dict[str, Measurement], precision: str, now_us: int, name_tag: str | None = None
            ) -> list[SupertableRows]:
    """The rows of each measurement as a supertable's, by TDengine's rules."""
    out = []
    for measurement in found.values():
        stable = made_name(measurement.name)
        tag_columns = sorted(measurement.tags.items())
        names, tag_values = _subtables(measurement, tag_columns, name_tag)
        tags = tuple(TypedColumn(key, m.DataType("NCHAR", (_width(values),)), pa.array(values, pa.string()))
                     for key, values in tag_values)
        if not tags:
            tags = (TypedColumn(NULL_TAG, m.DataType("NCHAR", (1,)), pa.nulls(measurement.rows, pa.string())),)
        metrics = tuple(typed(measurement.name, key, values, measurement.lines)
                        for key, values in measurement.fields.items())
        times = micros(measurement.times, precision, now_us, measurement.lines)
        out.append(SupertableRows(stable, times, pa.array(names, pa.string()), metrics, tags,
                                  tuple(measurement.lines)))
    return out


def _width(values: list[str | None]) -> int:
    return pc.max(pc.utf8_length(pa.array(values, pa.string()))).as_py() or 1


def _subtables(measurement: Measurement, tag_columns: list[tuple[str, list[str | None]]],
               name_tag: str | None) -> tuple[list[str], list[tuple[str, list[str | None]]]]:
    """Each row's subtable name, and the tag columns to store (the name tag is not one)."""
    named = dict(tag_columns).get(name_tag) if name_tag else None
    kept = [(k, v) for k, v in tag_columns if k != name_tag] if named is not None else tag_columns
    if named is None and tag_columns and not any(None in values for _, values in tag_columns):
        return _names_by_tag_set(measurement.name, tag_columns), kept
    cache: dict[tuple, str] = {}
    names = []
    for row in range(measurement.rows):
        given = named[row] if named is not None else None
        if given is not None:
            names.append(made_name(given))
            continue
        pairs = tuple((k, values[row]) for k, values in tag_columns if values[row] is not None)
        name = cache.get(pairs)
        if name is None:
            name = cache[pairs] = child_table_name(measurement.name, pairs)  # type: ignore[arg-type]
        names.append(name)
    return names, kept


def _names_by_tag_set(measurement: str, tag_columns: list[tuple[str, list[str | None]]]) -> list[str]:
    """The subtable name of each row when every row has every tag: one name per distinct tag set."""
    keys = list(zip(*(values for _, values in tag_columns), strict=True))
    names: dict[tuple, str] = {}
    for key in set(keys):
        names[key] = child_table_name(measurement, list(zip((k for k, _ in tag_columns), key, strict=True)))
    return [names[key] for key in keys]
