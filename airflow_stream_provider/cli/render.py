"""Query results as an aligned table, CSV or JSON, with ISO-8601 timestamps."""

from __future__ import annotations

import csv
import io
import json
from datetime import date, datetime
from decimal import Decimal

import numpy as np
import pyarrow as pa

from airflow_stream_provider import config


def iso(value: datetime) -> str:
    """ISO-8601 in ``AIRFLOW_STREAM_TIMEZONE``: milliseconds, or microseconds when they are not zero."""
    if value.tzinfo is not None:
        value = value.astimezone(config.timezone())
    spec = "milliseconds" if value.microsecond % 1000 == 0 else "microseconds"
    return value.isoformat(timespec=spec)


def plain(value: object) -> object:
    """A JSON-ready form of one cell."""
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes):
        return "\\x" + value.hex()
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def _text(value: object) -> str:
    value = plain(value)
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def render(table: pa.Table, fmt: str) -> str:
    names = table.column_names
    # FLOAT columns print at their own precision (12.6, not 12.600000381469727), as TDengine prints them.
    for i, f in enumerate(table.schema):
        if pa.types.is_float32(f.type):
            table = table.set_column(i, f.name, pa.array(
                [None if v is None else float(str(np.float32(v))) for v in table.column(i).to_pylist()],
                pa.float64()))
    rows = table.to_pylist()
    if fmt == "json":
        return json.dumps([{k: plain(v) for k, v in row.items()} for row in rows], ensure_ascii=False) + "\n"
    if fmt == "csv":
        buffer = io.StringIO()
        out = csv.writer(buffer, lineterminator="\n")
        out.writerow(names)
        for row in rows:
            out.writerow(["" if row[n] is None else _text(row[n]) for n in names])
        return buffer.getvalue()
    if fmt != "table":
        raise ValueError(f"unknown format {fmt!r}: use table, csv or json")
    cells = [[_text(row[n]) for n in names] for row in rows]
    widths = [max([len(n)] + [len(r[i]) for r in cells]) for i, n in enumerate(names)]
    numeric = [pa.types.is_integer(f.type) or pa.types.is_floating(f.type) or pa.types.is_decimal(f.type)
               for f in table.schema]

    def line(values: list[str]) -> str:
        parts = [v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric, strict=True)]
        return " | ".join(parts).rstrip()

    out_lines = [line(list(names)), "-+-".join("-" * w for w in widths)]
    out_lines.extend(line(r) for r in cells)
    return "\n".join(out_lines) + "\n"
