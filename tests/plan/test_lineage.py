"""A stream's lineage from its definition, as a table of cases worked by hand: the tables it reads
(the trigger table, %%trows and %%tbname being it, and every table of the query), the table it
writes, and each output column's input columns by position."""

from __future__ import annotations

import pytest

from airflow_stream_provider.plan.lineage import TableRef, lineage_of
from airflow_stream_provider.sql import parse

M, L, T1 = TableRef("power", "meters"), TableRef("power", "limits"), TableRef("d", "t1")

CASES = [
    ("CREATE STREAM power.s INTERVAL(10s) SLIDING(10s) FROM meters PARTITION BY tbname INTO s_out "
     "AS SELECT _twstart ts, avg(current) c, max(voltage) + 1 v FROM %%trows",
     (M,), TableRef("power", "s_out"), {"ts": {(M, "ts")}, "c": {(M, "current")}, "v": {(M, "voltage")}}),
    # a subquery's columns come from its own FROM; count(*) names no column
    ("CREATE STREAM power.s INTERVAL(10s) SLIDING(10s) FROM meters INTO other.o AS SELECT _twstart ts, "
     "count(*) n, (SELECT max(v_max) FROM limits) lim FROM %%trows",
     (M, L), TableRef("other", "o"), {"ts": {(M, "ts")}, "n": set(), "lim": {(L, "v_max")}}),
    # a PERIOD stream reads the table its query names
    ("CREATE STREAM d.p PERIOD(30s) INTO p_out AS SELECT cast(_tlocaltime / 1000000 AS timestamp) ts, "
     "sum(col1) total FROM t1", (T1,), TableRef("d", "p_out"), {"ts": set(), "total": {(T1, "col1")}}),
]


@pytest.mark.parametrize(("text", "inputs", "output", "columns"), CASES)
def test_lineage_of_a_stream(text, inputs, output, columns):
    (stmt,) = parse(text)
    db = stmt.name.db
    lineage = lineage_of(stmt, db, ts_column="ts")
    assert lineage.inputs == inputs and lineage.output == output
    assert {c.column: set(c.sources) for c in lineage.columns} == columns
    assert output.namespace == f"airflow-stream://{output.db}"


def test_the_result_schema_names_the_output_columns_by_position():
    (stmt,) = parse("CREATE STREAM power.s INTERVAL(10s) SLIDING(10s) FROM meters INTO s_out "
                    "AS SELECT _twstart, avg(current) FROM %%trows")
    lineage = lineage_of(stmt, "power", output_columns=["_twstart", "avg_current"], ts_column="ts")
    assert [(c.column, c.sources) for c in lineage.columns] == [("_twstart", ((M, "ts"),)),
                                                                ("avg_current", ((M, "current"),))]
