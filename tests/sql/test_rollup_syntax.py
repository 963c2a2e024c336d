"""ROLLUP BY tag (TDengine 3.4.2) in CREATE STREAM: parsed, and its limits refused with their clause.

The cases re-express TDengine's ``stream_rollup_basic.py`` (syntax and placeholder checks) and the
usage notes of its stream syntax page: ROLLUP BY takes one tag, excludes PARTITION BY, groups PERIOD,
SLIDING, INTERVAL and SESSION triggers only, needs FROM even for PERIOD; ``%%rollup_tag`` and
``_trollup_tbcount`` exist only with it, and ``_trollup_tbcount`` only in the computation.
"""

from __future__ import annotations

import pytest

from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.sql import parse

W = "CREATE STREAM s INTERVAL(1s) SLIDING(1s) FROM stb"
Q = "AS SELECT _tlocaltime, avg(c1) FROM q"


def one(text: str) -> m.CreateStream:
    (stmt,) = parse(text)
    assert isinstance(stmt, m.CreateStream)
    return stmt


# (statement, ROLLUP BY tag, group columns %%n names)
ACCEPTED = [
    (f"{W} ROLLUP BY tag2 INTO o(ts, rt, tbcount) AS SELECT _tlocaltime, %%rollup_tag, _trollup_tbcount FROM q",
     "tag2"),
    (f"{W} ROLLUP BY tag2 INTO o OUTPUT_SUBTABLE(cast(%%rollup_tag as varchar(20))) (ts, v) "
     f"TAGS (rt VARCHAR(20) AS %%rollup_tag) {Q}", "tag2"),
    (f"{W} ROLLUP BY tag2 INTO o (ts, v) TAGS (rt VARCHAR(20) AS %%rollup_tag) {Q}", "tag2"),
    (f"{W} ROLLUP BY tag2 INTO o OUTPUT_SUBTABLE(cast(tag2 as varchar(20))) (ts, v) TAGS (rt VARCHAR(20) AS tag2) "
     f"{Q}", "tag2"),
    ("CREATE STREAM s INTERVAL(1h) SLIDING(1h) FROM meters ROLLUP BY location INTO rollup_avg "
     "OUTPUT_SUBTABLE(concat(%%1, '_avg')) TAGS (location VARCHAR(256) AS %%1, node_name VARCHAR(64) AS %%rollup_tag) "
     "AS SELECT _twstart, avg(current), _trollup_tbcount FROM %%trows", "location"),
    ("CREATE STREAM s PERIOD(1m) FROM meters ROLLUP BY location INTO o AS SELECT cast(_tlocaltime/1000 as timestamp), "
     "_trollup_tbcount FROM meters", "location"),
    ("CREATE STREAM s SLIDING(1m) FROM meters ROLLUP BY location INTO o AS SELECT _tcurrent_ts, count(*) FROM %%trows",
     "location"),
    ("CREATE STREAM s SESSION(ts, 10s) FROM meters ROLLUP BY Location STREAM_OPTIONS(MAX_DELAY(3s)) INTO o "
     "AS SELECT _twstart, count(*) FROM %%trows", "location"),
]


@pytest.mark.parametrize(("text", "tag"), ACCEPTED)
def test_rollup_by_is_parsed(text, tag):
    stmt = one(text)
    assert stmt.rollup_by.lower() == tag
    assert stmt.partition_by == ()
    assert stmt.grouped
    assert stmt.group_columns == (stmt.rollup_by,)


