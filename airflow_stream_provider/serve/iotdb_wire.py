"""The binary values of IoTDB's session protocol, without sockets or Thrift: a tablet's column-major
values and null bitmaps, a record's typed values, a string record's inferred types, and a query's
rows as the ``TSQueryDataSet`` of the V1 calls and the serialized TsBlocks of the V2 calls.

Everything is big-endian, as IoTDB's Java server writes it. Times are epoch milliseconds.

- tablet values: per column, the ``size`` values (TEXT: an int32 length and the bytes; a null cell
  is a zero or an empty text), then, when any cell is null, per column a boolean "has a bitmap" and
  ``size // 8 + 1`` bytes in which bit ``row % 8`` (least significant first) of byte ``row // 8``
  marks a null;
- record values: per value a type byte and the value (TEXT with an int32 length);
- ``TSQueryDataSet``: the times, per column its non-null values and a bitmap with one bit a row,
  the most significant first, set where the row has a value;
- TsBlock: the value column count, the type byte of each, the row count, an encoding byte per
  column (the time column first), then each column: a "may have null" byte, when set the packed
  null flags (most significant bit first, set for a null), and the values (the non-null ones;
  BOOLEAN: every row, packed as bits).
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from airflow_stream_provider.serve import iotdb_json as ij

#: TSDataType ordinals of the tree model that the warehouse stores
TYPE_CODES = {0: "BOOLEAN", 1: "INT32", 2: "INT64", 3: "FLOAT", 4: "DOUBLE", 5: "TEXT"}
#: the other TSDataType ordinals, named in the refusal
OTHER_TYPES = {8: "TIMESTAMP", 9: "DATE", 10: "BLOB", 11: "STRING"}
#: TSStatusCode values of IoTDB 2.0 the session protocol answers with
SUCCESS = 200
UNSUPPORTED_OPERATION = 300
EXECUTE_STATEMENT_ERROR = 301
ILLEGAL_PARAMETER = 303
DATABASE_ALREADY_EXISTS = 501
SQL_PARSE_ERROR = 700
WRONG_LOGIN_PASSWORD = 801
NOT_LOGIN = 802

_FIXED = {"BOOLEAN": ("?", 1), "INT32": ("i", 4), "INT64": ("q", 8), "FLOAT": ("f", 4), "DOUBLE": ("d", 8)}


class WireError(ValueError):
    """A request whose binary values IoTDB would refuse; ``code`` is the status to answer with."""

    def __init__(self, message: str, code: int = ILLEGAL_PARAMETER) -> None:
        self.code = code
        super().__init__(message)


def type_name(code: int) -> str:
    name = TYPE_CODES.get(code)
    if name is None:
        other = OTHER_TYPES.get(code, f"type {code}")
        raise WireError(f"the data type {other} is not served: the warehouse stores "
                        f"{', '.join(TYPE_CODES.values())}", UNSUPPORTED_OPERATION)
    return name


@dataclass
class _Reader:
    data: bytes
    at: int = 0

    def take(self, size: int, what: str) -> bytes:
        if size < 0 or self.at + size > len(self.data):
            raise WireError(f"{what}: the buffer ends after {len(self.data)} bytes")
        part = self.data[self.at:self.at + size]
        self.at += size
        return part

    def unpack(self, fmt: str, size: int, what: str) -> tuple:
        return struct.unpack(">" + fmt, self.take(size, what))

    def text(self, what: str) -> str:
        (length,) = self.unpack("i", 4, what)
        try:
            return self.take(length, what).decode("utf-8")
        except UnicodeDecodeError:
            raise WireError(f"{what}: the text is not UTF-8") from None


def times(data: bytes, size: int) -> pa.Array:
    """A tablet's ``size`` timestamps (int64 each) as a UTC millisecond timestamp array."""
    if size < 0 or len(data) != 8 * size:
        raise WireError(f"the timestamps hold {len(data)} bytes, not 8 for each of the {size} rows")
    return pa.array(struct.unpack(f">{size}q", data), pa.int64()).cast(pa.timestamp("ms", tz="UTC"))


