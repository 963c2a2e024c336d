"""Values of INSERT statements against TDengine column types (ranges from the TDengine type table)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from airflow_stream_provider.model import DataType, TimePoint
from airflow_stream_provider.warehouse.types import BadValue, TimeContext, coerce, coercer, parse_type

NOW = datetime(2025, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)
MS = TimeContext("ms", NOW)
US = TimeContext("us", NOW)


@pytest.mark.parametrize(
    ("type_name", "low", "high"),
    [
        ("TINYINT", -128, 127),
        ("SMALLINT", -32768, 32767),
        ("INT", -2147483648, 2147483647),
        ("BIGINT", -(2**63), 2**63 - 1),
        ("TINYINT UNSIGNED", 0, 255),
        ("SMALLINT UNSIGNED", 0, 65535),
        ("INT UNSIGNED", 0, 4294967295),
        ("BIGINT UNSIGNED", 0, 18446744073709551615),
    ],
)
def test_integer_ranges_accept_the_bounds_and_reject_one_past(type_name, low, high):
    dtype = DataType(type_name)
    assert coerce(low, dtype, MS) == low
    assert coerce(high, dtype, MS) == high
    for outside in (low - 1, high + 1):
        with pytest.raises(BadValue, match="out of range"):
            coerce(outside, dtype, MS)


def test_epoch_numbers_follow_the_database_precision():
    # 1538548685000 ms is 2018-10-03 06:38:05 UTC (TDengine's documentation example instant).
    expected = datetime(2018, 10, 3, 6, 38, 5, tzinfo=UTC)
    assert coerce(1538548685000, DataType("TIMESTAMP"), MS) == expected
    assert coerce(1538548685000000, DataType("TIMESTAMP"), US) == expected


def test_millisecond_databases_truncate_sub_millisecond_parts():
    ts = DataType("TIMESTAMP")
    assert coerce("2025-01-01 00:00:00.123456", ts, MS) == datetime(2025, 1, 1, 0, 0, 0, 123000, tzinfo=UTC)
    assert coerce("2025-01-01 00:00:00.123456", ts, US) == datetime(2025, 1, 1, 0, 0, 0, 123456, tzinfo=UTC)
    assert coerce(TimePoint(now_offset_micros=-1_000_000), ts, MS) == datetime(2025, 3, 1, 11, 59, 59, 123000,
                                                                               tzinfo=UTC)


def test_timestamp_strings_with_offsets_are_converted_to_utc():
    value = coerce("2025-01-01T08:00:00+08:00", DataType("TIMESTAMP"), MS)
    assert value == datetime(2025, 1, 1, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("dtype", "value", "message"),
    [
        (DataType("INT"), "12", "not an integer"),
        (DataType("INT"), 1.5, "not an integer"),
        (DataType("FLOAT"), "abc", "not a number"),
        (DataType("FLOAT"), 1e39, "out of range for FLOAT"),
        (DataType("BOOL"), "maybe", "not a boolean"),
        (DataType("VARCHAR", (4,)), 12, "not a string"),
        (DataType("VARCHAR", (4,)), "abcde", "5 bytes, longer than VARCHAR(4)"),
        (DataType("NCHAR", (2,)), "北京市", "3 characters, longer than NCHAR(2)"),
        (DataType("TIMESTAMP"), "yesterday", "not a timestamp"),
        (DataType("TIMESTAMP"), True, "not a timestamp"),
        (DataType("DECIMAL", (4, 2)), 123.45, "does not fit DECIMAL(4, 2)"),
        (DataType("JSON"), "[1, 2]", "not a JSON object"),
        (DataType("VARBINARY", (2,)), "\\x0102ff", "3 bytes are longer"),
    ],
)
def test_values_that_do_not_fit_are_rejected_with_the_reason(dtype, value, message):
    with pytest.raises(BadValue, match=re.escape(message)):
        coerce(value, dtype, MS)


def test_multibyte_strings_count_bytes_for_varchar_and_characters_for_nchar():
    assert coerce("北京", DataType("NCHAR", (2,)), MS) == "北京"
    with pytest.raises(BadValue):
        coerce("北京", DataType("VARCHAR", (5,)), MS)  # 6 bytes in UTF-8


def test_decimals_round_to_the_scale_and_varbinary_reads_hex():
    assert coerce(12.345, DataType("DECIMAL", (5, 2)), MS) == Decimal("12.35")  # half up, as SQL rounds
    assert coerce("1.5", DataType("DECIMAL", (5, 2)), MS) == Decimal("1.50")
    assert coerce("\\x0aff", DataType("VARBINARY", (4,)), MS) == b"\x0a\xff"
    assert coerce("ab", DataType("VARBINARY", (4,)), MS) == b"ab"
    assert coerce(2, DataType("BOOL"), MS) is True
    assert coerce(None, DataType("INT"), MS) is None


@pytest.mark.parametrize("text", ["INT UNSIGNED", "VARCHAR(24)", "DECIMAL(10, 2)", "TIMESTAMP", "NCHAR(8)"])
def test_type_text_round_trips(text):
    assert str(parse_type(text)) == text


def _answer(convert, value):
    try:
        result = convert(value)
    except BadValue as err:
        return ("error", str(err))
    return ("ok", type(result).__name__, result)


@pytest.mark.parametrize("type_name", ["TIMESTAMP", "TINYINT", "INT", "BIGINT", "INT UNSIGNED", "BIGINT UNSIGNED",
                                       "FLOAT", "DOUBLE", "BOOL", "VARCHAR(4)"])
@pytest.mark.parametrize("ctx", [MS, US])
def test_a_columns_coercer_answers_as_coerce(type_name, ctx):
    """TDengine's type table's edges (TINYINT -128..127, INT -2^31..2^31-1, FLOAT's largest
    3.4028234663852886e38) and the years 1 and 9999, each on both sides, with the wrong kinds."""
    dtype = parse_type(type_name)
    values = [None, True, 0, 1, -1, -128, 127, -129, 128, -(2**31), 2**31 - 1, 2**31, 2**63, -(2**63) - 1, 1.5, -0.0,
              3.4028234663852886e38, -3.4028234663852886e38, 3.5e38, float("inf"), "1", "2025-01-01 00:00:00",
              "abcde", TimePoint(now_offset_micros=0), 253402300799999, 253402300800000, -62135596800000,
              -62135596800001, 253402300799999999, 253402300800000000]
    convert = coercer(dtype, ctx)
    for value in values:
        assert _answer(convert, value) == _answer(lambda v: coerce(v, dtype, ctx), value), value
