"""Rollup groups of ROLLUP BY (TDengine 3.4.2), worked out by hand from TDengine's syntax page and tests.

The page: "a tag value ``A.B.C`` is expanded into ``A``, ``A.B``, and ``A.B.C``; data from that child
table participates in all three groups"; NULL or empty values make no group; leading, trailing or
repeated separators, empty segments, control characters and spaces at a segment's ends put the
stream in error. ``stream_rollup_basic.py``: subtables at ``A.B.C`` and ``A.B.D`` make four groups,
``_trollup_tbcount`` 2 for ``A`` and ``A.B`` and 1 for each leaf, ``%%rollup_tag`` of ``A.B.C`` is ``C``.
"""

from __future__ import annotations

import pandas as pd
import pytest

from airflow_stream_provider.windows import rollup


@pytest.mark.parametrize(("value", "groups"), [
    ("A.B.C", ("A", "A.B", "A.B.C")),
    ("factory", ("factory",)),
    ("California.SanFrancisco.Soma", ("California", "California.SanFrancisco", "California.SanFrancisco.Soma")),
    ("北京.海淀", ("北京", "北京.海淀")),
    ("a b.c", ("a b", "a b.c")),  # a space inside a segment is part of its name
    (None, ()),
    ("", ()),
])
def test_a_path_feeds_each_of_its_prefixes(value, groups):
    assert rollup.prefixes(value) == groups


@pytest.mark.parametrize(("value", "problem"), [
    (".A.B", "begins with the separator"),
    ("A.B.", "ends with the separator"),
    ("A..B", "segment 2 is empty"),
    (".", "begins with the separator"),
    ("A. B", "segment 2 (' B') has spaces"),
    ("A .B", "segment 1 ('A ') has spaces"),
    ("A.B\tC", "segment 2 holds a control character"),
    ("A\n", "segment 1 holds a control character"),
])
def test_an_invalid_path_is_an_error_naming_the_subtable(value, problem):
    with pytest.raises(rollup.RollupPathError) as info:
        rollup.prefixes(value, tag="location", table="d7")
    message = str(info.value)
    assert problem in message and "ROLLUP BY location" in message and "subtable d7" in message
    assert info.value.clause == "ROLLUP BY"


@pytest.mark.parametrize(("path", "leaf"), [("A.B.C", "C"), ("A", "A"), ("plant.line_2", "line_2")])
def test_rollup_tag_is_the_last_segment(path, leaf):
    assert rollup.leaf(path) == leaf


def test_a_group_covers_its_own_path_and_those_below_it():
    assert rollup.covers("A.B", "A.B") and rollup.covers("A.B", "A.B.C")
    assert not rollup.covers("A.B", "A.BC")  # a prefix of the text, not of the path
    assert not rollup.covers("A.B", "A") and not rollup.covers("A.B", None)


def test_table_counts_are_the_subtables_under_each_node():
    tables = [("t1", "A.B.C"), ("t2", "A.B.D"), ("t3", "A.E"), ("t4", None), ("t5", "")]
    assert rollup.table_counts(tables) == {"A": 3, "A.B": 2, "A.B.C": 1, "A.B.D": 1, "A.E": 1}


def test_expand_puts_each_row_in_each_of_its_groups():
    rows = pd.DataFrame({
        "ts": [10, 20, 30, 40, 50],
        "tbname": ["t1", "t2", "t3", "t1", "t4"],
        "location": ["A.B.C", "A.B.D", None, "A.B.C", "X"],
        "v": [1.0, 2.0, 3.0, 4.0, 5.0],
    })
    out = rollup.expand(rows, "location")
    # t3's NULL path makes no group; every other row once per prefix, in the order of the rows
    assert out.to_dict("list") == {
        "ts": [10, 10, 10, 20, 20, 20, 40, 40, 40, 50],
        "tbname": ["t1"] * 3 + ["t2"] * 3 + ["t1"] * 3 + ["t4"],
        "location": ["A", "A.B", "A.B.C", "A", "A.B", "A.B.D", "A", "A.B", "A.B.C", "X"],
        "v": [1.0] * 3 + [2.0] * 3 + [4.0] * 3 + [5.0],
    }
    # what each group then sums, by hand: A = 1 + 2 + 4, A.B the same, A.B.C = 1 + 4, A.B.D = 2, X = 5
    assert out.groupby("location")["v"].sum().to_dict() == {"A": 7.0, "A.B": 7.0, "A.B.C": 5.0, "A.B.D": 2.0,
                                                            "X": 5.0}


def test_expand_of_an_invalid_path_names_its_subtable():
    rows = pd.DataFrame({"ts": [1, 2], "tbname": ["good", "bad"], "location": ["A.B", "A..B"]})
    with pytest.raises(rollup.RollupPathError, match="'A..B' of subtable bad"):
        rollup.expand(rows, "location")


def test_expand_of_no_rows_is_no_rows():
    rows = pd.DataFrame({"ts": pd.Series([], dtype="int64"), "tbname": pd.Series([], dtype=object),
                         "location": pd.Series([], dtype=object)})
    assert rollup.expand(rows, "location").empty


def test_expand_arrow_matches_expand_row_for_row():
    import pyarrow as pa

    rows = pa.table({"ts": [10, 20, 30, 40, 50], "tbname": ["t1", "t2", "t3", "t1", "t4"],
                     "location": ["A.B.C", "A.B.D", None, "A.B.C", ""]})
    out = rollup.expand_arrow(rows, "location")
    # by hand: t1's rows in A, A.B, A.B.C; t2's in A, A.B, A.B.D; the NULL and the empty path in none
    assert out.to_pydict() == {
        "ts": [10, 10, 10, 20, 20, 20, 40, 40, 40],
        "tbname": ["t1"] * 3 + ["t2"] * 3 + ["t1"] * 3,
        "location": ["A", "A.B", "A.B.C", "A", "A.B", "A.B.D", "A", "A.B", "A.B.C"],
    }
    assert rollup.expand_arrow(rows.slice(0, 0), "location").num_rows == 0
    with pytest.raises(rollup.RollupPathError, match="'A. B' of subtable t9"):
        rollup.expand_arrow(pa.table({"tbname": ["t9"], "location": ["A. B"]}), "location")


def test_member_mask_is_covers_over_a_column():
    values = pd.Series(["A.B", "A.B.C", "A.BC", None, "A"])
    assert rollup.member_mask(values, "A.B").tolist() == [True, True, False, False, False]
    assert rollup.member_mask(values, None).tolist() == [False] * 5


def test_a_rollup_plan_groups_by_the_tag_and_the_spark_engine_refuses_it():
    from airflow_stream_provider.sql import parse
    from airflow_stream_provider.windows.spark_detector import spark_refusal
    from airflow_stream_provider.windows.trigger_plan import TriggerPlan

    (stmt,) = parse("CREATE STREAM s INTERVAL(1m) SLIDING(1m) FROM meters ROLLUP BY Location INTO o "
                    "AS SELECT _twstart, count(*) FROM %%trows")
    plan = TriggerPlan.build(stmt, "meters", path="/nowhere", columns=["ts", "v", "tbname", "location"],
                             ts_column="ts", row_key=("tbname", "ts"))
    assert plan.rollup and plan.keys == ("location",) and "tbname" in plan.columns
    assert "ROLLUP BY" in (spark_refusal(plan) or "")
