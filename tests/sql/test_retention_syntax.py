"""Retention in each language's words: TDengine's ``KEEP`` of CREATE and ALTER DATABASE, IoTDB's
``SET TTL`` and ``UNSET TTL``, as a table of statements and what they parse to, and the refused
forms with their positions (TDengine: KEEP between 1 and 365000 days, in m, h or d, up to three
tiers; IoTDB: milliseconds, on a database or a prefix ending in ``.**``)."""

from __future__ import annotations

import pytest

from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.sql import parse

DAY = 86_400_000_000

PARSED = [
    ("CREATE DATABASE d KEEP 30d", ("d", 30 * DAY)),
    ("CREATE DATABASE d KEEP 3650", ("d", 3650 * DAY)),  # a number is days
    ("CREATE DATABASE d PRECISION 'us' KEEP 1440m", ("d", DAY)),
    ("CREATE DATABASE d KEEP 30d, 180d, 365d", ("d", 365 * DAY)),  # the last tier is when rows go
    ("CREATE DATABASE d", ("d", None)),
    ("ALTER DATABASE d KEEP 48h", ("d", 2 * DAY)),
    ("alter database d keep 7", ("d", 7 * DAY)),
    ("SET TTL TO root.ln 3600000", ("root.ln", 3600000)),
    ("set ttl to root.sgcc.** 60000", ("root.sgcc.**", 60000)),
    ("UNSET TTL TO root.ln", ("root.ln", None)),
]


@pytest.mark.parametrize(("text", "expected"), PARSED)
def test_retention_parses(text, expected):
    (stmt,) = parse(text)
    if isinstance(stmt, m.SetTtl):
        assert (str(stmt.path), stmt.ttl_ms) == expected
    else:
        assert isinstance(stmt, (m.CreateDatabase, m.AlterDatabase))
        assert (stmt.name, stmt.keep.micros if stmt.keep else None) == expected


REFUSED = [
    ("CREATE DATABASE d KEEP 12h", 24, "outside the allowed range"),
    ("CREATE DATABASE d KEEP 365001", 24, "outside the allowed range"),
    ("CREATE DATABASE d KEEP 30s", 24, "minutes, hours or days"),
    ("CREATE DATABASE d KEEP 30d, 10d", 29, "must not shrink"),
    ("ALTER DATABASE d REPLICA 3", 18, "changes only KEEP"),
    ("ALTER DATABASE d", 17, "expected KEEP"),
    ("SET TTL TO root.*.ln 1000", 12, "a database or a prefix ending in"),
    ("SET TTL TO root.ln 1h", 20, "takes milliseconds"),
    ("SET TTL TO root.ln 0", 20, "between 1"),
]


@pytest.mark.parametrize(("text", "column", "message"), REFUSED)
def test_bad_retention_is_refused_at_its_position(text, column, message):
    with pytest.raises(StreamDefinitionError, match=message) as err:
        parse(text)
    assert (err.value.line, err.value.column) == (1, column)
