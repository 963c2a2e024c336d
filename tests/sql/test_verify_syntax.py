"""VERIFY STREAM (TDengine, both stream syntaxes) and VERIFY CQ (IoTDB) as a table of statements and
the model each parses to, and the refused forms with their positions."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.sql import parse

JAN1 = m.TimePoint(at=datetime(2025, 1, 1, tzinfo=UTC))
JAN2 = m.TimePoint(at=datetime(2025, 1, 2, tzinfo=UTC))
HOUR = 3_600_000_000


def V(name: m.TableName, start: m.TimePoint | None = None, end: m.TimePoint | None = None,
      repair: bool = False) -> tuple:
    return name, start, end, repair

PARSED = [
    ("VERIFY STREAM d.s", V(m.TableName("s", "d"))),
    ("verify stream s repair", V(m.TableName("s"), repair=True)),
    ("VERIFY STREAM d.s FROM '2025-01-01 00:00:00' TO '2025-01-02 00:00:00'",
     V(m.TableName("s", "d"), JAN1, JAN2)),
    ("VERIFY STREAM s FROM 1735689600000", V(m.TableName("s"), JAN1)),
    ("VERIFY STREAM s TO now - 1h REPAIR", V(m.TableName("s"), None, m.TimePoint(now_offset_micros=-HOUR),
                                                          True)),
    ("VERIFY CQ cq1", V(m.TableName("cq1", "root"))),
    ("VERIFY CONTINUOUS QUERY Cq1 FROM 2025-01-01T00:00:00Z TO 2025-01-02T00:00:00Z REPAIR",
     V(m.TableName("cq1", "root"), JAN1, JAN2, True)),
    ("VERIFY CQ cq1 FROM 1735689600000 TO now() - 1h",
     V(m.TableName("cq1", "root"), JAN1, m.TimePoint(now_offset_micros=-HOUR))),
]


@pytest.mark.parametrize(("text", "expected"), PARSED)
def test_verify_parses_to_its_model(text, expected):
    (stmt,) = parse(text)
    assert isinstance(stmt, m.VerifyStream)
    assert (stmt.name, stmt.start, stmt.end, stmt.repair) == expected


REFUSED = [
    ("VERIFY STREAM s FROM '2025-01-02' TO '2025-01-01'", 35, "TO must be later than FROM"),
    ("VERIFY STREAM s FROM", 21, "expected a timestamp"),
    ("VERIFY STREAM s REPAIR NOW", 24, "unexpected 'NOW'"),
    ("VERIFY STREAM s TO '2025-13-01'", 20, "2025-13-01"),
    ("VERIFY CQ cq1 FROM 2025-01-02T00:00:00Z TO 2025-01-01T00:00:00Z", 41, "TO must be later than FROM"),
    ("VERIFY CQ cq1 TO", 17, "must be a time"),
]


@pytest.mark.parametrize(("text", "column", "message"), REFUSED)
def test_bad_verify_is_refused_at_its_position(text, column, message):
    with pytest.raises(StreamDefinitionError, match=message) as err:
        parse(text)
    assert (err.value.line, err.value.column) == (1, column)
