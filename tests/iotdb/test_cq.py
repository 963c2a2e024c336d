"""Continuous queries: reference 004's cq1 to cq5 and s1_count_cq executed over the sample data,
each final table as the reference prints it; IoTDB's IoTDBCQIT (SHOW, DROP, the wrong
definitions) and IoTDBCQExecIT (boundary, default RANGE and EVERY, FILL, end offset, a CQ without
GROUP BY) re-expressed with a clock the test sets instead of sleeping."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.streams.run import run
from airflow_stream_provider.streams.run_request import RunRequest
from airflow_stream_provider.streams.store import StreamStore
from airflow_stream_provider.warehouse import WarehouseError
from tests.conftest import sql
from tests.iotdb.conftest import DEVICES, SAMPLE

CST = timezone(timedelta(hours=8))
INTO = ", ".join(f"{d}(temperature_max)" for d in DEVICES)


def t(clock: str) -> datetime:
    return datetime.fromisoformat(f"2021-05-11T{clock}+08:00")


def created_at(cq_id: str, at: datetime) -> None:
    """The CQ as if created at ``at`` (its first instant depends on when it was created)."""
    with StreamStore().updating("root", cq_id.lower()) as saving:
        saving.state = saving.state.replace(created=at)


def table(wh, text: str) -> list[tuple]:
    (result,) = sql(wh, text)
    out = []
    for row in result.table.to_pylist():
        out.append(tuple(v.astimezone(CST) if isinstance(v, datetime) else v for v in row.values()))
    return out


def create(wh, text: str, cq_id: str, created: datetime) -> None:
    sql(wh, text)
    created_at(cq_id, created)


def test_cq1_executes_every_20s_over_the_last_20s(ln):
    create(ln, f"""CREATE CONTINUOUS QUERY cq1
RESAMPLE EVERY 20s
BEGIN
SELECT max_value(temperature)
  INTO {INTO}
  FROM root.ln.*.*
  GROUP BY(10s)
END""", "cq1", t("22:18:30"))
    report = run(ln, "root", "cq1", RunRequest(now=t("22:19:00")))
    assert report.triggers == 2  # 22:18:40 and 22:19:00
    assert table(ln, "SELECT temperature_max FROM root.ln.*.*") == [
        (t("22:18:20"), 122.0, 45.0, 59.0, 181.0),
        (t("22:18:30"), 182.0, 113.0, 52.0, 180.0),
        (t("22:18:40"), 137.0, 172.0, 135.0, 193.0),
        (t("22:18:50"), 16.0, 124.0, 183.0, 18.0),
    ]
    assert run(ln, "root", "cq1", RunRequest(now=t("22:19:10"))).triggers == 0  # nothing due until 22:19:20


def test_cq2_overlapping_ranges_rewrite_rows_and_all_null_rows_are_not_written(ln):
    create(ln, f"""CREATE CONTINUOUS QUERY cq2
RESAMPLE RANGE 40s
BEGIN
  SELECT max_value(temperature)
  INTO {INTO}
  FROM root.ln.*.*
  GROUP BY(10s)
END""", "cq2", t("22:18:35"))
    report = run(ln, "root", "cq2", RunRequest(now=t("22:19:00")))
    assert report.triggers == 3  # EVERY defaults to the GROUP BY interval: 22:18:40, 22:18:50, 22:19:00
    assert table(ln, "SELECT temperature_max FROM root.ln.*.*") == [
        (t("22:18:10"), 121.0, 72.0, 183.0, 115.0),
        (t("22:18:20"), 122.0, 45.0, 59.0, 181.0),
        (t("22:18:30"), 182.0, 113.0, 52.0, 180.0),
        (t("22:18:40"), 137.0, 172.0, 135.0, 193.0),
        (t("22:18:50"), 16.0, 124.0, 183.0, 18.0),
    ]


CQ3_TABLE = [
    (t("22:18:00"), 100.0, 100.0, 100.0, 100.0),
    (t("22:18:10"), 121.0, 72.0, 183.0, 115.0),
    (t("22:18:20"), 122.0, 45.0, 59.0, 181.0),
    (t("22:18:30"), 182.0, 113.0, 52.0, 180.0),
]


def test_cq3_fill_writes_the_empty_window(ln):
    create(ln, f"""CREATE CONTINUOUS QUERY cq3
RESAMPLE EVERY 20s RANGE 40s
BEGIN
  SELECT max_value(temperature)
  INTO {INTO}
  FROM root.ln.*.*
  GROUP BY(10s)
  FILL(100.0)
