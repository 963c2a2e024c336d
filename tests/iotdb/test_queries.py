"""IoTDB queries over reference 004's sample data, each expected table from the reference's printed
results (the executions of cq1 to cq5 are these queries over their ranges) or worked out by hand
from the sample rows."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.warehouse import WarehouseError
from airflow_stream_provider.warehouse.series.store import SeriesStore
from tests.conftest import sql
from tests.iotdb.conftest import DEVICES, SAMPLE

CST = timezone(timedelta(hours=8))


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(CST)


def rows(result) -> list[tuple]:
    table = result.table
    out = []
    for row in table.to_pylist():
        values = []
        for name in table.column_names:
            value = row[name]
            values.append(value.astimezone(CST) if isinstance(value, datetime) else value)
        out.append(tuple(values))
    return out


def query(wh, text: str):
    (result,) = sql(wh, text)
    return result


def t(clock: str) -> datetime:
    return datetime.fromisoformat(f"2021-05-11T{clock}+08:00")


def test_raw_series_expand_in_creation_order(ln):
    result = query(ln, "SELECT temperature FROM root.ln.*.* WHERE time < 2021-05-11T22:18:20+08:00")
    assert result.table.column_names == ["Time", *[f"{d}.temperature" for d in DEVICES]]
    assert rows(result) == [(at(SAMPLE[0][0]), *SAMPLE[0][1:]), (at(SAMPLE[1][0]), *SAMPLE[1][1:])]


def test_group_by_windows_with_an_empty_one(ln):
    """cq2's execution at 22:18:40: [22:18:00, 22:18:40) in 10 s windows, the first empty (NULL)."""
    result = query(ln, "SELECT max_value(temperature) FROM root.ln.*.* "
                       "GROUP BY ([2021-05-11T22:18:00+08:00, 2021-05-11T22:18:40+08:00), 10s)")
    assert result.table.column_names == ["Time", *[f"max_value({d}.temperature)" for d in DEVICES]]
    assert rows(result) == [
        (t("22:18:00"), None, None, None, None),
        (t("22:18:10"), 121.0, 72.0, 183.0, 115.0),
        (t("22:18:20"), 122.0, 45.0, 59.0, 181.0),
        (t("22:18:30"), 182.0, 113.0, 52.0, 180.0),
    ]


def test_fill_with_a_constant(ln):
    """cq3's execution at 22:18:40: FILL(100.0) writes 100.0 into the empty window."""
    result = query(ln, "SELECT max_value(temperature) FROM root.ln.*.* "
                       "GROUP BY ([2021-05-11T22:18:00+08:00, 2021-05-11T22:18:20+08:00), 10s) FILL(100.0)")
    assert rows(result) == [(t("22:18:00"), 100.0, 100.0, 100.0, 100.0), (t("22:18:10"), 121.0, 72.0, 183.0, 115.0)]


def test_an_expression_aligned_by_device(ln):
    """cq5's execution at 22:18:40: temperature + 1 over [22:18:20, 22:18:40), a row per time and
    device, devices in creation order (the reference's 45.0 at 22:18:39.990 is a misprint: 42 + 1)."""
    result = query(ln, "SELECT temperature + 1 FROM root.ln.*.* WHERE time >= 2021-05-11T22:18:20+08:00 "
                       "AND time < 2021-05-11T22:18:40+08:00 ALIGN BY DEVICE")
    assert result.table.column_names == ["Time", "Device", "temperature + 1"]
    expected = []
    for i, device in enumerate(DEVICES):
        for row in SAMPLE[2:6]:
            expected.append((at(row[0]), device, row[i + 1] + 1))
    assert rows(result) == expected
    assert result.table.schema.field("temperature + 1").type == "double"  # arithmetic is DOUBLE, as in IoTDB


def test_aggregates_without_group_by_and_counts_of_empty_windows(ln):
    whole = query(ln, "SELECT count(temperature), avg(temperature), first_value(temperature), "
                      "last_value(temperature), extreme(temperature) FROM root.ln.wf02.wt02")
    values = [r[1] for r in SAMPLE]
    assert rows(whole) == [(9, sum(values) / 9, 121.0, 16.0, 182.0)]
    counts = query(ln, "SELECT count(temperature) FROM root.ln.wf01.wt01 "
                       "GROUP BY ([2021-05-11T22:17:50+08:00, 2021-05-11T22:18:10+08:00), 10s)")
    assert rows(counts) == [(t("22:17:50"), 0), (t("22:18:00"), 0)]


