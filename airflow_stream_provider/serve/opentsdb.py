"""OpenTSDB's telnet and JSON put formats as TDengine's schemaless writing reads them: the metric
is the supertable, the value is the column ``_value`` and the tags are the tag set.

A timestamp's unit is told by its digits, as OpenTSDB's is: 10 seconds, 13 milliseconds (and
TDengine's 16 microseconds, 19 nanoseconds); 0 is the time of the request. Telnet values follow
the line protocol's suffixes; a JSON value is a number (DOUBLE), a boolean, a string (NCHAR) or
``{"value": ..., "type": "bigint"}``.
"""

from __future__ import annotations

import json
import math
from typing import Any

from airflow_stream_provider.serve.lineproto import Measurement, ProtocolError
from airflow_stream_provider.serve.schemaless import VALUE_COLUMN

_DIGITS = {10: 1_000_000, 13: 1_000, 16: 1}
#: a JSON value's ``type`` and the raw form (line protocol's) it is written in
_JSON_TYPES = {"bool": "bool", "tinyint": "i8", "smallint": "i16", "int": "i32", "bigint": "i64",
               "float": "f32", "double": "f64", "binary": '"', "varchar": '"', "nchar": 'L"'}


def _micros(text: str, number: int, now_us: int) -> str:
    if not text.isdigit():
        raise ProtocolError(f"the timestamp {text!r} is not a whole number", number)
    if int(text) == 0:
        return str(now_us)
    if len(text) == 19:
        return str(int(text) // 1000)
    factor = _DIGITS.get(len(text))
    if factor is None:
        raise ProtocolError(f"the timestamp {text!r} has {len(text)} digits: 10 (s), 13 (ms), 16 (us) or 19 (ns)",
                            number)
    return str(int(text) * factor)


def _tag(item: str, number: int) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key or not value:
        raise ProtocolError(f"tag {item!r} is not key=value", number)
    return key, value


def parse_telnet(text: str, now_us: int) -> dict[str, Measurement]:
    """``metric timestamp value tagk=tagv ...`` lines (a leading ``put`` is allowed)."""
    out: dict[str, Measurement] = {}
    for number, raw in enumerate(text.split("\n"), start=1):
        parts = raw.split()
        if parts[:1] == ["put"]:
            parts = parts[1:]
        if not parts:
            continue
        if len(parts) < 4:
            raise ProtocolError("expected `metric timestamp value tagk=tagv ...` with at least one tag", number)
        metric, stamp, value, *tags = parts
        found = out.setdefault(metric, Measurement(metric))
        found.add(number, _micros(stamp, number, now_us), [_tag(t, number) for t in tags], [(VALUE_COLUMN, value)])
    return out


def parse_json(body: bytes, now_us: int) -> dict[str, Measurement]:
    """A JSON object or array of objects with ``metric``, ``timestamp``, ``value`` and ``tags``."""
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError) as err:
        raise ProtocolError(f"invalid opentsdb json format: {err}") from None
    items = payload if isinstance(payload, list) else [payload]
    out: dict[str, Measurement] = {}
    for number, item in enumerate(items, start=1):
        if not isinstance(item, dict):
            raise ProtocolError("invalid opentsdb json format: each point is an object", number)
        metric = item.get("metric")
        if not isinstance(metric, str) or not metric:
            raise ProtocolError("invalid opentsdb json format: metric must be a non-empty string", number)
        tags = item.get("tags")
        if not isinstance(tags, dict) or not tags:
            raise ProtocolError("invalid opentsdb json format: tags must be an object with at least one tag", number)
        pairs = []
        for key, value in tags.items():
            if not isinstance(value, (str, int, float)) or isinstance(value, bool) or not key:
                raise ProtocolError(f"invalid opentsdb json format: tag {key!r} must be a string or a number",
                                    number)
            pairs.append((key, str(value)))
        stamp = _json_time(item.get("timestamp"), number, now_us)
        found = out.setdefault(metric, Measurement(metric))
        found.add(number, stamp, pairs, [(VALUE_COLUMN, _json_value(item.get("value"), number))])
    return out


def _json_time(value: Any, number: int, now_us: int) -> str:
    if isinstance(value, dict):
        unit = value.get("type")
        amount = value.get("value")
        factors = {"s": 1_000_000, "ms": 1_000, "us": 1}
        if isinstance(amount, int) and not isinstance(amount, bool) and unit in (*factors, "ns"):
            return str(amount // 1000 if unit == "ns" else amount * factors[unit])
        raise ProtocolError("invalid opentsdb json format: timestamp {value, type} needs an integer and s, ms, "
                            "us or ns", number)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return _micros(str(value), number, now_us)
    raise ProtocolError("invalid opentsdb json format: timestamp must be a whole number", number)


def _json_value(value: Any, number: int) -> str:
    kind = None
    if isinstance(value, dict):
        kind, value = value.get("type"), value.get("value")
        if kind not in _JSON_TYPES:
            raise ProtocolError(f"invalid opentsdb json format: value type {kind!r} is not one of "
                                f"{', '.join(_JSON_TYPES)}", number)
    if isinstance(value, bool):
        if kind not in (None, "bool"):
            raise ProtocolError(f"invalid opentsdb json format: a boolean is no {kind}", number)
        return "true" if value else "false"
    if isinstance(value, str):
        prefix = _JSON_TYPES.get(kind or "nchar")
        if prefix not in ('"', 'L"'):
            raise ProtocolError(f"invalid opentsdb json format: a string is no {kind}", number)
        return prefix + value
    if isinstance(value, (int, float)) and math.isfinite(value):
        suffix = _JSON_TYPES[kind or "double"]
        if suffix in ('"', 'L"', "bool"):
            raise ProtocolError(f"invalid opentsdb json format: a number is no {kind}", number)
        if suffix.startswith("i") and not isinstance(value, int):
            raise ProtocolError(f"invalid opentsdb json format: {value} is no {kind}", number)
        return f"{value!r}{suffix}"
    raise ProtocolError("invalid opentsdb json format: value must be a number, a boolean or a string", number)