END""", "cq3", t("22:18:30"))
    run(ln, "root", "cq3", RunRequest(now=t("22:19:00")))
    assert table(ln, "SELECT temperature_max FROM root.ln.*.*") == [
        *CQ3_TABLE, (t("22:18:40"), 137.0, 172.0, 135.0, 193.0), (t("22:18:50"), 16.0, 124.0, 183.0, 18.0)]


def test_cq4_an_end_offset_computes_each_window_once_after_a_delay(ln):
    create(ln, f"""CREATE CONTINUOUS QUERY cq4
RESAMPLE EVERY 20s RANGE 40s, 20s
BEGIN
  SELECT max_value(temperature)
  INTO {INTO}
  FROM root.ln.*.*
  GROUP BY(10s)
  FILL(100.0)
END""", "cq4", t("22:18:30"))
    run(ln, "root", "cq4", RunRequest(now=t("22:19:00")))
    assert table(ln, "SELECT temperature_max FROM root.ln.*.*") == CQ3_TABLE


def test_cq5_without_group_by_writes_each_row_into_its_own_device(ln):
    create(ln, """CREATE CONTINUOUS QUERY cq5
RESAMPLE EVERY 20s
BEGIN
  SELECT temperature + 1
  INTO root.precalculated_sg.::(temperature)
  FROM root.ln.*.*
  align by device
END""", "cq5", t("22:18:30"))
    run(ln, "root", "cq5", RunRequest(now=t("22:19:00")))
    expected = []
    for i, device in enumerate(DEVICES):
        target = "root.precalculated_sg." + device[len("root.ln."):]
        expected += [(datetime.fromisoformat(row[0]), target, row[i + 1] + 1) for row in SAMPLE[2:]]
    assert table(ln, "SELECT temperature FROM root.precalculated_sg.*.* ALIGN BY DEVICE") == expected
    assert (t("22:18:39.990"), "root.precalculated_sg.wf02.wt02", 43.0) in expected  # the reference's misprint


def test_a_cq_as_a_sub_query(wh):
    """Reference 004's s1_count_cq: count(s1) per 30 minutes into root.sg_count.d, then its average."""
    sql(wh, "INSERT INTO root.sg.d(time, s1) VALUES (2024-01-01T00:05:00Z, 1), (2024-01-01T00:10:00Z, 2), "
            "(2024-01-01T00:40:00Z, 3), (2024-01-01T01:20:00Z, 4), (2024-01-01T01:25:00Z, 5), "
            "(2024-01-01T01:29:00Z, 6)")
    create(wh, """CREATE CQ s1_count_cq
BEGIN
    SELECT count(s1)
        INTO root.sg_count.d(count_s1)
        FROM root.sg.d
        GROUP BY(30m)
END""", "s1_count_cq", datetime.fromisoformat("2024-01-01T00:00:01+00:00"))  # first instant: 00:30
    run(wh, "root", "s1_count_cq", RunRequest(now=datetime.fromisoformat("2024-01-01T01:30:00+00:00")))
    counts = table(wh, "SELECT count_s1 FROM root.sg_count.d")
    assert [c for _, c in counts] == [2, 1, 3]  # [0:00, 0:30), [0:30, 1:00), [1:00, 1:30)
    assert table(wh, "SELECT avg(count_s1) FROM root.sg_count.d") == [(2.0,)]


# --- IoTDBCQExecIT -------------------------------------------------------------------------------

T = datetime(2024, 6, 1, 12, 0, 10, tzinfo=UTC)  # the BOUNDARY: the first execution
S = T - timedelta(seconds=3)


def exec_it(wh, device: str, cq: str, cq_id: str, *, until: timedelta = timedelta(seconds=5)) -> None:
    """The common setup: ten points every 500 ms from S = T - 3 s (values 1 to 10), the CQ created
    10 s before its BOUNDARY T, then run with the clock at T + 5 s."""
    sql(wh, f"CREATE TIMESERIES root.sg.{device}.s1 WITH DATATYPE=INT64")
    rows = ", ".join(f"({int((S + timedelta(milliseconds=500 * i)).timestamp() * 1000)}, {i + 1})" for i in range(10))
    sql(wh, f"INSERT INTO root.sg.{device}(time, s1) VALUES {rows}")
    boundary = int(T.timestamp() * 1000)
    create(wh, cq.replace("<T>", str(boundary)), cq_id, T - timedelta(seconds=10))
    run(wh, "root", cq_id, RunRequest(now=T + until))


