"""Mutated statements never escape with anything but the project's error types."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.sql import parse

from .test_reference_examples import EXAMPLES

SEEDS = [text for text, _ in EXAMPLES] + [
    "CREATE STREAM s STATE_WINDOW(st) TRUE_FOR(10m AND COUNT 3) FROM db.t PARTITION BY tbname "
    "STREAM_OPTIONS(WATERMARK(1s) | EVENT_TYPE(WINDOW_OPEN|WINDOW_CLOSE)) NOTIFY('ws://h:1') ON (WINDOW_OPEN) "
    "INTO o TAGS (g VARCHAR(10) AS tbname) AS SELECT _twstart, count(*) FROM %%tbname",
    "INSERT INTO d1 USING meters TAGS (1, 'x') VALUES (now, 1.5, NULL) ('2025-01-01', -2, 3)",
    "CREATE STABLE st (ts TIMESTAMP, v DOUBLE) TAGS (loc NCHAR(10)); CREATE TABLE d1 USING st TAGS ('a')",
    "RECALCULATE STREAM db.s FROM now - 1d TO now",
]
FRAGMENTS = ["(", ")", ",", "|", "'", '"', "`", ";", "%%", "%%trows", "5m", "0", "-1", "AS", "FROM", "NOTIFY",
             "TRUE_FOR", "COUNT", "STREAM_OPTIONS(", "END WITH", "SELECT", "\n", "10b", "1n", "_twend", "x.y.z"]


@st.composite
def mutated(draw):
    text = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(1, 4))):
        pos = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["insert", "delete", "replace"]))
        piece = draw(st.one_of(st.sampled_from(FRAGMENTS), st.text(min_size=1, max_size=3)))
        if action == "insert":
            text = text[:pos] + piece + text[pos:]
        elif action == "delete":
            text = text[:pos] + text[pos + draw(st.integers(1, 8)):]
        else:
            text = text[:pos] + piece + text[pos + len(piece):]
    return text


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutations_raise_only_project_errors(text):
    try:
        statements = parse(text)
    except StreamDefinitionError as err:
        assert err.line is None or err.line >= 1
        assert str(err)
        return
    assert isinstance(statements, list)


def test_deep_nesting_is_a_syntax_error():
    import pytest

    with pytest.raises(StreamDefinitionError, match="nested too deeply"):
        parse("SELECT " + "(" * 3000 + "1" + ")" * 3000)
