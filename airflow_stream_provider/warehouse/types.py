"""TDengine column types on Delta: their Arrow and Spark forms, and typed values from statements."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

import pyarrow as pa

from airflow_stream_provider.model import DataType, TimePoint, Value
from airflow_stream_provider.sql.grammar.timestamps import parse_timestamp
from airflow_stream_provider.values import FIRST_MICROS, LAST_MICROS, instant

_INT_RANGES = {
    "TINYINT": (-(2**7), 2**7 - 1),
    "SMALLINT": (-(2**15), 2**15 - 1),
    "INT": (-(2**31), 2**31 - 1),
    "BIGINT": (-(2**63), 2**63 - 1),
    "TINYINT UNSIGNED": (0, 2**8 - 1),
    "SMALLINT UNSIGNED": (0, 2**16 - 1),
    "INT UNSIGNED": (0, 2**32 - 1),
    "BIGINT UNSIGNED": (0, 2**64 - 1),
}
# Unsigned types widen to the next signed type; BIGINT UNSIGNED needs DECIMAL(20, 0).
_ARROW_INTS = {
    "TINYINT": pa.int8(),
    "SMALLINT": pa.int16(),
    "INT": pa.int32(),
    "BIGINT": pa.int64(),
    "TINYINT UNSIGNED": pa.int16(),
    "SMALLINT UNSIGNED": pa.int32(),
    "INT UNSIGNED": pa.int64(),
    "BIGINT UNSIGNED": pa.decimal128(20, 0),
}
_STRINGS = {"BINARY", "VARCHAR", "NCHAR"}
_TYPE_TEXT = re.compile(r"^([A-Z ]+?)(?:\((\d+)(?:,\s*(\d+))?\))?$")


class BadValue(ValueError):
    """A value that does not fit its column; the caller adds the table and column."""


def arrow_type(dtype: DataType) -> pa.DataType:
    name = dtype.name
    if name == "TIMESTAMP":
        return pa.timestamp("us", tz="UTC")
    if name == "BOOL":
        return pa.bool_()
    if name in _ARROW_INTS:
        return _ARROW_INTS[name]
    if name == "FLOAT":
        return pa.float32()
    if name == "DOUBLE":
        return pa.float64()
    if name in _STRINGS or name == "JSON":
        return pa.string()
    if name == "VARBINARY":
        return pa.binary()
    if name == "DECIMAL":
        return pa.decimal128(*dtype.args)
    raise ValueError(f"type {dtype} has no Delta form")


def spark_type(dtype: DataType) -> str:
    """The Spark SQL type name of a TDengine column type."""
    arrow = arrow_type(dtype)
    if pa.types.is_string(arrow):
        return "string"
    if pa.types.is_timestamp(arrow):
        return "timestamp"
    if pa.types.is_decimal(arrow):
        return f"decimal({arrow.precision}, {arrow.scale})"
    names = {pa.int8(): "tinyint", pa.int16(): "smallint", pa.int32(): "int", pa.int64(): "bigint",
             pa.float32(): "float", pa.float64(): "double", pa.bool_(): "boolean", pa.binary(): "binary"}
    return names.get(arrow, "string")


def parse_type(text: str) -> DataType:
    """The inverse of ``str(DataType)``, for types read back from a table's schema."""
    match = _TYPE_TEXT.match(text.strip().upper())
    if not match:
        raise ValueError(f"{text!r} is not a column type")
    args = tuple(int(a) for a in match.groups()[1:] if a is not None)
    return DataType(match.group(1).strip(), args)


