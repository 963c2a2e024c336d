"""Freshness judged from its inputs: a table of cases worked by hand, the settings that declare it
(``airflow-stream.toml``, a ``.sql`` directive, Python) and the errors they are refused with."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.plan.declaration import declare, read_file
from airflow_stream_provider.plan.freshness import Freshness, configured, of
from airflow_stream_provider.plan.state import StreamState
from airflow_stream_provider.sql import parse
from airflow_stream_provider.streams.status import freshness

T0 = datetime(2025, 1, 1, tzinfo=UTC)
MINUTE = "CREATE STREAM d.s INTERVAL(1m) SLIDING(1m) FROM m INTO o AS SELECT _twstart ts, count(*) n FROM %%trows"
COUNT = "CREATE STREAM d.s COUNT_WINDOW(10) FROM m INTO o AS SELECT _twstart ts, count(*) n FROM %%trows"
PERIOD = "CREATE STREAM d.s PERIOD(10s) INTO o AS SELECT cast(_tlocaltime / 1000000 AS timestamp) ts, count(*) n FROM m"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


# (definition, freshness, lag s, last row written at s, last fired at s, expected)
CASES = [
    (MINUTE, of("5m"), 40.0, 10, 0, "ok"),
    (MINUTE, of("5m"), 300.0, 10, 0, "ok"),  # at the bound is not over it
    (MINUTE, of("5m"), 300.5, 10, 0, "late"),
    (MINUTE, of("5m"), None, 10, 0, "ok"),  # nothing processed yet: no lag
    (MINUTE, of("5m"), 40.0, 179, 0, "ok"),  # 3 periods of 1m: 180 s of rows without a window
    (MINUTE, of("5m"), 40.0, 181, 0, "silent"),
    (MINUTE, of("5m", 5), 40.0, 181, 0, "ok"),  # 5 periods: 300 s
    (MINUTE, of("5m", "2m"), 40.0, 121, 0, "silent"),  # a duration, not periods
    (MINUTE, of("5m"), 400.0, 181, 0, "late"),  # late says more than silent
    (MINUTE, of("5m"), 40.0, None, 0, "ok"),  # no row written since the stream's table had none
    (MINUTE, of("5m"), 40.0, 181, 200, "ok"),  # it fired after the last row
    (COUNT, of("2m"), None, 119, 0, "ok"),  # no period: silent after the bound itself
    (COUNT, of("2m"), None, 121, 0, "silent"),
    (PERIOD, of("1m"), None, 31, 0, "silent"),  # 3 periods of 10 s
    (PERIOD, of("1m"), 61.0, 0, 0, "late"),  # its next instant due for 61 s
]


@pytest.mark.parametrize(("text", "bound", "lag", "written", "fired", "expected"), CASES)
def test_freshness_is_late_over_the_bound_and_silent_after_its_periods(text, bound, lag, written, fired, expected):
    (stmt,) = parse(text)
    state, why = freshness(bound, stmt, lag, None if written is None else at(written), at(fired))
    assert state == expected
    assert (why is None) == (expected == "ok")


def test_no_bound_no_verdict():
    (stmt,) = parse(MINUTE)
    assert freshness(None, stmt, 1e9, at(1e6), at(0)) == (None, None)


def test_the_settings_of_airflow_stream_toml(tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(tmp_path))
    (tmp_path / "airflow-stream.toml").write_text(
        '[streams.d.s]\nfreshness = "1h30m"\nsilent_after = "90s"\n[streams.d.t]\nfreshness = 45\n'
        '[streams.d.bad]\nfreshness = "5 minutes"\n[streams.d.alone]\nsilent_after = 3\n')
    assert configured("d", "s") == Freshness(timedelta(minutes=90), timedelta(seconds=90))
    assert configured("D", "T") == Freshness(timedelta(seconds=45), 3)
    assert configured("d", "none") is None
    with pytest.raises(StreamDefinitionError, match=r"\[streams.d.bad\].*not a duration"):
        configured("d", "bad")
    with pytest.raises(StreamDefinitionError, match="needs a freshness bound"):
        configured("d", "alone")
    # a declaration's freshness, recorded in the stream's state, comes first
    declared = StreamState().replace(freshness=of("10s", 2).to_json())
    assert configured("d", "s", declared) == Freshness(timedelta(seconds=10), 2)


def test_a_declaration_says_its_freshness_in_python_or_in_its_file(tmp_path):
    assert declare(MINUTE, freshness=timedelta(minutes=5)).freshness == Freshness(timedelta(minutes=5))
    assert declare(MINUTE, freshness="5m", silent_after="1m").freshness == Freshness(
        timedelta(minutes=5), timedelta(minutes=1))
    assert declare(MINUTE).freshness is None
    assert declare(MINUTE, freshness="5m").fingerprint != declare(MINUTE).fingerprint
    path = tmp_path / "s.sql"
    path.write_text("-- freshness: 5m, silent after 4 periods\n" + MINUTE)
    assert read_file(path).freshness == Freshness(timedelta(minutes=5), 4)
    path.write_text("-- freshness: 90s\n" + MINUTE)
    assert read_file(path).freshness == Freshness(timedelta(seconds=90))
    path.write_text("-- on change: recreate\n-- freshness: soon\n" + MINUTE)
    with pytest.raises(StreamDefinitionError, match="freshness") as err:
        read_file(path)
    assert "line 2" in str(err.value)
    with pytest.raises(StreamDefinitionError, match="must be positive"):
        declare(MINUTE, freshness="0s")
    with pytest.raises(StreamDefinitionError, match="no fixed length"):
        declare(MINUTE, freshness="1mo")
