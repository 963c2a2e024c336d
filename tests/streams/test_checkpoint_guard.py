"""The guard against a lost detector checkpoint (:func:`.fire.windows.check_checkpoint`), without
Spark: when the stream's progress says a checkpoint must exist, a missing or different one stops it."""

from __future__ import annotations

import pytest

from airflow_stream_provider.plan.state import StreamState
from airflow_stream_provider.sql import parse
from airflow_stream_provider.streams.fire.windows import CheckpointLost, check_checkpoint
from airflow_stream_provider.streams.probes import checkpoint_id
from airflow_stream_provider.streams.store import StoredStream

TEXT = "CREATE STREAM s INTERVAL(5m) SLIDING(5m) FROM m INTO o AS SELECT _twstart, count(*) FROM m"
ID = "7c1b8b1e-0b9a-4a52-9d1c-5a3c1c0b6f10"


def stored(tmp_path) -> StoredStream:
    (stmt,) = parse(TEXT)
    return StoredStream("d", "s", TEXT, stmt, tmp_path / "state", tmp_path / "state")


@pytest.mark.parametrize("state, on_disk, error", [
    ({}, None, None),                                        # a new stream: the first run makes it
    ({"created_version": 3}, None, None),
    ({}, ID, None),                                          # made by a run that did not record it yet
    ({"detected_version": 4}, ID, None),                     # progress from before the identity was kept
    ({"checkpoint_id": ID, "detected_version": 4}, ID, None),
    ({"checkpoint_id": ID, "detected_version": 4}, None, "is missing"),
    ({"detected_version": 4}, None, "is missing"),
    ({"consumed_batch": 0}, None, "is missing"),             # the node detected, a run consumed
    ({"checkpoint_id": ID}, "another-id", "is not the one it recorded"),
    ({"checkpoint_id": ID}, "", "is missing"),               # a folder without its metadata
])
def test_progress_without_its_checkpoint_stops_the_stream(tmp_path, state, on_disk, error):
    stream, state = stored(tmp_path), StreamState.from_json(state)
    if on_disk is not None:
        stream.checkpoint.mkdir(parents=True)
        if on_disk:
            (stream.checkpoint / "metadata").write_text(f'{{"id":"{on_disk}"}}\n')
    if error is None:
        check_checkpoint(stream, state)
        return
    with pytest.raises(CheckpointLost, match=error) as caught:
        check_checkpoint(stream, state)
    assert "stream d.s stopped" in str(caught.value)
    assert "Restore the checkpoint, or DROP STREAM d.s and CREATE it again" in str(caught.value)


def test_checkpoint_identity_is_the_query_id_in_its_metadata(tmp_path):
    assert checkpoint_id(tmp_path / "none") is None
    (tmp_path / "metadata").write_text(f'{{"id":"{ID}"}}\n')
    assert checkpoint_id(tmp_path) == ID
    (tmp_path / "metadata").write_text("{garbage")
    assert checkpoint_id(tmp_path) is None