def tablet_columns(data: bytes, types: list[int], size: int, measurements: list[str]) -> dict[str, pa.Array]:
    """The columns of a tablet's ``values`` buffer, nulls taken from its bitmaps."""
    if len(types) != len(measurements):
        raise WireError(f"{len(measurements)} measurements but {len(types)} data types")
    reader = _Reader(data)
    names = [type_name(t) for t in types]
    raw: list[list] = []
    for name, measurement in zip(names, measurements, strict=True):
        what = f"the values of {measurement}"
        if name == "TEXT":
            raw.append([reader.text(what) for _ in range(size)])
        else:
            fmt, width = _FIXED[name]
            raw.append(list(reader.unpack(f"{size}{fmt}", width * size, what)))
    if reader.at < len(data):
        for column, measurement in zip(raw, measurements, strict=True):
            (has_bitmap,) = reader.unpack("?", 1, f"the bitmap flag of {measurement}")
            if has_bitmap:
                bits = reader.take(size // 8 + 1, f"the bitmap of {measurement}")
                for row in range(size):
                    if bits[row // 8] >> (row % 8) & 1:
                        column[row] = None
    if reader.at != len(data):
        raise WireError(f"the values buffer has {len(data) - reader.at} bytes after its last column")
    return {m: _array(v, n, m) for m, v, n in zip(measurements, raw, names, strict=True)}


def _array(values: list, name: str, where: str) -> pa.Array:
    if name in ("FLOAT", "DOUBLE") and any(v is not None and not math.isfinite(v) for v in values):
        raise WireError(f"{where}: NaN and infinities are not stored")
    return pa.array(values, ij.TYPES[name])


def record_values(data: bytes, measurements: list[str]) -> dict[str, tuple[str, object]]:
    """A record's typed values: measurement -> (type name, value)."""
    reader = _Reader(data)
    out: dict[str, tuple[str, object]] = {}
    for measurement in measurements:
        what = f"the value of {measurement}"
        (code,) = reader.unpack("b", 1, what)
        name = type_name(code)
        if name == "TEXT":
            value: object = reader.text(what)
        else:
            fmt, width = _FIXED[name]
            (value,) = reader.unpack(fmt, width, what)
            if name in ("FLOAT", "DOUBLE") and not math.isfinite(value):  # type: ignore[arg-type]
                raise WireError(f"{what}: NaN and infinities are not stored")
        out[measurement] = (name, value)
    if reader.at != len(data):
        raise WireError(f"the values buffer has {len(data) - reader.at} bytes after its last value")
    return out


def infer(text: str, known: str | None) -> tuple[str, object]:
    """The type and value of a string record's value: the series' type when it exists, else
    IoTDB's inference (``true``/``false``: BOOLEAN, a number: DOUBLE, anything else: TEXT)."""
    lowered = text.strip().lower()
    kind = known or ("BOOLEAN" if lowered in ("true", "false") else "DOUBLE" if _number(text) else "TEXT")
    try:
        if kind == "BOOLEAN":
            if lowered not in ("true", "false"):
                raise ValueError
            return kind, lowered == "true"
        if kind in ("INT32", "INT64"):
            return kind, int(text.strip())
        if kind in ("FLOAT", "DOUBLE"):
            if not _number(text):
                raise ValueError
            return kind, float(text)
    except ValueError:
        raise WireError(f"{text!r} is not a {kind} value", 614) from None
    return "TEXT", text


def _number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


# --- query results ------------------------------------------------------------------------------


def data_type(kind: pa.DataType) -> str:
    """The TSDataType name a result column of ``kind`` is sent as."""
    if pa.types.is_boolean(kind):
        return "BOOLEAN"
    if pa.types.is_int8(kind) or pa.types.is_int16(kind) or pa.types.is_int32(kind):
        return "INT32"
    if pa.types.is_integer(kind):
        return "INT64"
    if pa.types.is_float32(kind):
        return "FLOAT"
    if pa.types.is_floating(kind) or pa.types.is_decimal(kind):
        return "DOUBLE"
    if pa.types.is_timestamp(kind):
        return "TIMESTAMP"
    return "TEXT"


_CODES = {"BOOLEAN": 0, "INT32": 1, "INT64": 2, "FLOAT": 3, "DOUBLE": 4, "TEXT": 5, "TIMESTAMP": 8}


def _millis(array: pa.Array) -> list[int | None]:
    if pa.types.is_timestamp(array.type):
        array = pc.cast(array.cast(pa.timestamp("ms", tz="UTC"), safe=False), pa.int64())
    return array.to_pylist()


def _cells(array: pa.Array, name: str) -> list:
    if name == "TIMESTAMP":
        return _millis(array)
    if name == "TEXT" and not pa.types.is_string(array.type) and not pa.types.is_large_string(array.type):
        return [None if v is None else str(v) for v in array.to_pylist()]
    values = array.to_pylist()
    if name in ("FLOAT", "DOUBLE"):
        return [None if v is None or not math.isfinite(float(v)) else float(v) for v in values]
    return values


@dataclass(frozen=True)
class Columns:
    """A query's rows as the session protocol sends them: the column names (``Time`` apart), their
    types, the index of each distinct name, whether there is no time column, and the values."""

    names: list[str]
    types: list[str]
    index: dict[str, int]
    ignore_time: bool
    time: list[int]
    values: list[list]  # one per distinct name, in the order of ``index``
    distinct_types: list[str]

    @property
    def rows(self) -> int:
        return len(self.time)

    def slice(self, start: int, stop: int) -> Columns:
        return Columns(self.names, self.types, self.index, self.ignore_time, self.time[start:stop],
                       [v[start:stop] for v in self.values], self.distinct_types)


def columns_of(table: pa.Table) -> Columns:
    names = table.column_names
    timed = bool(names) and names[0] == "Time"
    time = _millis(table.column(0).combine_chunks()) if timed else [0] * table.num_rows
    shown = names[1:] if timed else names
    arrays = [table.column(i).combine_chunks() for i in range(1 if timed else 0, len(names))]
    types = [data_type(a.type) for a in arrays]
    index: dict[str, int] = {}
    values: list[list] = []
    distinct: list[str] = []
    for name, array, kind in zip(shown, arrays, types, strict=True):
        if name not in index:
            index[name] = len(values)
            values.append(_cells(array, kind))
            distinct.append(kind)
    return Columns(list(shown), types, index, not timed, [t if t is not None else 0 for t in time], values, distinct)


def _packed(values: list, kind: str) -> bytes:
    present = [v for v in values if v is not None]
    if kind == "TEXT":
        parts = [v.encode("utf-8") for v in present]
        return b"".join(struct.pack(">i", len(p)) + p for p in parts)
    fmt = "q" if kind == "TIMESTAMP" else _FIXED[kind][0]
    return struct.pack(f">{len(present)}{fmt}", *present)


def _bits(flags: list[bool]) -> bytes:
    """``flags`` packed eight to a byte, the first in the most significant bit."""
    out = bytearray((len(flags) + 7) // 8)
    for i, flag in enumerate(flags):
        if flag:
            out[i // 8] |= 0x80 >> (i % 8)
    return bytes(out)


def query_data_set(columns: Columns) -> tuple[bytes, list[bytes], list[bytes]]:
    """(time, valueList, bitmapList) of a ``TSQueryDataSet``."""
    time = struct.pack(f">{columns.rows}q", *columns.time)
    values = [_packed(v, k) for v, k in zip(columns.values, columns.distinct_types, strict=True)]
    bitmaps = [_bits([x is not None for x in v]) for v in columns.values]
    return time, values, bitmaps


def ts_block(columns: Columns) -> bytes:
    """The rows as one serialized TsBlock."""
    out = bytearray(struct.pack(">i", len(columns.values)))
    out += bytes(_CODES[k] for k in columns.distinct_types)
    out += struct.pack(">i", columns.rows)
    encodings = {"BOOLEAN": 0, "INT32": 1, "FLOAT": 1, "INT64": 2, "DOUBLE": 2, "TIMESTAMP": 2, "TEXT": 3}
    out += bytes([2, *(encodings[k] for k in columns.distinct_types)])
    out += b"\x00" + struct.pack(f">{columns.rows}q", *columns.time)
    for values, kind in zip(columns.values, columns.distinct_types, strict=True):
        nulls = [v is None for v in values]
        out += (b"\x01" + _bits(nulls)) if any(nulls) else b"\x00"
        if kind == "BOOLEAN":
            out += _bits([bool(v) for v in values])
        else:
            out += _packed(values, kind)
    return bytes(out)