def test_group_by_level_merges_series(ln):
    """level = 2 keeps wf01/wf02: each count merges the two turbines of a farm."""
    result = query(ln, "SELECT count(temperature) FROM root.ln.** GROUP BY LEVEL = 2")
    assert result.table.column_names == ["count(root.*.wf02.*.temperature)", "count(root.*.wf01.*.temperature)"]
    assert rows(result) == [(18, 18)]


def test_sliding_windows_and_left_open_windows(ln):
    sliding = query(ln, "SELECT count(temperature) FROM root.ln.wf01.wt01 "
                        "GROUP BY ([2021-05-11T22:18:10+08:00, 2021-05-11T22:18:30+08:00), 20s, 10s)")
    # [10, 30) holds 14.598, 19.941, 24.949, 29.967; [20, 40) holds 24.949 .. 39.990 (but the range ends at 30)
    assert rows(sliding) == [(t("22:18:10"), 4), (t("22:18:20"), 2)]
    left_open = query(ln, "SELECT count(temperature) FROM root.ln.wf01.wt01 "
                          "GROUP BY ((2021-05-11T22:18:14.598+08:00, 2021-05-11T22:18:24.949+08:00], 5s)")
    # (14.598, 19.598] holds nothing, (19.598, 24.598] holds 19.941, (24.598, 24.949] holds 24.949;
    # each labelled by its end, the one the range cuts short by the range's end (the manual's 23:00 row)
    assert rows(left_open) == [(t("22:18:19.598"), 0), (t("22:18:24.598"), 1), (t("22:18:24.949"), 1)]


def test_fill_previous_and_linear(ln):
    sql(ln, "INSERT INTO root.ln.wf03.wt01(time, temperature) VALUES (2021-05-11T22:18:00+08:00, 10.0), "
            "(2021-05-11T22:18:30+08:00, 40.0)")
    base = ("SELECT max_value(temperature) FROM root.ln.wf03.wt01 "
            "GROUP BY ([2021-05-11T22:17:50+08:00, 2021-05-11T22:18:40+08:00), 10s)")
    assert [r[1] for r in rows(query(ln, base + " FILL(PREVIOUS)"))] == [None, 10.0, 10.0, 10.0, 40.0]
    assert [r[1] for r in rows(query(ln, base + " FILL(LINEAR)"))] == [None, 10.0, 20.0, 30.0, 40.0]


def test_limit_offset_slimit_and_descending_time(ln):
    result = query(ln, "SELECT temperature FROM root.ln.*.* ORDER BY TIME DESC LIMIT 2 OFFSET 1 SLIMIT 2 SOFFSET 1")
    assert result.table.column_names == ["Time", f"{DEVICES[1]}.temperature", f"{DEVICES[2]}.temperature"]
    assert rows(result) == [(at(SAMPLE[7][0]), SAMPLE[7][2], SAMPLE[7][3]), (at(SAMPLE[6][0]), SAMPLE[6][2],
                                                                            SAMPLE[6][3])]


def test_a_where_on_values_of_one_device(ln):
    result = query(ln, "SELECT temperature FROM root.ln.wf01.wt01 WHERE temperature > 150")
    assert [r[1] for r in rows(result)] == [181.0, 180.0, 193.0]
    with pytest.raises(WarehouseError, match="names one series"):
        query(ln, "SELECT temperature FROM root.ln.*.* WHERE temperature > 150")