def points(wh, text: str) -> list[tuple[timedelta, object]]:
    return [(at - S.astimezone(CST), value) for at, value in table(wh, text)]


def ms(n: int) -> timedelta:
    return timedelta(milliseconds=n)


def test_exec1_range_defaults_to_every(wh):
    sql(wh, "CREATE TIMESERIES root.sg.d1.s1_max WITH DATATYPE=INT64")
    exec_it(wh, "d1", "CREATE CONTINUOUS QUERY cq1\nRESAMPLE EVERY 2s\nBOUNDARY <T>\nBEGIN \n  SELECT max_value(s1) \n"
                      "  INTO root.sg.d1(s1_max)\n  FROM root.sg.d1\n  GROUP BY(1s) \nEND", "cq1")
    assert points(wh, "SELECT s1_max FROM root.sg.d1") == [(ms(1000), 4), (ms(2000), 6), (ms(3000), 8), (ms(4000), 10)]


def test_exec2_every_defaults_to_the_group_by_interval(wh):
    sql(wh, "CREATE TIMESERIES root.sg.d2.s1_max WITH DATATYPE=INT64")
    exec_it(wh, "d2", "CREATE CONTINUOUS QUERY cq2\nRESAMPLE \nBOUNDARY <T>\nRANGE 4s \nBEGIN \n"
                      "  SELECT max_value(s1) \n  INTO root.sg.d2(s1_max)\n  FROM root.sg.d2\n  GROUP BY(1s) \nEND",
            "cq2")
    assert points(wh, "SELECT s1_max FROM root.sg.d2") == [(ms(0), 2), (ms(1000), 4), (ms(2000), 6), (ms(3000), 8),
                                                           (ms(4000), 10)]


def test_exec3_fill_in_each_range(wh):
    sql(wh, "CREATE TIMESERIES root.sg.d3.s1_max WITH DATATYPE=INT64")
    exec_it(wh, "d3", "CREATE CONTINUOUS QUERY cq3\nRESAMPLE EVERY 2s\nBOUNDARY <T>\nRANGE 4s\nBEGIN \n"
                      "  SELECT max_value(s1) \n  INTO root.sg.d3(s1_max)\n  FROM root.sg.d3\n"
                      "  GROUP BY(1s) \n  FILL(100)\nEND", "cq3")
    low, high = int((S - ms(1000)).timestamp() * 1000), int((S + ms(4000)).timestamp() * 1000)
    assert points(wh, f"SELECT s1_max FROM root.sg.d3 WHERE time >= {low} AND time <= {high}") == [
        (ms(-1000), 100), (ms(0), 2), (ms(1000), 4), (ms(2000), 6), (ms(3000), 8), (ms(4000), 10)]


def test_exec4_an_end_offset_leaves_gaps(wh):
    sql(wh, "CREATE TIMESERIES root.sg.d4.s1_max WITH DATATYPE=INT64")
    exec_it(wh, "d4", "CREATE CONTINUOUS QUERY cq4\nRESAMPLE EVERY 2s\nBOUNDARY <T>\nRANGE 2s, 1s\nBEGIN \n  SELECT "
                      "max_value(s1) \n  INTO root.sg.d4(s1_max)\n  FROM root.sg.d4\n  GROUP BY(1s) \nEND", "cq4")
    assert points(wh, "SELECT s1_max FROM root.sg.d4") == [(ms(1000), 4), (ms(3000), 8)]


def test_exec5_an_expression_into_a_double_series(wh):
    sql(wh, "CREATE TIMESERIES root.sg.d5.precalculated_s1 WITH DATATYPE=DOUBLE")
    exec_it(wh, "d5", "CREATE CONTINUOUS QUERY cq5\nRESAMPLE EVERY 2s\nBOUNDARY <T>\nRANGE 4s\nBEGIN \n"
                      "  SELECT s1 + 1 \n  INTO root.sg.d5(precalculated_s1)\n  FROM root.sg.d5\n"
                      "  align by device\nEND", "cq5")
    assert points(wh, "SELECT precalculated_s1 FROM root.sg.d5") == [(ms(500 * i), float(i + 2)) for i in range(10)]


