"""The column mapping layer on its own, over tables written by delta-rs (no Spark): what each reader
gets under the model's names, and what the check refuses."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from airflow_stream_provider.warehouse import mapping
from airflow_stream_provider.windows.changes import ChangeFeed

WANTED = [("event_time", "event_time", "ts"), ("voltage", "voltage", "metric"), ("tbname", "device_id", "tbname"),
          ("location", "site", "tag")]


@pytest.fixture
def table(tmp_path):
    path = str(tmp_path / "readings")
    rows = pa.table({"event_time": pa.array([datetime(2025, 1, 1, tzinfo=UTC)], pa.timestamp("us", tz="UTC")),
                     "device_id": ["d1"], "site": ["north"], "voltage": pa.array([220], pa.int32()),
                     "extra": [1.5]})
    write_deltalake(path, rows, configuration={"delta.enableChangeDataFeed": "true"})
    yield path
    mapping.unregister(path)


def test_the_kernel_readers_see_the_model_names(table):
    mapping.register(table, mapping.check(table, "power.meters", WANTED, mapping.describe(table)))
    feed = ChangeFeed(table)
    changes = feed.changes(0, 0)
    assert changes is not None
    assert changes.column_names == ["event_time", "voltage", "tbname", "location", "_change_type", "_commit_version",
                                    "_commit_timestamp"]
    assert changes.select(["tbname", "location", "voltage"]).to_pylist() == [
        {"tbname": "d1", "location": "north", "voltage": 220}]
    snapshot = feed.snapshot(0, ["event_time", "tbname", "location"])
    assert snapshot.column_names == ["event_time", "tbname", "location"]
    assert mapping.sources(table, ["tbname", "location", "_change_type"]) == ["device_id", "site", "_change_type"]
    back = mapping.to_sources(table, pa.table({"tbname": ["d2"], "location": ["x"]}))
    assert back.column_names == ["device_id", "site"]


def test_a_table_without_a_mapping_reads_as_it_is(table):
    rows = DeltaTable(table).to_pyarrow_table()
    assert mapping.arrow(table, rows) is rows and mapping.sources(table, ["a"]) == ["a"]


def test_the_check_names_what_does_not_fit(table, tmp_path):
    described = mapping.describe(table)
    with pytest.raises(mapping.MappingError, match="MAP TAGS names column sitee.*did you mean site"):
        mapping.check(table, "power.meters", [*WANTED[:3], ("location", "sitee", "tag")], described)
    with pytest.raises(mapping.MappingError, match="MAP TIMESTAMP voltage is integer"):
        mapping.check(table, "power.meters", [("voltage", "voltage", "ts")], described)
    with pytest.raises(mapping.MappingError, match="voltage was long when the table was attached and is integer now"):
        mapping.check(table, "power.meters", WANTED, described, {"voltage": "long"})
    with pytest.raises(mapping.MappingError, match="is not a Delta table"):
        mapping.describe(str(tmp_path / "nothing"))
    checked = mapping.check(table, "power.meters", WANTED, described)
    assert [(c.name, c.source, str(c.dtype)) for c in checked] == [
        ("event_time", "event_time", "TIMESTAMP"), ("voltage", "voltage", "INT"),
        ("tbname", "device_id", "VARCHAR(16384)"), ("location", "site", "VARCHAR(16384)")]