def test_select_into_writes_series_that_query_back(ln):
    """cq1's first execution written by hand: its INTO list maps the columns in order."""
    into = ", ".join(f"{d}(temperature_max)" for d in DEVICES)
    result = query(ln, f"SELECT max_value(temperature) INTO {into} FROM root.ln.*.* "
                       "GROUP BY ([2021-05-11T22:18:20+08:00, 2021-05-11T22:18:40+08:00), 10s)")
    assert result.table.column_names == ["source column", "target timeseries", "written"]
    assert result.table["written"].to_pylist() == [2, 2, 2, 2]
    back = query(ln, "SELECT temperature_max FROM root.ln.*.*")
    assert rows(back) == [(t("22:18:20"), 122.0, 45.0, 59.0, 181.0), (t("22:18:30"), 182.0, 113.0, 52.0, 180.0)]
    series = query(ln, "SHOW TIMESERIES root.ln.wf02.wt02.*")
    assert series.table["timeseries"].to_pylist() == ["root.ln.wf02.wt02.temperature",
                                                      "root.ln.wf02.wt02.temperature_max"]
    assert series.table["dataType"].to_pylist() == ["FLOAT", "FLOAT"]


def test_into_with_placeholders_aligned_by_device(ln):
    result = query(ln, "SELECT temperature + 1 INTO root.precalculated_sg.::(temperature) FROM root.ln.*.* "
                       "WHERE time < 2021-05-11T22:18:20+08:00 ALIGN BY DEVICE")
    assert result.table["target timeseries"].to_pylist() == [
        f"root.precalculated_sg.{d[len('root.ln.'):]}.temperature" for d in DEVICES]
    back = query(ln, "SELECT temperature FROM root.precalculated_sg.*.* ALIGN BY DEVICE")
    assert rows(back)[:2] == [(at(SAMPLE[0][0]), "root.precalculated_sg.wf02.wt02", 122.0),
                              (at(SAMPLE[1][0]), "root.precalculated_sg.wf02.wt02", 1.0)]
    types = query(ln, "SHOW TIMESERIES root.precalculated_sg.**").table["dataType"].to_pylist()
    assert set(types) == {"DOUBLE"}  # the database was created for it, the series typed by the results


def test_into_counts_must_match(ln):
    with pytest.raises(WarehouseError, match="number of source columns .4. and the number of target paths .1."):
        query(ln, "SELECT temperature INTO root.bk.d(t) FROM root.ln.*.*")


def test_a_device_that_is_its_database(wh):
    """The trigger documentation's tablet example: root.sg is both the database and the device, b is
    created by the write (a number: DOUBLE); IoTDB 2.0.1 accepts the three statements and returns
    the row (tests/iotdb/test_differential.py asks it)."""
    sql(wh, "CREATE DATABASE root.sg; CREATE TIMESERIES root.sg.a WITH DATATYPE=INT32; "
            "INSERT INTO root.sg(time, a, b) VALUES (1, 1, 2.5)")
    result = query(wh, "SELECT a, b FROM root.sg")
    assert result.table.column_names == ["Time", "root.sg.a", "root.sg.b"]
    assert rows(result) == [(at("1970-01-01T00:00:00.001+00:00"), 1, 2.5)]
    assert query(wh, "SHOW DEVICES").table.column(0).to_pylist() == ["root.sg"]


def test_a_statement_breaking_the_node_rule_writes_nothing(wh):
    """Security review N7: the script is refused before its first statement runs."""
    with pytest.raises(StreamDefinitionError, match="line 2, col 21: INSERT: the node 'a\\\\x00b' contains"):
        sql(wh, "INSERT INTO root.ln.d(time, s1) VALUES (1, 1);\nINSERT INTO root.ln.`a\x00b`(time, s1) VALUES (1, 2)")
    assert query(wh, "SHOW DATABASES").table.num_rows == 0


def test_a_device_made_by_into_placeholders_keeps_the_length_rule(wh):
    """``::`` copies the source's nodes, so a target device can outgrow the 192 bytes of the
    devices table's tbname though each path of the statement is short enough: refused, nothing written."""
    source = "root.ln." + ".".join(["p" * 60] * 3)  # 190 bytes
    sql(wh, f"INSERT INTO {source}(time, s1) VALUES (1, 1)")
    with pytest.raises(WarehouseError, match="has at most 192 bytes"):
        sql(wh, f"SELECT s1 INTO root.`{'z' * 60}`.::(s1) FROM {source} ALIGN BY DEVICE")
    assert [d.path for d in SeriesStore(wh.catalog).databases()] == [m.SeriesPath(("root", "ln"))]