def test_exec5_an_execution_over_a_range_without_rows_writes_nothing_and_goes_on(wh):
    """IoTDBCQExecIT.testCQExecution5 keeps its CQ running while it waits: the clock at T + 7 s also
    runs the instant T + 6 s, whose range [T + 2 s, T + 6 s) is after the last point (T + 1.5 s)."""
    sql(wh, "CREATE TIMESERIES root.sg.d5.precalculated_s1 WITH DATATYPE=DOUBLE")
    exec_it(wh, "d5", "CREATE CONTINUOUS QUERY cq5\nRESAMPLE EVERY 2s\nBOUNDARY <T>\nRANGE 4s\nBEGIN \n"
                      "  SELECT s1 + 1 \n  INTO root.sg.d5(precalculated_s1)\n  FROM root.sg.d5\n"
                      "  align by device\nEND", "cq5", until=timedelta(seconds=7))
    assert points(wh, "SELECT precalculated_s1 FROM root.sg.d5") == [(ms(500 * i), float(i + 2)) for i in range(10)]
    assert StreamStore().load_state("root", "cq5").last_fired == T + timedelta(seconds=6)


# --- IoTDBCQIT -----------------------------------------------------------------------------------

SHOWN = [
    "CREATE CQ show_cq_1 \nRESAMPLE \n  EVERY 30m\n  BOUNDARY 0\n  RANGE 30m, 10m\nTIMEOUT POLICY BLOCKED\nBEGIN \n"
    "  SELECT count(s1)  \n    INTO root.sg_count.d(count_s1)\n    FROM root.sg.d\n    GROUP BY(30m)\nEND",
    "CREATE CQ show_cq_2\nBEGIN \n  SELECT count(s1)  \n    INTO root.sg_count.d(count_s1)\n    FROM root.sg.d\n"
    "    GROUP BY(30m)\nEND",
    "CREATE CQ show_cq_3\nRESAMPLE RANGE 30m, 0m\nTIMEOUT POLICY DISCARD\nBEGIN \n  SELECT count(s1)  \n"
    "    INTO root.sg_count.d(count_s1)\n    FROM root.sg.d\n    GROUP BY(10m)\nEND",
    "CREATE CQ show_cq_4\nRESAMPLE EVERY 30m \nTIMEOUT POLICY DISCARD\nBEGIN \n  SELECT count(s1)  \n"
    "    INTO root.sg_count.d(count_s1)\n    FROM root.sg.d\n    GROUP BY(10m)\nEND",
]


def test_show_cqs_lists_each_as_written_and_drop_removes_only_it(wh):
    for text in reversed(SHOWN):
        sql(wh, text)
    assert table(wh, "SHOW CQS") == [(f"show_cq_{i}", SHOWN[i - 1], "ACTIVE") for i in range(1, 5)]
    sql(wh, "DROP CQ show_cq_2; DROP CONTINUOUS QUERY show_cq_3")
    assert [r[0] for r in table(wh, "SHOW CONTINUOUS QUERIES")] == ["show_cq_1", "show_cq_4"]
    sql(wh, "DROP CQ show_cq_1; DROP CQ show_cq_4")
    assert table(wh, "SHOW CQS") == []


def test_a_duplicate_or_unknown_cq_is_a_clear_error(wh):
    sql(wh, SHOWN[1])
    with pytest.raises(WarehouseError, match="CQ show_cq_2 has already been created"):
        sql(wh, SHOWN[1])
    with pytest.raises(WarehouseError, match="CQ nothing doesn't exist"):
        sql(wh, "DROP CQ nothing")


def test_cqs_are_streams_in_show_streams_with_their_next_instant(ln):
    create(ln, f"CREATE CQ cq1 RESAMPLE EVERY 20s BEGIN SELECT max_value(temperature) INTO {INTO} FROM root.ln.*.* "
               "GROUP BY(10s) END", "cq1", t("22:18:30"))
    run(ln, "root", "cq1", RunRequest(now=t("22:18:45")))
    (row,) = [r for r in sql(ln, "SHOW STREAMS")[0].table.to_pylist() if r["stream_name"] == "cq1"]
    assert (row["db_name"], row["language"], row["status"]) == ("root", "IoTDB (continuous query)", "running")
    assert row["progress"] == t("22:18:40") and row["next_instant"] == t("22:19:00")


def discard_cq(wh, created: datetime) -> None:
    create(wh, f"CREATE CQ cqd RESAMPLE EVERY 10s TIMEOUT POLICY DISCARD BEGIN SELECT max_value(temperature) "
               f"INTO {INTO} FROM root.ln.*.* GROUP BY(10s) END", "cqd", created)


