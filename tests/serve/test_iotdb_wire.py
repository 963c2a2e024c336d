"""The binary values of IoTDB's session protocol, without a server: tablets and records encoded by
the official client (``Tablet.get_binary_values``, ``Session.value_to_bytes``) decode to the values
given to it; broken buffers are refused; string values get IoTDB's inferred types."""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest

from airflow_stream_provider.serve import iotdb_wire as wire

Session = pytest.importorskip("iotdb.Session").Session
from iotdb.utils.IoTDBConstants import TSDataType  # noqa: E402
from iotdb.utils.Tablet import Tablet  # noqa: E402

TYPES = [TSDataType.BOOLEAN, TSDataType.INT32, TSDataType.INT64, TSDataType.FLOAT, TSDataType.DOUBLE,
         TSDataType.TEXT]
ROWS = [[True, 1, 2**40, 0.5, 1.25, "a"], [None, None, None, None, None, None], [False, -7, None, 2.0, None, "ü"]]
NAMES = ["b", "i", "l", "f", "d", "t"]


@pytest.mark.parametrize("rows", [ROWS, [ROWS[0], ROWS[2]], [ROWS[0]] * 9])  # with nulls, without, 9 rows
def test_tablets_encoded_by_the_client_decode_to_its_values(rows):
    tablet = Tablet("root.sg.d", NAMES, TYPES, rows, list(range(len(rows))))
    columns = wire.tablet_columns(tablet.get_binary_values(), [int(t) for t in TYPES], len(rows), NAMES)
    assert [[columns[n][r].as_py() for n in NAMES] for r in range(len(rows))] == rows
    assert wire.times(tablet.get_binary_timestamps(), len(rows)).cast(pa.int64()).to_pylist() == list(range(len(rows)))


def test_records_encoded_by_the_client_decode_to_their_values():
    values = [True, 3, 2**40, 0.5, 1.25, "text"]
    decoded = wire.record_values(Session.value_to_bytes(TYPES, values), NAMES)
    assert decoded == dict(zip(NAMES, zip(["BOOLEAN", "INT32", "INT64", "FLOAT", "DOUBLE", "TEXT"], values)))


@pytest.mark.parametrize("data, types, size", [
    (struct.pack(">i", 1), [1], 2),  # two INT32 rows, the bytes of one
    (struct.pack(">2i", 1, 2) + b"\x00\x00", [1], 2),  # bytes after the last column
    (struct.pack(">i", 5) + b"ab", [5], 1),  # a text shorter than its length
    (struct.pack(">q", 1), [11], 1),  # STRING: not stored
])
def test_broken_tablets_are_refused(data, types, size):
    with pytest.raises(wire.WireError):
        wire.tablet_columns(data, types, size, [f"m{i}" for i in range(len(types))])


@pytest.mark.parametrize("text, known, expected", [
    ("true", None, ("BOOLEAN", True)), ("FALSE", None, ("BOOLEAN", False)), ("5", None, ("DOUBLE", 5.0)),
    ("1e3", None, ("DOUBLE", 1000.0)), ("abc", None, ("TEXT", "abc")), ("5", "INT32", ("INT32", 5)),
    ("nan", None, ("TEXT", "nan")), ("7", "TEXT", ("TEXT", "7")),
])
def test_string_values_take_the_series_type_or_iotdbs_inference(text, known, expected):
    assert wire.infer(text, known) == expected


def test_a_string_value_that_does_not_fit_its_series_is_refused():
    with pytest.raises(wire.WireError) as refused:
        wire.infer("x", "INT64")
    assert refused.value.code == 614
