"""The live detector's checkpoint: a batch that failed before its commit runs again with the same
versions and writes its events once; state survives snapshots and pruning; a checkpoint this
detector cannot continue from is refused, not overwritten. The oracle is batch mode
(:func:`~airflow_stream_provider.windows.batch.group_events`) over the same rows: the window core run
once over all of a group's rows, without state carried between batches."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from airflow_stream_provider.sql import parse
from airflow_stream_provider.windows import checkpoint, detector
from airflow_stream_provider.windows.batch import group_events
from airflow_stream_provider.windows.checkpoint import CheckpointFormatError
from airflow_stream_provider.windows.trigger_plan import TriggerPlan

S = 1_000_000


def _table(path: Path, seconds: range, meters: int = 3) -> None:
    """One commit of a row per meter per second (``v`` cycles so that STATE windows change)."""
    ts = np.repeat(np.array(list(seconds), np.int64) * S, meters)
    meter = np.tile(np.arange(meters), len(seconds))
    frame = pa.table({"ts": pa.array(ts, pa.timestamp("us", "UTC")),
                      "v": pa.array(((ts // S) // 4 + meter) % 3, pa.int32()),
                      "tbname": pa.array([f"d{m}" for m in meter])})
    write_deltalake(str(path), frame, mode="append", configuration={"delta.enableChangeDataFeed": "true"})


def _plan(path: Path) -> TriggerPlan:
    (stmt,) = parse("CREATE STREAM s STATE_WINDOW(v) FROM m PARTITION BY tbname INTO o AS SELECT count(*) FROM m")
    return TriggerPlan.build(stmt, "m", path=str(path), columns=["ts", "v", "tbname"], ts_column="ts")


def _events(path: Path) -> pd.DataFrame:
    return DeltaTable(str(path)).to_pandas()


def _oracle(table: Path, plan: TriggerPlan) -> list[tuple]:
    rows = DeltaTable(str(table)).to_pandas()
    frames = [group_events(plan, part.reset_index(drop=True)) for _, part in rows.groupby("tbname")]
    return _keys(pd.concat(frames, ignore_index=True))


def _keys(events: pd.DataFrame) -> list[tuple]:
    return sorted(zip(events["trigger_id"], events["event_type"], events["row_count"].astype(int)))


def test_a_batch_that_failed_before_its_commit_runs_again_with_the_same_versions(tmp_path):
    table, events = tmp_path / "m", tmp_path / "events"
    _table(table, range(10))
    plan = _plan(table)
    options = detector.DetectorOptions(events_path=str(events), checkpoint=str(tmp_path / "cp"), starting_version=0)

    def fail(batch: detector.DetectedBatch) -> None:
        raise RuntimeError("the computation failed")

    first = detector.Detector(plan, options, after_batch=fail)
    with pytest.raises(RuntimeError):
        first.run_once()
    written = _events(events)
    assert len(written) and set(written["batch_id"]) == {0}  # the events were written, the batch not committed
    _table(table, range(10, 20))  # more rows land before the detector starts again
    seen: list[detector.DetectedBatch] = []
    again = detector.Detector(plan, options, after_batch=seen.append)
    again.run_available()
    assert [(b.id, b.version) for b in seen] == [(0, 0), (1, 1)]  # batch 0 again, with version 0 only
    assert seen[0].events is not None and seen[0].events.num_rows == len(written)
    stored = _events(events)
    assert sorted(stored["batch_id"].unique()) == [0, 1]
    assert len(stored[stored["batch_id"] == 0]) == len(written)  # written once
    assert _keys(stored) == _oracle(table, plan)


def test_a_detector_writing_results_first_writes_its_events_after_them_and_once(tmp_path):
    """With ``results_first`` (LOW_LATENCY_CALC), a batch's results are written before its events: the
    results step sees no events of its own batch in the event table yet. A batch whose results step
    failed runs again with the same versions and writes its events once; one whose results step had
    the events stored, to read them from the table, does not store them again."""
    table, events = tmp_path / "m", tmp_path / "events"
    _table(table, range(10))
    plan = _plan(table)
    options = detector.DetectorOptions(events_path=str(events), checkpoint=str(tmp_path / "cp"), starting_version=0)

    def fail(batch: detector.DetectedBatch) -> None:
        assert not events.exists()  # (the first batch: no event table yet)
        raise RuntimeError("the computation failed")

    with pytest.raises(RuntimeError):
        detector.Detector(plan, options, after_batch=fail, results_first=True).run_once()
    assert not events.exists()  # nothing written, the batch not committed
    _table(table, range(10, 20))
    seen: list[tuple[int, int | None, set]] = []

    def results(batch: detector.DetectedBatch) -> None:
        assert batch.events is not None and batch.store_events is not None
        before = set(_events(events)["batch_id"]) if events.exists() else set()
        if batch.id == 1:  # as a run that reads the event table does: the batch's events go in first
            batch.store_events()
            assert set(_events(events)["batch_id"]) == before | {1}
        seen.append((batch.id, batch.version, before))

    again = detector.Detector(plan, options, after_batch=results, results_first=True)
    again.run_available()
    assert seen == [(0, 0, set()), (1, 1, {0})]  # batch 0 again, with version 0 only; its events after it
    stored = _events(events)
    assert sorted(stored["batch_id"].unique()) == [0, 1]
    assert len(stored) == len(set(zip(stored["batch_id"], stored["seq"])))  # each written once
    assert _keys(stored) == _oracle(table, plan)
    assert again.batch == 1


def test_state_survives_snapshots_and_pruning(tmp_path, monkeypatch):
    monkeypatch.setattr(detector, "SNAPSHOT_EVERY", 3)
    monkeypatch.setattr(detector, "RETAIN", 2)
    table, events, cp = tmp_path / "m", tmp_path / "events", tmp_path / "cp"
    plan = _plan(table)
    options = detector.DetectorOptions(events_path=str(events), checkpoint=str(cp), starting_version=0)
    for second in range(0, 40, 2):
        _table(table, range(second, second + 2))
        detector.Detector(plan, options).run_available()  # a new process each time: state from the checkpoint
    assert _keys(_events(events)) == _oracle(table, plan)
    snapshots = sorted(int(p.name.split(".")[0]) for p in (cp / "state").glob("*.snapshot"))
    assert snapshots and snapshots[-1] >= 17
    kept = sorted(int(p.name) for p in (cp / "commits").iterdir())
    assert kept[0] >= snapshots[-1] - 2 and kept[-1] == 19  # pruned behind the snapshot, the last kept
    assert sorted(int(p.name) for p in (cp / "offsets").iterdir())[0] == kept[0]


def test_a_checkpoint_of_another_engine_is_refused_and_left_as_it_is(tmp_path):
    table, cp = tmp_path / "m", tmp_path / "cp"
    _table(table, range(4))
    cp.mkdir()
    spark_metadata = json.dumps({"id": "5f0e0d1c-0000-4000-8000-000000000000"}) + "\n"
    (cp / "metadata").write_text(spark_metadata)
    (cp / "offsets").mkdir()
    (cp / "offsets" / "0").write_text('v1\n{"batchWatermarkMs":0}\n{"reservoirVersion":1}\n')
    options = detector.DetectorOptions(events_path=str(tmp_path / "events"), checkpoint=str(cp), starting_version=0)
    with pytest.raises(CheckpointFormatError, match="Spark Structured Streaming.*DROP STREAM"):
        detector.Detector(_plan(table), options)
    assert (cp / "metadata").read_text() == spark_metadata
    assert not (tmp_path / "events").exists()


def test_the_commit_of_a_batch_says_what_the_sensors_read(tmp_path):
    """``commits/N`` in Structured Streaming's format, and the last batch with events beside them."""
    from airflow_stream_provider.streams.probes import checkpoint_id, last_commit, last_event_batch

    table, cp = tmp_path / "m", tmp_path / "cp"
    _table(table, range(10))
    options = detector.DetectorOptions(events_path=str(tmp_path / "events"), checkpoint=str(cp), starting_version=0)
    found = detector.Detector(_plan(table), options)
    assert last_event_batch(cp) == -1 and last_commit(cp) is None
    found.run_available()
    assert last_commit(cp) == (0, 0) and last_event_batch(cp) == 0
    assert checkpoint_id(cp) == found.id
    assert (cp / checkpoint.EVENTS_MARK).read_text().strip() == "0"
