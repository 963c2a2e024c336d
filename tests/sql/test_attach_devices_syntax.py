"""``CREATE DEVICES root.x FROM DELTA '<path>' MAP (TIME ..., DEVICE ..., MEASUREMENTS (...))`` as a
table of (text, model) and (text, positioned error) pairs; no Spark."""

from __future__ import annotations

import pytest

from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.sql import parse

BASE = "CREATE DEVICES root.plant FROM DELTA '/data/readings' "


@pytest.mark.parametrize(("text", "expected"), [
    (BASE + "MAP (TIME event_time, DEVICE device_id, MEASUREMENTS (voltage, amps = current))",
     ("root.plant", "/data/readings", "event_time", "device_id",
      (("voltage", "voltage"), ("amps", "current")))),
    ("create devices root.a.b from delta 's3://b/t' map (measurements (v), device D, time T);",
     ("root.a.b", "s3://b/t", "T", "D", (("v", "v"),))),
])
def test_create_devices(text, expected):
    (stmt,) = parse(text)
    assert isinstance(stmt, m.AttachDevices) and stmt.kind == "CREATE DEVICES"
    assert (str(stmt.prefix), stmt.path, stmt.timestamp.source, stmt.device.source,
            tuple((c.name, c.source) for c in stmt.measurements)) == expected
    assert (stmt.timestamp.name, stmt.device.name) == ("ts", "device")


#: (statement, message, the text the error points at: its last occurrence)
ERRORS = [
    ("CREATE DEVICES root FROM DELTA '/x' MAP (TIME t, DEVICE d, MEASUREMENTS (v))", "a path below root", "root"),
    ("CREATE DEVICES root.p.* FROM DELTA '/x' MAP (TIME t, DEVICE d, MEASUREMENTS (v))", "cannot hold wildcards",
     "root.p.*"),
    ("CREATE DEVICES root.p FROM DELTA '/x' MAP (TIME t, MEASUREMENTS (v))", "MAP needs DEVICE", "MAP"),
    ("CREATE DEVICES root.p FROM DELTA '/x' MAP (DEVICE d, MEASUREMENTS (v))", "MAP needs TIME", "MAP"),
    ("CREATE DEVICES root.p FROM DELTA '/x' MAP (TIME t, DEVICE d)", "MAP needs MEASUREMENTS", "MAP"),
    ("CREATE DEVICES root.p FROM DELTA '/x' MAP (TIME t, DEVICE d, COLUMNS (v))", "expected TIME, DEVICE", "COLUMNS"),
    ("CREATE DEVICES root.p FROM DELTA '/x' MAP (TIME t, TIME u, DEVICE d)", "names TIME twice", "TIME"),
    ("CREATE DEVICES root.p FROM DELTA '/x' MAP (TIME t, DEVICE d, MEASUREMENTS (v, w = v))", "reads column v twice",
     "w ="),
    ("CREATE DEVICES root.p FROM DELTA '/x' MAP (TIME t, DEVICE d, MEASUREMENTS (a = v, a = w))",
     "names the measurement a twice", "a = w"),
    ("CREATE DEVICES root.p FROM DELTA '/x' MAP (TIME t, DEVICE d, MEASUREMENTS (time = v))",
     "names the time or the device", "v)"),
    ("CREATE DEVICES root.p FROM DELTA 'http://x' MAP (TIME t, DEVICE d, MEASUREMENTS (v))",
     "a local folder or an s3:// URL", "'http"),
    ("CREATE DEVICES root.p FROM DELTA '' MAP (TIME t, DEVICE d, MEASUREMENTS (v))", "names no table", "''"),
    ("CREATE DEVICES root.p FROM PARQUET '/x' MAP (TIME t, DEVICE d, MEASUREMENTS (v))", "expected DELTA",
     "PARQUET"),
    ("CREATE DEVICES root.p FROM DELTA '/x' MAP (TIME t, DEVICE d, MEASUREMENTS (v)) WRITABLE",
     "unexpected 'WRITABLE'.*read-only", "WRITABLE"),
]


@pytest.mark.parametrize(("text", "message", "anchor"), ERRORS)
def test_create_devices_errors_are_positioned(text, message, anchor):
    with pytest.raises(StreamDefinitionError, match=message) as caught:
        parse(text)
    assert caught.value.line == 1 and caught.value.column == text.rindex(anchor) + 1, str(caught.value)