def test_discard_executes_the_pending_instant_then_jumps_to_the_first_at_or_after_now(ln):
    """C13/C14 (IoTDB's ``CQScheduleTask.updateExecutionTime``): the pending instant 22:18:20 runs,
    then the next is ``exec + ((now - exec - 1) / every + 1) * every`` = 22:19:10, the first at or
    after 22:19:05; 22:18:30 to 22:19:00 are discarded. The run at 22:19:10 executes 22:19:10."""
    discard_cq(ln, t("22:18:20"))
    report = run(ln, "root", "cqd", RunRequest(now=t("22:19:05")))
    assert (report.triggers, report.discarded_instants) == (1, 4)
    window_1810 = (t("22:18:10"), *SAMPLE[0][1:])  # [22:18:10, 22:18:20) holds the row of 22:18:14.598
    assert table(ln, "SELECT temperature_max FROM root.ln.*.*") == [window_1810]
    (row,) = [r for r in sql(ln, "SHOW STREAMS")[0].table.to_pylist() if r["stream_name"] == "cqd"]
    assert row["progress"] == t("22:18:20") and row["next_instant"] == t("22:19:10")
    report = run(ln, "root", "cqd", RunRequest(now=t("22:19:10")))
    assert (report.triggers, report.discarded_instants) == (1, 0)  # [22:19:00, 22:19:10): no rows
    assert table(ln, "SELECT temperature_max FROM root.ln.*.*") == [window_1810]


def test_discard_executes_the_instant_it_jumps_to_when_that_is_now(ln):
    """The jump from 22:18:20 with the clock at 22:19:00 lands on 22:19:00 itself, due at once."""
    discard_cq(ln, t("22:18:20"))
    report = run(ln, "root", "cqd", RunRequest(now=t("22:19:00")))
    assert (report.triggers, report.discarded_instants) == (2, 3)  # 22:18:30, 22:18:40, 22:18:50 discarded
    assert table(ln, "SELECT temperature_max FROM root.ln.*.*") == [
        (t("22:18:10"), *SAMPLE[0][1:]),
        (t("22:18:50"), *SAMPLE[8][1:]),  # [22:18:50, 22:19:00) holds the row of 22:18:55.003
    ]


def test_run_takes_a_bare_cq_id(wh, capsys):
    """A CQ id is global in IoTDB: ``airflow-stream run cq1 --until-idle`` runs it, as ``root.cq1`` does.
    EVERY 1h from an hour boundary an hour ago: the instants then and now are due; the second's
    range, the last hour, holds the one point (5 at 30 minutes past)."""
    from airflow_stream_provider import cli

    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    point = int((hour + timedelta(minutes=30)).timestamp() * 1000)
    sql(wh, f"INSERT INTO root.sg.d(time, s1) VALUES ({point}, 5)")
    create(wh, "CREATE CQ hourly RESAMPLE EVERY 1h BEGIN SELECT max_value(s1) INTO root.sg.d(s1_max) FROM root.sg.d "
               "GROUP BY(1h) END", "hourly", hour)
    assert cli.main(["run", "hourly", "--until-idle"]) == 0
    assert "2 triggers" in capsys.readouterr().out
    assert [(at.astimezone(UTC), v) for at, v in table(wh, "SELECT s1_max FROM root.sg.d")] == [(hour, 5.0)]
    assert cli.main(["run", "nothing", "--until-idle"]) == 2
    assert "name the stream's database" in capsys.readouterr().err


@pytest.mark.parametrize("text", ["CREATE DATABASE `root`", "CREATE DATABASE IF NOT EXISTS `Root` PRECISION 'us'"])
def test_a_tdengine_database_named_root_is_refused(wh, text):
    """Security review N6: continuous queries are the streams of the namespace root (root.<cq_id> in
    SHOW STREAMS, STOP/START STREAM, their DAGs), so no TDengine database may take the name and
    have its streams share their state; a statement on root.<name> can only mean a CQ."""
    sql(wh, SHOWN[1])
    with pytest.raises(StreamDefinitionError, match="reserved") as err:
        sql(wh, text)
    assert (err.value.line, err.value.column) == (1, text.index("`") + 1)
    assert "root" not in wh.catalog.databases()
    assert [r[0] for r in table(wh, "SHOW CQS")] == ["show_cq_2"]


def test_an_iotdb_database_root_root_is_kept_out_of_the_namespace(wh):
    sql(wh, "CREATE DATABASE root.root")
    assert "root" not in wh.catalog.databases()
    assert [r[0] for r in table(wh, "SHOW DATABASES")] == ["root.root"]
