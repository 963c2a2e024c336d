"""The JSON of TDengine 3's REST API (taosAdapter): a query's ``{"code": 0, "column_meta": [[name,
type, length], ...], "data": [[...], ...], "rows": n}``, a statement's ``affected_rows``, and errors
as ``{"code": c, "desc": "..."}`` with TDengine's codes.

Timestamps are RFC 3339 strings in UTC (``Z``) or in the zone of the request's ``tz``, with
milliseconds, or microseconds when a value has them, as TDengine prints them by precision.
"""

from __future__ import annotations

import base64
import json
import math
from datetime import UTC, datetime, tzinfo
from decimal import Decimal

import pyarrow as pa

#: TDengine's codes this API answers with (taosAdapter's httperror and TDengine's taoserror)
SUCCESS = 0
RPC_AUTH_FAILURE = 0x0003
NO_AUTH_INFO = 0x1105
NO_MSG_INPUT = 0x1106
NO_SQL_INPUT = 0x1107
REQUEST_TOO_BIG = 0x1104
INVALID_AUTH_TYPE = 0x1122
INVALID_BASIC_AUTH = 0x1124
INVALID_TAOSD_AUTH = 0x1125
GEN_TAOSD_TOKEN_ERR = 0x110A
UNSUPPORTED_URL = 0x1101
DB_NOT_EXIST = 0x0388
TABLE_NOT_EXIST = 0x2662
SYNTAX_ERROR = 0x2600
COMMON_ERROR = 0xFFFF

DESCRIPTIONS = {
    RPC_AUTH_FAILURE: "Authentication failure",
    NO_AUTH_INFO: "no auth info input",
    NO_MSG_INPUT: "request is empty",
    NO_SQL_INPUT: "no sql input",
    REQUEST_TOO_BIG: "request size is too big",
    INVALID_AUTH_TYPE: "invalid type of Authorization",
    INVALID_BASIC_AUTH: "invalid basic Authorization",
    INVALID_TAOSD_AUTH: "invalid taosd Authorization",
    GEN_TAOSD_TOKEN_ERR: "generate taosd token error",
    UNSUPPORTED_URL: "unsupported url",
}

#: TDengine's type names and fixed lengths by Arrow type
_FIXED = [
    (pa.types.is_boolean, "BOOL", 1), (pa.types.is_int8, "TINYINT", 1), (pa.types.is_int16, "SMALLINT", 2),
    (pa.types.is_int32, "INT", 4), (pa.types.is_int64, "BIGINT", 8), (pa.types.is_uint8, "TINYINT UNSIGNED", 1),
    (pa.types.is_uint16, "SMALLINT UNSIGNED", 2), (pa.types.is_uint32, "INT UNSIGNED", 4),
    (pa.types.is_uint64, "BIGINT UNSIGNED", 8), (pa.types.is_float32, "FLOAT", 4),
    (pa.types.is_float64, "DOUBLE", 8), (pa.types.is_timestamp, "TIMESTAMP", 8), (pa.types.is_date, "TIMESTAMP", 8),
]
_LENGTHS = {"BOOL": 1, "TINYINT": 1, "SMALLINT": 2, "INT": 4, "BIGINT": 8, "TINYINT UNSIGNED": 1,
            "SMALLINT UNSIGNED": 2, "INT UNSIGNED": 4, "BIGINT UNSIGNED": 8, "FLOAT": 4, "DOUBLE": 8,
            "TIMESTAMP": 8, "JSON": 4095}


def error(code: int, desc: str | None = None) -> dict:
    return {"code": code, "desc": desc if desc is not None else DESCRIPTIONS.get(code, "unknown error")}


def affected(rows: int) -> dict:
    """A statement that is no query: TDengine answers with its affected rows."""
    return {"code": SUCCESS, "column_meta": [["affected_rows", "INT", 4]], "data": [[rows]], "rows": 1}


def column_meta(field: pa.Field, column: pa.ChunkedArray) -> list:
    """``[name, TDengine type, length]`` of a result column; a table's own columns keep their declared
    type (``VARCHAR(16)``: ``VARCHAR``, 16), computed strings the length of their longest value."""
    declared = (field.metadata or {}).get(b"tdengine.type")
    if declared:
        text = declared.decode()
        name, _, rest = text.partition("(")
        name = "VARCHAR" if name == "BINARY" else name
        if rest:
            return [field.name, name, int(rest.rstrip(")").split(",")[0])]
        return [field.name, name, _LENGTHS.get(name, 8)]
    kind = field.type
    for test, name, length in _FIXED:
        if test(kind):
            return [field.name, name, length]
    if pa.types.is_decimal(kind):
        return [field.name, "DECIMAL", 16 if kind.precision > 18 else 8]
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return [field.name, "VARBINARY", max((len(v) for v in column.to_pylist() if v is not None), default=0)]
    longest = max((len(str(v).encode()) for v in column.to_pylist() if v is not None), default=0)
    return [field.name, "VARCHAR", longest]


def _time(value: datetime, zone: tzinfo | None, micros: bool) -> str:
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    value = value.astimezone(zone or UTC)
    text = value.isoformat(timespec="microseconds" if micros else "milliseconds")
    return text.replace("+00:00", "Z") if zone is None else text


def _plain(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return value


def query(table: pa.Table, zone: tzinfo | None = None) -> dict:
    """A query's rows as TDengine answers them."""
    meta = [column_meta(f, table.column(i)) for i, f in enumerate(table.schema)]
    columns: list[list] = []
    for i, f in enumerate(table.schema):
        values = table.column(i).to_pylist()
        if pa.types.is_timestamp(f.type) or pa.types.is_date(f.type):
            stamps = [v if isinstance(v, datetime) or v is None else datetime(v.year, v.month, v.day, tzinfo=UTC)
                      for v in values]
            micros = any(v is not None and v.microsecond % 1000 for v in stamps)
            columns.append([None if v is None else _time(v, zone, micros) for v in stamps])
        else:
            columns.append([_plain(v) for v in values])
    data = [list(row) for row in zip(*columns)] if columns else []
    return {"code": SUCCESS, "column_meta": meta, "data": data, "rows": table.num_rows}
