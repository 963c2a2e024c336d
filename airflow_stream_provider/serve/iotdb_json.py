"""The JSON of IoTDB's REST API v2: the insertTablet and insertRecords requests checked and turned
into columns, a query's rows as ``expressions``/``column_names``, ``timestamps`` and column-major
``values``, and the ``{"code": ..., "message": ...}`` statuses with IoTDB's codes.

Times are epoch milliseconds, IoTDB's default ``timestamp_precision``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from airflow_stream_provider import model as m
from airflow_stream_provider.model.series import device_problem

SUCCESS = 200
#: IoTDB's status codes this API answers with
SQL_PARSE_ERROR = 700
SEMANTIC_ERROR = 701
EXECUTE_STATEMENT_ERROR = 301
QUERY_ROW_LIMIT = 411
WRONG_LOGIN_PASSWORD = 600
UNINITIALIZED_AUTH = 603
INTERNAL_SERVER_ERROR = 305

#: IoTDB's data types of the tree model this API writes, with their Arrow types
TYPES = {"BOOLEAN": pa.bool_(), "INT32": pa.int32(), "INT64": pa.int64(), "FLOAT": pa.float32(),
         "DOUBLE": pa.float64(), "TEXT": pa.string()}
#: the default of ``row_limit`` (IoTDB's rest_query_default_row_size_limit)
DEFAULT_ROW_LIMIT = 10_000


class RequestError(ValueError):
    """A request IoTDB would refuse; ``code`` is the status code of the answer."""

    def __init__(self, message: str, code: int = SQL_PARSE_ERROR) -> None:
        self.code = code
        super().__init__(message)


def status(code: int = SUCCESS, message: str = "SUCCESS_STATUS") -> dict:
    return {"code": code, "message": message}


@dataclass(frozen=True)
class DeviceRows:
    """Points of one device: times (epoch ms) and each measurement's values (None: no point)."""

    device: m.SeriesPath
    times: pa.Array
    columns: dict[str, pa.Array]


def load(body: bytes) -> dict:
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError) as err:
        raise RequestError(f"the request body is not JSON: {err}") from None
    if not isinstance(payload, dict):
        raise RequestError("the request body must be a JSON object")
    return payload


def _list(payload: dict, key: str, length: int | None = None) -> list:
    value = payload.get(key)
    if not isinstance(value, list):
        raise RequestError(f"{key} should not be null" if value is None else f"{key} must be an array")
    if length is not None and len(value) != length:
        raise RequestError(f"{key} has {len(value)} items, but timestamps has {length}")
    return value


def _nodes(text: str) -> tuple[str, ...]:
    """The nodes of a path as IoTDB writes it: dots between nodes, a backquoted node may hold dots
    (and a doubled backquote)."""
    nodes, i = [], 0
    while i <= len(text):
        if text.startswith("`", i):
            end, node = i + 1, []
            while True:
                found = text.find("`", end)
                if found < 0:
                    raise RequestError(f"the path {text!r} has an unclosed backquote")
                if text.startswith("``", found):
                    node.append(text[end:found + 1])
                    end = found + 2
                    continue
                node.append(text[end:found])
                i = found + 1
                break
            nodes.append("".join(node))
            if i < len(text) and text[i] != ".":
                raise RequestError(f"the path {text!r} has text after a backquoted node")
        else:
            found = text.find(".", i)
            found = len(text) if found < 0 else found
            nodes.append(text[i:found])
            i = found
        i += 1
    return tuple(nodes)


def device_path(text: Any) -> m.SeriesPath:
    if not isinstance(text, str) or not text:
        raise RequestError("device should not be null")
    nodes = _nodes(text)
    if nodes[0].lower() != "root" or len(nodes) < 2 or any(not n or "*" in n for n in nodes):
        raise RequestError(f"the device {text!r} is not a path root.x.y (without wildcards)")
    device = m.SeriesPath(("root", *nodes[1:]))
    problem = device_problem(device)
    if problem is not None:
        raise RequestError(f"the device {text!r}: {problem}")
    return device


def pattern_path(text: Any) -> m.SeriesPath:
    """A path or a path pattern (``*``, ``**``) below ``root``, as IoTDB writes it."""
    if not isinstance(text, str) or not text:
        raise RequestError("path should not be null")
    nodes = _nodes(text)
    if nodes[0].lower() != "root" or len(nodes) < 2 or any(not n for n in nodes):
        raise RequestError(f"the path {text!r} is not a path root.x.y")
    return m.SeriesPath(("root", *nodes[1:]))


def _times(values: list) -> pa.Array:
    if any(isinstance(t, bool) or not isinstance(t, int) for t in values):
        raise RequestError("timestamps must be whole numbers (epoch milliseconds)")
    try:
        return pa.array(values, pa.int64()).cast(pa.timestamp("ms", tz="UTC"))
    except (pa.ArrowInvalid, OverflowError) as err:
        raise RequestError(f"timestamps: {err}") from None


