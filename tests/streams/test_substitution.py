"""`${...}` in a data value stays a value: Spark's variable substitution is off in the project's sessions.

The name rule refuses the ``.`` of ``${system:user.name}`` as a subtable name, so the subtable
here is ``${hivevar:subst_target}``, which Spark, with substitution on, replaces by
the session setting ``subst_target``: the name of the other subtable, the user running the tests.
Pasted into SQL text as a string literal, the first name would then read as the second, and these
tests would count, delete and compute the wrong rows. ``${system:user.name}`` itself stays as a tag
value.
"""

from __future__ import annotations

import getpass

import pytest

from airflow_stream_provider.spark.session import VARIABLE_SUBSTITUTE, setting
from airflow_stream_provider.streams.run import run as run_stream
from tests.conftest import sql

pytestmark = pytest.mark.spark

SUBST = "${hivevar:subst_target}"
USER = getpass.getuser()
SYSTEM_USER = "${system:user.name}"


@pytest.fixture
def wh(wh, spark):
    spark.conf.set("subst_target", USER)
    sql(wh, f"""CREATE DATABASE d; USE d;
        CREATE STABLE meters (ts TIMESTAMP, v INT) TAGS (note VARCHAR(40));
        INSERT INTO `{SUBST}` USING meters TAGS ('{SYSTEM_USER}')
          VALUES ('2025-01-01 00:00:00', 1) ('2025-01-01 00:00:05', 2) ('2025-01-01 00:00:20', 3);
        INSERT INTO `{USER}` USING meters TAGS ('{USER}')
          VALUES ('2025-01-01 00:00:00', 5) ('2025-01-01 00:00:20', 6)""")
    yield wh
    spark.conf.unset("subst_target")


def select(wh, text: str) -> list[dict]:
    return sql(wh, text)[-1].table.to_pylist()


def test_sessions_leave_variables_in_sql_text_alone(wh, spark):
    assert setting(spark, VARIABLE_SUBSTITUTE) == "false"
    row = spark.sql(f"SELECT '{SUBST}' AS a, '{SYSTEM_USER}' AS b").collect()[0]
    assert (row.a, row.b) == (SUBST, SYSTEM_USER)


def test_select_from_the_subtable_counts_its_own_rows(wh):
    assert select(wh, f"SELECT count(*) AS n FROM `{SUBST}`") == [{"n": 3}]
    assert select(wh, f"SELECT count(*) AS n FROM `{USER}`") == [{"n": 2}]
    assert select(wh, f"SELECT count(*) AS n FROM meters WHERE note = '{SYSTEM_USER}'") == [{"n": 3}]


def test_delete_from_the_subtable_deletes_only_its_rows(wh):
    (result,) = sql(wh, f"DELETE FROM `{SUBST}`")
    assert result.rows == 3
    counts = {r["tbname"]: r["n"] for r in select(wh, "SELECT tbname, count(*) AS n FROM meters GROUP BY tbname")}
    assert counts == {USER: 2}


@pytest.mark.parametrize("source", ["meters WHERE ts >= _twstart AND ts < _twend AND tbname = %%tbname",
                                    "%%tbname WHERE _c0 >= _twstart AND _c0 < _twend"])
def test_stream_computed_per_trigger_writes_the_groups_values(wh, source):
    """%%tbname inside an aggregate forces the per-trigger
    path, where the group's values are bound into the query text as literals."""
    sql(wh, f"""CREATE STREAM s INTERVAL(10s) SLIDING(10s) FROM meters PARTITION BY tbname
                STREAM_OPTIONS(FILL_HISTORY_FIRST) INTO s_out AS
                SELECT _twstart, count(*) AS n, max(%%tbname) AS who FROM {source}""")
    report = run_stream(wh, "d", "s")
    assert "aggregate" in (report.per_trigger or "")
    got = {(r["tag_tbname"], r["_twstart"].second): (r["n"], r["who"]) for r in select(wh, "SELECT * FROM s_out")}
    # by hand: [00:00, 00:10) holds 2 rows of SUBST and 1 of USER; [00:10, 00:20) is closed and empty
    # for both (an aggregate over no rows); the rows at 00:20 keep [00:20, 00:30) open
    assert got == {(SUBST, 0): (2, SUBST), (USER, 0): (1, USER), (SUBST, 10): (0, None), (USER, 10): (0, None)}