@dataclass(frozen=True)
class TimeContext:
    """What a timestamp value needs: the database precision and the statement's ``now``."""

    precision: str
    now: datetime

    def truncate(self, value: datetime) -> datetime:
        if self.precision == "ms":
            return value.replace(microsecond=value.microsecond // 1000 * 1000)
        return value


def _timestamp(value: Value, ctx: TimeContext) -> datetime:
    if isinstance(value, TimePoint):
        return ctx.truncate(value.resolve(ctx.now))
    if isinstance(value, bool):
        raise BadValue(f"{value!r} is not a timestamp")
    if isinstance(value, int):
        unit = 1000 if ctx.precision == "ms" else 1
        try:
            return instant(value * unit)
        except ValueError:
            raise BadValue(f"{value} ({ctx.precision} since 1970) is outside the years 1 to 9999") from None
    if isinstance(value, str):
        try:
            return ctx.truncate(parse_timestamp(value).astimezone(UTC))
        except ValueError as err:
            raise BadValue(str(err)) from None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise BadValue(f"timestamp {value} has no time zone")
        return ctx.truncate(value.astimezone(UTC))
    raise BadValue(f"{value!r} is not a timestamp; write epoch {ctx.precision}, 'YYYY-MM-DD HH:MM:SS' or now")


def _describe(value: Value) -> str:
    return repr(value) if not isinstance(value, TimePoint) else str(value)


def coerce(value: Value, dtype: DataType, ctx: TimeContext) -> object:
    """The Python value Arrow stores for ``value`` in a column of ``dtype``; raises ``BadValue``."""
    if value is None:
        return None
    name = dtype.name
    if name == "TIMESTAMP":
        return _timestamp(value, ctx)
    if name in _INT_RANGES:
        if isinstance(value, bool) or not isinstance(value, int):
            raise BadValue(f"{_describe(value)} is not an integer")
        low, high = _INT_RANGES[name]
        if not low <= value <= high:
            raise BadValue(f"{value} is out of range for {name} ({low} to {high})")
        return Decimal(value) if name == "BIGINT UNSIGNED" else value
    if name in ("FLOAT", "DOUBLE"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise BadValue(f"{_describe(value)} is not a number")
        if name == "FLOAT" and abs(value) > 3.4028234663852886e38:
            raise BadValue(f"{value} is out of range for FLOAT")
        return float(value)
    if name == "BOOL":
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return value != 0
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise BadValue(f"{_describe(value)} is not a boolean")
    if name in _STRINGS:
        if not isinstance(value, str):
            raise BadValue(f"{_describe(value)} is not a string; quote it")
        size = len(value) if name == "NCHAR" else len(value.encode("utf-8"))
        if size > dtype.args[0]:
            unit = "characters" if name == "NCHAR" else "bytes"
            raise BadValue(f"{value!r} is {size} {unit}, longer than {dtype}")
        return value
    if name == "VARBINARY":
        if not isinstance(value, str):
            raise BadValue(f"{_describe(value)} is not a string; quote it")
        data = _varbinary(value)
        if len(data) > dtype.args[0]:
            raise BadValue(f"{len(data)} bytes are longer than {dtype}")
        return data
    if name == "DECIMAL":
        return _decimal(value, dtype)
    if name == "JSON":
        if not isinstance(value, str):
            raise BadValue(f"{_describe(value)} is not a JSON string")
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError as err:
            raise BadValue(f"{value!r} is not JSON: {err.msg}") from None
        if not isinstance(parsed, dict):
            raise BadValue(f"{value!r} is not a JSON object")
        return value
    raise BadValue(f"type {dtype} cannot hold values")


def coercer(dtype: DataType, ctx: TimeContext) -> Callable[[Value], object]:
    """:func:`coerce` for the values of one column: the common ones (an integer time, an integer in
    range, a float) straight away, any other through :func:`coerce` (and its errors)."""
    name = dtype.name

    def general(value: Value) -> object:
        return coerce(value, dtype, ctx)

    if name == "TIMESTAMP":
        unit = 1000 if ctx.precision == "ms" else 1

        def timestamp(value: Value) -> object:
            if type(value) is int and FIRST_MICROS <= value * unit <= LAST_MICROS:
                return instant(value * unit)
            return general(value)
        return timestamp
    if name in _INT_RANGES and name != "BIGINT UNSIGNED":
        low, high = _INT_RANGES[name]

        def integer(value: Value) -> object:
            return value if type(value) is int and low <= value <= high else general(value)
        return integer
    if name in ("FLOAT", "DOUBLE"):
        largest = 3.4028234663852886e38 if name == "FLOAT" else float("inf")

        def number(value: Value) -> object:
            return value if type(value) is float and -largest <= value <= largest else general(value)
        return number
    return general


def _varbinary(value: str) -> bytes:
    if value[:2].lower() == "\\x":
        try:
            return bytes.fromhex(value[2:])
        except ValueError:
            raise BadValue(f"{value!r} is not hexadecimal after \\x") from None
    return value.encode("utf-8")


def _decimal(value: Value, dtype: DataType) -> Decimal:
    precision, scale = dtype.args
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise BadValue(f"{_describe(value)} is not a number")
    try:
        number = Decimal(repr(value) if isinstance(value, float) else str(value))
    except InvalidOperation:
        raise BadValue(f"{value!r} is not a number") from None
    if not number.is_finite():
        raise BadValue(f"{value!r} is not a finite number")
    quantized = number.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP)
    if len(quantized.as_tuple().digits) > precision and quantized != 0:
        raise BadValue(f"{value} does not fit {dtype}")
    return quantized


def to_json_value(value: object) -> object:
    """A tag value as stored in the subtable registry (JSON)."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes):
        return "\\x" + value.hex()
    return value


def from_json_value(value: object, dtype: DataType) -> object:
    """The inverse of :func:`to_json_value` for a tag of ``dtype``."""
    if value is None:
        return None
    if dtype.name == "TIMESTAMP":
        return datetime.fromisoformat(str(value))
    if dtype.name == "DECIMAL" or dtype.name == "BIGINT UNSIGNED":
        return Decimal(str(value))
    if dtype.name == "VARBINARY":
        return bytes.fromhex(str(value)[2:])
    return value