def _type(name: Any) -> pa.DataType:
    kind = TYPES.get(str(name).upper()) if isinstance(name, str) else None
    if kind is None:
        raise RequestError(f"data type {name!r} is not one of {', '.join(TYPES)}", SEMANTIC_ERROR)
    return kind


def _values(values: list, kind: pa.DataType, where: str) -> pa.Array:
    bad = None
    for value in values:
        if value is None:
            continue
        if pa.types.is_boolean(kind):
            ok = isinstance(value, bool)
        elif pa.types.is_integer(kind):
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif pa.types.is_floating(kind):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        else:
            ok = isinstance(value, str)
        if not ok:
            bad = value
            break
    if bad is not None:
        raise RequestError(f"{where}: {bad!r} is not a {kind} value", SEMANTIC_ERROR)
    try:
        return pa.array(values, kind)
    except (pa.ArrowInvalid, OverflowError) as err:
        raise RequestError(f"{where}: {err}", SEMANTIC_ERROR) from None


def tablet(payload: dict) -> tuple[DeviceRows, bool]:
    """An insertTablet request as the device's rows, and whether it is aligned."""
    times = _list(payload, "timestamps")
    measurements = _list(payload, "measurements")
    types = _list(payload, "data_types", len(measurements))
    values = _list(payload, "values", len(measurements))
    device = device_path(payload.get("device"))
    _check_names(measurements)
    columns = {}
    for name, kind, column in zip(measurements, types, values, strict=True):
        if not isinstance(column, list) or len(column) != len(times):
            raise RequestError(f"values of {name} must be an array of {len(times)} values (one per timestamp)")
        columns[name] = _values(column, _type(kind), f"{device}.{name}")
    return DeviceRows(device, _times(times), columns), bool(payload.get("is_aligned", False))


def records(payload: dict) -> tuple[list[DeviceRows], bool]:
    """An insertRecords request as the rows of each device, in the order the devices come."""
    times = _list(payload, "timestamps")
    devices = _list(payload, "devices", len(times))
    names = _list(payload, "measurements_list", len(times))
    types = _list(payload, "data_types_list", len(times))
    values = _list(payload, "values_list", len(times))
    rows: dict[str, list[int]] = {}
    for i, device in enumerate(devices):
        if not isinstance(names[i], list) or not isinstance(types[i], list) or not isinstance(values[i], list) \
                or not len(names[i]) == len(types[i]) == len(values[i]):
            raise RequestError(f"record {i}: measurements, data types and values must be arrays of one length")
        _check_names(names[i])
        rows.setdefault(device if isinstance(device, str) else "", []).append(i)
    out = []
    for device, indices in rows.items():
        path = device_path(device)
        kinds: dict[str, pa.DataType] = {}
        columns: dict[str, list] = {}
        for position, i in enumerate(indices):
            for name, kind, value in zip(names[i], types[i], values[i], strict=True):
                arrow = _type(kind)
                if kinds.setdefault(name, arrow) != arrow:
                    raise RequestError(f"{path}.{name} is given as {kinds[name]} and {arrow}", SEMANTIC_ERROR)
                columns.setdefault(name, [None] * len(indices))[position] = value
        arrays = {name: _values(vals, kinds[name], f"{path}.{name}") for name, vals in columns.items()}
        out.append(DeviceRows(path, _times([times[i] for i in indices]), arrays))
    return out, bool(payload.get("is_aligned", False))


def _check_names(names: list) -> None:
    for name in names:
        if not isinstance(name, str) or not name:
            raise RequestError("measurements must be non-empty strings")
    if len(set(names)) != len(names):
        raise RequestError("a measurement is given twice")


def sql_of(payload: dict) -> tuple[str, int]:
    text = payload.get("sql")
    if not isinstance(text, str) or not text.strip():
        raise RequestError("sql should not be null")
    limit = payload.get("row_limit", DEFAULT_ROW_LIMIT)
    if limit is None:
        limit = DEFAULT_ROW_LIMIT
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise RequestError("row_limit must be a positive integer")
    return text, limit


def _plain(value: object) -> object:
    if isinstance(value, datetime):
        return int(value.astimezone(UTC).timestamp() * 1000)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def query(table: pa.Table, limit: int) -> dict:
    """A query's rows in IoTDB's shape; a result over ``limit`` rows is refused (code 411)."""
    if table.num_rows > limit:
        raise RequestError(f"Dataset row size exceeded the given max row size ({limit})", QUERY_ROW_LIMIT)
    names = table.column_names
    timed = bool(names) and names[0] == "Time"
    columns = [[_plain(v) for v in table.column(i).to_pylist()] for i in range(len(names))]
    if timed:
        return {"expressions": names[1:], "column_names": None, "timestamps": columns[0], "values": columns[1:]}
    return {"expressions": None, "column_names": names, "timestamps": None, "values": columns}
