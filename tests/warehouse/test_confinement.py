"""Table and database names never lead the catalog out of the warehouse .

A name such as ``../../../homec/warehouse/power/reg`` would otherwise write into, or drop, a sibling home's
table and database. The parser refuses those names now; these
tests hand them to the warehouse as statements built directly (as another front-end, a stored
file or a data value could) and to ``load``, and check that the sibling home is untouched. No
Spark: tables, INSERT and DROP run on delta-rs.
"""

from __future__ import annotations

import dataclasses

import pytest

from airflow_stream_provider import model as m
from airflow_stream_provider import statements
from airflow_stream_provider.exceptions import StreamError
from airflow_stream_provider.sql import parse
from airflow_stream_provider.warehouse import Warehouse, WarehouseError
from airflow_stream_provider.warehouse.catalog import TableInfo
from airflow_stream_provider.warehouse.load import load

CLIMB = "../../../homec/warehouse/power/reg"
BAD_TABLES = [CLIMB, "..", "", "a/b", "a\\b", "a\x00b", "a\x1fb", ".subtables", "t" * 193]
BAD_DBS = ["../../homec/warehouse/power", "..", ".", "a/b", "a\x00", "d" * 65]


def no_spark():
    raise AssertionError("these statements need no Spark")


def run(wh: Warehouse, text: str) -> list[str]:
    return [r.message for r in statements.run(wh, text)]


def files(root):
    return sorted((p.relative_to(root).as_posix(), p.stat().st_size if p.is_file() else 0) for p in root.rglob("*"))


@pytest.fixture
def homes(tmp_path):
    """Home b, where the statements run, and its sibling c holding power.reg and power.meters."""
    b = Warehouse(tmp_path / "homeb" / "warehouse", spark=no_spark)
    c = Warehouse(tmp_path / "homec" / "warehouse", spark=no_spark)
    for wh in (b, c):
        run(wh, "CREATE DATABASE power; CREATE TABLE power.reg (ts TIMESTAMP, v INT);"
                "CREATE STABLE power.meters (ts TIMESTAMP, v INT) TAGS (location VARCHAR(24));"
                "INSERT INTO power.reg VALUES ('2025-01-01 00:00:00', 1);"
                "INSERT INTO power.d1 USING power.meters TAGS ('x') VALUES ('2025-01-01 00:00:00', 1)")
    return b, c


def statement(text: str, **change) -> m.Statement:
    (stmt,) = parse(text)
    return dataclasses.replace(stmt, **change)


@pytest.mark.parametrize("bad", BAD_TABLES)
def test_table_statements_with_a_bad_table_name_touch_nothing(homes, bad, tmp_path):
    b, c = homes
    before = files(tmp_path)
    insert = statement("INSERT INTO power.x VALUES ('2025-01-01 00:00:01', 666)")
    assert isinstance(insert, m.Insert)
    target = dataclasses.replace(insert.targets[0], table=m.TableName(bad, "power"))
    for stmt in [
        dataclasses.replace(insert, targets=(target,)),
        statement("DROP TABLE power.x", names=(m.TableName(bad, "power"),)),
        statement("DROP TABLE IF EXISTS power.x", names=(m.TableName(bad, "power"),)),
        statement("DELETE FROM power.x", table=m.TableName(bad, "power")),
        statement("CREATE TABLE power.x (ts TIMESTAMP, v INT)", name=m.TableName(bad, "power")),
    ]:
        with pytest.raises(StreamError):
            statements.execute(b, stmt)
    catalog = b.catalog
    meters = catalog.resolve(m.TableName("meters"), "power")
    assert isinstance(meters, TableInfo)
    for call in [
        lambda: catalog.lookup(m.TableName(bad), "power"),
        lambda: catalog.resolve(m.TableName(bad), "power"),
        lambda: catalog.table_path("power", bad),
        lambda: catalog.create_subtable(meters, bad, {"location": "x"}, if_not_exists=True),
        lambda: catalog.existing_subtable(meters, bad, "insert"),
    ]:
        with pytest.raises(WarehouseError):
            call()
    assert files(tmp_path) == before
    assert c.catalog.lookup(m.TableName("reg"), "power") is not None


@pytest.mark.parametrize("bad", BAD_DBS)
def test_database_statements_with_a_bad_name_touch_nothing(homes, bad, tmp_path):
    b, c = homes
    before = files(tmp_path)
    for stmt in [
        statement("DROP DATABASE power", name=bad),
        statement("DROP DATABASE IF EXISTS power", name=bad),
        statement("USE power", name=bad),
        statement("CREATE DATABASE power", name=bad),
        statement("DROP TABLE power.reg", names=(m.TableName("reg", bad),)),
        statement("INSERT INTO power.reg VALUES ('2025-01-01 00:00:01', 666)"),
    ]:
        wh = Warehouse(b.catalog.root, spark=no_spark, database=bad) if isinstance(stmt, m.Insert) else b
        if isinstance(stmt, m.Insert):
            stmt = dataclasses.replace(stmt, targets=(dataclasses.replace(stmt.targets[0],
                                                                          table=m.TableName("reg")),))
        with pytest.raises(StreamError):
            statements.execute(wh, stmt)
    for call in [lambda: b.catalog.precision(bad), lambda: b.catalog.names(bad),
                 lambda: b.database_of(m.TableName("reg", bad))]:
        with pytest.raises(StreamError):
            call()
    assert files(tmp_path) == before


def test_a_database_folder_linked_out_of_the_warehouse_is_refused(homes, tmp_path):
    b, c = homes
    (b.catalog.root / "evil").symlink_to(c.catalog.root / "power")
    before = files(tmp_path / "homec")
    for stmt in [statement("DROP DATABASE evil"), statement("USE evil"),
                 statement("DROP TABLE evil.reg"), statement("INSERT INTO evil.reg VALUES ('2025-01-01', 2)")]:
        with pytest.raises(WarehouseError, match="leads out of"):
            statements.execute(b, stmt)
    assert files(tmp_path / "homec") == before


def test_load_refuses_a_bad_target_and_bad_tbname_values(homes, tmp_path):
    b, c = homes
    before = files(tmp_path)
    good = tmp_path / "rows.csv"
    good.write_text("ts,v\n2025-01-01 00:00:02,666\n")
    for target in [m.TableName(CLIMB, "power"), m.TableName("reg", "../../homec/warehouse/power"),
                   m.TableName("..", "power"), m.TableName("", "power")]:
        with pytest.raises(StreamError):
            load(b, good, target)
    evil = tmp_path / "evil.csv"
    evil.write_text("ts,v,tbname,location\n2025-01-01 00:00:02,666,../../evil,x\n")
    with pytest.raises(WarehouseError, match="contains '/'"):
        load(b, evil, m.TableName("meters", "power"))
    assert [f for f in files(tmp_path) if not f[0].endswith(".csv")] == before
    assert run(b, "DROP TABLE power.reg") == ["dropped power.reg"]  # legal names still work
