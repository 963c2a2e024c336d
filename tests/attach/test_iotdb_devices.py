"""Attaching a Delta table as IoTDB devices (``CREATE DEVICES root.plant FROM DELTA ... MAP (...)``):
path queries, ALIGN BY DEVICE, SHOW DEVICES/TIMESERIES and a CQ over the attached devices give
the values worked by hand from the table's rows; the table is never written; bad input is refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from deltalake import DeltaTable

from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.streams.run import run
from airflow_stream_provider.streams.run_request import RunRequest
from airflow_stream_provider.streams.store import StreamStore
from airflow_stream_provider.warehouse import WarehouseError
from tests.conftest import sql

pytestmark = pytest.mark.spark

T0 = datetime(2025, 3, 1, tzinfo=UTC)
#: (second, device, site, voltage, current)
ROWS = [(0, "m1", "a", 220, 1.0), (5, "m2", "b", 230, 2.5), (10, "m1", "a", 222, 1.5),
        (12, "m2", "b", 228, 0.5), (25, "m1", "a", 218, 3.0)]
ATTACH = ("CREATE DEVICES root.plant FROM DELTA '{path}' "
          "MAP (TIME event_time, DEVICE device_id, MEASUREMENTS (voltage, amps = current))")


def make_table(spark, path, rows=ROWS, schema="event_time TIMESTAMP, device_id STRING, site STRING, voltage INT, "
               "current DOUBLE") -> None:
    spark.sql(f"CREATE TABLE delta.`{path}` ({schema}) USING delta")
    values = ", ".join(f"(TIMESTAMP '{(T0 + timedelta(seconds=s)).strftime('%Y-%m-%d %H:%M:%S')}', '{d}', '{site}', "
                       f"{v}, {c})" for s, d, site, v, c in rows)
    spark.sql(f"INSERT INTO delta.`{path}` VALUES {values}")


@pytest.fixture
def plant(wh, spark, tmp_path):
    path = tmp_path / "owner" / "readings"
    make_table(spark, path)
    (result,) = sql(wh, ATTACH.format(path=path))
    assert "2 devices under root.plant" in result.message and "read-only" in result.message
    return wh, path


def rows_of(wh, text: str) -> list[tuple]:
    (result,) = sql(wh, text)
    return [tuple(row.values()) for row in result.table.to_pylist()]


def at(second: int) -> datetime:
    return T0 + timedelta(seconds=second)


def test_show_devices_and_timeseries_list_the_attached_ones(plant):
    wh, _ = plant
    assert rows_of(wh, "SHOW DEVICES root.plant.**") == [("root.plant.m1", "true"), ("root.plant.m2", "true")]
    series = [(r[0], r[2], r[3]) for r in rows_of(wh, "SHOW TIMESERIES root.plant.**")]
    assert series == [("root.plant.m1.voltage", "root.plant", "INT32"), ("root.plant.m1.amps", "root.plant", "DOUBLE"),
                      ("root.plant.m2.voltage", "root.plant", "INT32"), ("root.plant.m2.amps", "root.plant", "DOUBLE")]
    assert [r[0] for r in rows_of(wh, "SHOW DATABASES")] == ["root.plant"]


def test_a_path_query_reads_the_rows_of_each_device(plant):
    wh, _ = plant
    got = rows_of(wh, "SELECT voltage FROM root.plant.*")
    assert [tuple(v.astimezone(UTC) if isinstance(v, datetime) else v for v in r) for r in got] == [
        (at(0), 220, None), (at(5), None, 230), (at(10), 222, None), (at(12), None, 228), (at(25), 218, None)]


def test_group_by_and_align_by_device_equal_the_hand_computed_values(plant):
    wh, _ = plant
    # windows of 10 s from T0: m1 {0: 220}, {10: 222}, {20: 218}; m2 {5: 230}, {12: 228}
    got = rows_of(wh, f"SELECT max_value(voltage), sum(amps) FROM root.plant.** "
                      f"GROUP BY ([{int(T0.timestamp() * 1000)}, {int(at(30).timestamp() * 1000)}), 10s) "
                      "ALIGN BY DEVICE")
    assert [(t.astimezone(UTC), d, v, a) for t, d, v, a in got] == [
        (at(0), "root.plant.m1", 220, 1.0), (at(10), "root.plant.m1", 222, 1.5), (at(20), "root.plant.m1", 218, 3.0),
        (at(0), "root.plant.m2", 230, 2.5), (at(10), "root.plant.m2", 228, 0.5), (at(20), "root.plant.m2", None, None)]
    (count,) = rows_of(wh, "SELECT count(voltage) FROM root.plant.m2")
    assert count == (2,)


def test_rows_the_owner_adds_are_seen_and_the_table_is_never_written(plant, spark):
    wh, path = plant
    version = DeltaTable(str(path)).version()
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (TIMESTAMP '2025-03-01 00:00:30', 'm3', 'c', 240, 4.0)")
    assert [r[0] for r in rows_of(wh, "SHOW DEVICES")] == ["root.plant.m1", "root.plant.m2", "root.plant.m3"]
    for text in ("INSERT INTO root.plant.m1(time, voltage) VALUES (1, 5)", "DELETE FROM root.plant.m1.voltage",
                 "DROP TIMESERIES root.plant.m1.voltage", "CREATE TIMESERIES root.plant.m1.x WITH DATATYPE=INT32"):
        with pytest.raises(WarehouseError, match="attached from the Delta table .* read-only"):
            sql(wh, text)
    with pytest.raises(StreamDefinitionError, match=r"line 1, col 19: BEFORE INSERT: .* root\.plant\.\*\*, which "
                                                    r"reaches root\.plant, attached .* cannot be refused"):
        sql(wh, "CREATE TRIGGER t1 BEFORE INSERT ON root.plant.** AS 'tests.iotdb.triggers.Counter'")
    assert DeltaTable(str(path)).version() == version + 1  # the owner's INSERT only
    (result,) = sql(wh, "DELETE DATABASE root.plant")
    assert "detached" in result.message and str(path) in result.message
    assert DeltaTable(str(path)).to_pyarrow_table().num_rows == len(ROWS) + 1
    assert rows_of(wh, "SHOW DATABASES") == []


def test_a_cq_over_the_attached_devices_writes_the_hand_computed_maxima(plant):
    wh, _ = plant
    created = at(0) - timedelta(seconds=1)
    sql(wh, "CREATE DATABASE root.out")
    sql(wh, f"""CREATE CQ plant_max RESAMPLE EVERY 10s BOUNDARY {int(at(10).timestamp() * 1000)} BEGIN
              SELECT max_value(voltage) INTO root.out.m1(voltage_max), root.out.m2(voltage_max)
              FROM root.plant.* GROUP BY(10s) END""")
    with StreamStore().updating("root", "plant_max") as saving:
        saving.state = saving.state.replace(created=created)
    report = run(wh, "root", "plant_max", RunRequest(now=at(30)))
    assert report.triggers == 3  # 10 s, 20 s, 30 s, each over the 10 s before
    got = rows_of(wh, "SELECT voltage_max FROM root.out.** ALIGN BY DEVICE")
    assert [(t.astimezone(UTC), d, v) for t, d, v in got] == [
        (at(0), "root.out.m1", 220), (at(10), "root.out.m1", 222), (at(20), "root.out.m1", 218),
        (at(0), "root.out.m2", 230), (at(10), "root.out.m2", 228)]


def test_bad_input_is_refused_clearly(wh, spark, tmp_path):
    path = tmp_path / "owner" / "readings"
    make_table(spark, path)
    with pytest.raises(WarehouseError, match=r"MAP DEVICE names column dev_id, which .* does not have"):
        sql(wh, f"CREATE DEVICES root.plant FROM DELTA '{path}' MAP (TIME event_time, DEVICE dev_id, "
                "MEASUREMENTS (voltage))")
    with pytest.raises(WarehouseError, match=r"MAP TIME voltage is integer; the timestamp column must be"):
        sql(wh, f"CREATE DEVICES root.plant FROM DELTA '{path}' MAP (TIME voltage, DEVICE device_id, "
                "MEASUREMENTS (current))")
    with pytest.raises(WarehouseError, match=r"MAP DEVICE voltage is integer; the device column must be a string"):
        sql(wh, f"CREATE DEVICES root.plant FROM DELTA '{path}' MAP (TIME event_time, DEVICE voltage, "
                "MEASUREMENTS (current))")
    with pytest.raises(StreamDefinitionError, match=r"line 1, col \d+: .*MAP needs MEASUREMENTS"):
        sql(wh, f"CREATE DEVICES root.plant FROM DELTA '{path}' MAP (TIME event_time, DEVICE device_id)")
    sql(wh, "CREATE DATABASE root.plant")
    with pytest.raises(WarehouseError, match="root.plant has already been created as database"):
        sql(wh, ATTACH.format(path=path))
    with pytest.raises(WarehouseError, match="is under the database root.plant"):
        sql(wh, ATTACH.format(path=path).replace("root.plant", "root.plant.east"))
    with pytest.raises(WarehouseError, match="is not a Delta table"):
        sql(wh, ATTACH.format(path=tmp_path / "nothing").replace("root.plant", "root.other"))


def test_a_device_value_that_is_no_path_node_fails_the_read_naming_it(wh, spark, tmp_path):
    path = tmp_path / "owner" / "readings"
    make_table(spark, path, rows=[(0, "m1", "a", 1, 1.0), (1, "bad.node", "a", 2, 2.0)])
    with pytest.raises(WarehouseError, match=r"DEVICE column device_id holds 'bad\.node', which is not a device node"):
        sql(wh, ATTACH.format(path=path))
    assert rows_of(wh, "SHOW DATABASES") == []  # nothing recorded
    spark.sql(f"DELETE FROM delta.`{path}` WHERE device_id = 'bad.node'")
    sql(wh, ATTACH.format(path=path))
    assert rows_of(wh, "SELECT count(voltage) FROM root.plant.m1") == [(1,)]
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (TIMESTAMP '2025-03-01 00:00:09', 'no node', 'a', 3, 3.0)")
    with pytest.raises(WarehouseError, match=r"holds 'no node', which is not a device node"):
        sql(wh, "SELECT voltage FROM root.plant.*")


def test_a_timestamp_ntz_table_beside_a_database_of_our_own(wh, spark, tmp_path):
    path = tmp_path / "owner" / "ntz"
    make_table(spark, path, rows=ROWS[:2], schema="event_time TIMESTAMP_NTZ, device_id STRING, site STRING, "
               "voltage INT, current DOUBLE")
    sql(wh, ATTACH.format(path=path))
    sql(wh, "INSERT INTO root.ln.d1(time, voltage) VALUES (1740787200000, 7)")  # T0, in ms
    got = rows_of(wh, "SELECT voltage FROM root.** ALIGN BY DEVICE")
    assert [(t.astimezone(UTC), d, v) for t, d, v in got] == [
        (at(0), "root.ln.d1", 7), (at(0), "root.plant.m1", 220), (at(5), "root.plant.m2", 230)]