# (statement, words of the message, clause)
REFUSED = [
    # TDengine's stream_rollup_basic.py check_errors, with our own tables
    ("CREATE STREAM s INTERVAL(1s) SLIDING(1s) ROLLUP BY tag2 INTO o " + Q, "requires explicit FROM", "ROLLUP BY"),
    ("CREATE STREAM s PERIOD(1m) ROLLUP BY tag2 INTO o AS SELECT cast(_tlocaltime/1000 as timestamp), 1",
     "requires explicit FROM", "ROLLUP BY"),
    (f"{W} PARTITION BY tbname INTO o OUTPUT_SUBTABLE(cast(%%rollup_tag as varchar(20))) {Q}",
     "rollup placeholders require ROLLUP BY", "OUTPUT_SUBTABLE"),
    (f"{W} PARTITION BY tbname INTO o TAGS (rt NCHAR(20) AS %%rollup_tag) {Q}",
     "rollup placeholders require ROLLUP BY", "TAGS"),
    (f"{W} PARTITION BY tbname INTO o AS SELECT _tlocaltime, _trollup_tbcount FROM q",
     "rollup placeholders require ROLLUP BY", "AS"),
    (f"{W} ROLLUP BY tag2 INTO o OUTPUT_SUBTABLE(cast(_trollup_tbcount as varchar(20))) {Q}",
     "_trollup_tbcount", "OUTPUT_SUBTABLE"),
    (f"{W} ROLLUP BY tag2 INTO o TAGS (tbcount INT AS _trollup_tbcount) {Q}", "_trollup_tbcount", "TAGS"),
    # the syntax page's usage notes
    ("CREATE STREAM s STATE_WINDOW(c1) FROM stb ROLLUP BY tag2 INTO o AS SELECT _twstart, count(*) FROM %%trows",
     "not STATE_WINDOW", "ROLLUP BY"),
    ("CREATE STREAM s EVENT_WINDOW(START WITH c1 > 1 END WITH c1 < 1) FROM stb ROLLUP BY tag2 INTO o "
     "AS SELECT _twstart, count(*) FROM %%trows", "not EVENT_WINDOW", "ROLLUP BY"),
    ("CREATE STREAM s COUNT_WINDOW(3) FROM stb ROLLUP BY tag2 INTO o AS SELECT _twstart, count(*) FROM %%trows",
     "not COUNT_WINDOW", "ROLLUP BY"),
    (f"{W} ROLLUP BY tag1, tag2 INTO o {Q}", "takes one tag column", "ROLLUP BY"),
    (f"{W} ROLLUP BY tag2 PARTITION BY tbname INTO o {Q}", "exclude each other", "ROLLUP BY"),
    (f"{W} PARTITION BY tbname ROLLUP BY tag2 INTO o {Q}", "exclude each other", "ROLLUP BY"),
    (f"{W} ROLLUP BY tag2 STREAM_OPTIONS(DELETE_OUTPUT_TABLE) INTO o {Q}", "not to ROLLUP BY", "DELETE_OUTPUT_TABLE"),
    # %%1 is the rollup path; there is no %%2
    (f"{W} ROLLUP BY tag2 INTO o AS SELECT _tlocaltime, %%2 FROM q", "%%2 refers to ROLLUP BY tag 2", "AS"),
    (f"{W} ROLLUP BY tag2 INTO o TAGS (t INT AS tag1) {Q}", "only ROLLUP BY columns (tag2), not tag1", "TAGS"),
    (f"{W} ROLLUP BY tag2 INTO o AS SELECT _tlocaltime, %%tbname FROM q", "%%tbname needs PARTITION BY tbname", "AS"),
]


@pytest.mark.parametrize(("text", "words", "clause"), REFUSED)
def test_rollup_misuse_is_refused_with_its_clause(text, words, clause):
    with pytest.raises(StreamDefinitionError) as info:
        parse(text)
    err = info.value
    assert words in str(err)
    assert err.clause == clause
    assert err.line == 1 and err.column is not None and err.column > 1


def test_the_error_points_at_the_placeholder():
    text = f"{W} PARTITION BY tbname\nINTO o TAGS (rt NCHAR(20) AS %%rollup_tag) {Q}"
    with pytest.raises(StreamDefinitionError) as info:
        parse(text)
    assert (info.value.line, info.value.column) == (2, text.split("\n")[1].index("%%rollup_tag") + 1)
