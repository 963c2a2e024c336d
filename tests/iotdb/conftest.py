"""The sample data of reference 004's continuous-query examples: four devices of ``root.ln``, nine
rows each of ``temperature`` (created in the order the reference's tables print them)."""

from __future__ import annotations

import pytest

from tests.conftest import sql

#: (time, wf02.wt02, wf02.wt01, wf01.wt02, wf01.wt01), as printed by reference 004
SAMPLE = [
    ("2021-05-11T22:18:14.598+08:00", 121.0, 72.0, 183.0, 115.0),
    ("2021-05-11T22:18:19.941+08:00", 0.0, 68.0, 68.0, 103.0),
    ("2021-05-11T22:18:24.949+08:00", 122.0, 45.0, 11.0, 14.0),
    ("2021-05-11T22:18:29.967+08:00", 47.0, 14.0, 59.0, 181.0),
    ("2021-05-11T22:18:34.979+08:00", 182.0, 113.0, 29.0, 180.0),
    ("2021-05-11T22:18:39.990+08:00", 42.0, 11.0, 52.0, 19.0),
    ("2021-05-11T22:18:44.995+08:00", 78.0, 38.0, 123.0, 52.0),
    ("2021-05-11T22:18:49.999+08:00", 137.0, 172.0, 135.0, 193.0),
    ("2021-05-11T22:18:55.003+08:00", 16.0, 124.0, 183.0, 18.0),
]
DEVICES = ["root.ln.wf02.wt02", "root.ln.wf02.wt01", "root.ln.wf01.wt02", "root.ln.wf01.wt01"]


def load_sample(wh) -> None:
    statements = ["CREATE DATABASE root.ln"]
    statements += [f"CREATE TIMESERIES {d}.temperature WITH DATATYPE=FLOAT, ENCODING=RLE" for d in DEVICES]
    for i, device in enumerate(DEVICES):
        rows = ", ".join(f"({row[0]}, {row[i + 1]})" for row in SAMPLE)
        statements.append(f"INSERT INTO {device}(time, temperature) VALUES {rows}")
    sql(wh, ";\n".join(statements))


@pytest.fixture
def ln(wh):
    """``wh`` holding the sample data."""
    load_sample(wh)
    return wh
