"""The stream's state: ``stream.json`` read into a frozen StreamState and back unchanged, and a run's
progress joined by one set of rules."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from airflow_stream_provider.plan.state import KEPT_TRIES, StreamState

#: a stream.json as a stream that ran for a while writes it (keys and shapes as they have always been)
WRITTEN = {
    "created": "2026-01-01T00:00:00+00:00", "created_version": 3, "result_schema": '{"type": "struct"}',
    "trigger_table": {"path": "/w/d/t", "ts_column": "ts"}, "consumed_batch": 7, "detected_version": 12,
    "checkpoint_id": "q-1", "last_fired": "2026-01-01T00:10:00+00:00",
    "sliding": {"5": {"origin": "2026-01-01T00:00:00+00:00", "last": "2026-01-01T00:05:00+00:00"}},
    "committed_tries": {"scheduled__a": 2}, "computed": 40, "outputs": {"out_d1": "d1"},
    "skip_versions": [[5, 8]], "untreated_version": 8, "recalculations": 1, "recalculated_triggers": 6,
    "stopped": True, "stopped_at": "2026-01-01T00:11:00+00:00", "stopped_version": 13,
    "failed": "its detector checkpoint is missing",
    "a_key_of_a_later_release": {"kept": True},
}


def test_a_written_state_reads_into_types_and_writes_back_the_same_document():
    state = StreamState.from_json(WRITTEN)
    assert state.created == datetime(2026, 1, 1, tzinfo=UTC)
    assert state.last_fired == datetime(2026, 1, 1, 0, 10, tzinfo=UTC)
    assert state.skip_versions == ((5, 8),)
    assert (state.consumed_batch, state.computed, state.stopped, state.failed) == (7, 40, True,
                                                                                   "its detector checkpoint is missing")
    assert state.other == {"a_key_of_a_later_release": {"kept": True}}
    assert state.to_json() == WRITTEN


def test_an_empty_document_is_the_state_of_a_stream_that_has_done_nothing():
    state = StreamState.from_json({})
    assert state == StreamState()
    assert (state.consumed_batch, state.computed, state.stopped, state.outputs) == (None, 0, False, {})
    assert state.to_json() == {}
    # a key written as null reads as absent (a run clears ``failed`` that way)
    assert StreamState.from_json({"failed": None, "consumed_batch": 2}).to_json() == {"consumed_batch": 2}


def test_the_state_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        StreamState().computed = 1  # type: ignore[misc]


def test_batch_and_version_marks_only_move_forward():
    state = StreamState(consumed_batch=7, detected_version=12, last_version=4)
    late = state.merged({"consumed_batch": 5, "detected_version": 10, "last_version": 9})
    assert (late.consumed_batch, late.detected_version, late.last_version) == (7, 12, 9)
    assert StreamState().merged({"consumed_batch": 0}).consumed_batch == 0


def test_computed_counts_each_run():
    assert StreamState(computed=40).merged({"computed": 3}).merged({"computed": 2}).computed == 45


def test_the_later_period_instant_is_kept():
    state = StreamState(last_fired=datetime(2026, 1, 1, 0, 10, tzinfo=UTC))
    assert state.merged({"last_fired": "2026-01-01T00:05:00+00:00"}).last_fired == state.last_fired
    assert state.merged({"last_fired": "2026-01-01T00:20:00+00:00"}).last_fired == datetime(2026, 1, 1, 0, 20,
                                                                                            tzinfo=UTC)


def test_each_sliding_group_keeps_its_later_mark():
    origin = "2026-01-01T00:00:00+00:00"
    state = StreamState(sliding={"1": {"origin": origin, "last": "2026-01-01T00:05:00+00:00"},
                                 "2": {"origin": origin, "last": "2026-01-01T00:05:00+00:00"}})
    merged = state.merged({"sliding": {"1": {"origin": origin, "last": "2026-01-01T00:04:00+00:00"},
                                       "2": {"origin": origin, "last": "2026-01-01T00:06:00+00:00"},
                                       "3": {"origin": origin}}})
    assert merged.sliding == {"1": {"origin": origin, "last": "2026-01-01T00:05:00+00:00"},
                              "2": {"origin": origin, "last": "2026-01-01T00:06:00+00:00"},
                              "3": {"origin": origin}}


def test_each_run_keeps_its_later_committing_try_for_the_latest_runs_only():
    state = StreamState(committed_tries={"a": 2, "b": 1})
    assert state.merged({"committed_tries": {"a": 1, "b": 3}}).committed_tries == {"a": 2, "b": 3}
    many = state.merged({"committed_tries": {f"r{i}": 1 for i in range(KEPT_TRIES)}}).committed_tries
    assert len(many) == KEPT_TRIES and "a" not in many and "r0" in many


def test_other_keys_take_the_new_value_and_none_clears_one():
    state = StreamState(failed="boom", outputs={"o1": "d1"})
    merged = state.merged({"failed": None, "outputs": {"o1": "d1", "o2": "d2"}, "later_key": 1})
    assert (merged.failed, merged.outputs, merged.other) == (None, {"o1": "d1", "o2": "d2"}, {"later_key": 1})


def test_start_takes_away_the_stop_marks_and_nothing_else():
    stopped = StreamState(stopped=True, stopped_at="x", stopped_version=3, computed=2)
    assert stopped.started() == StreamState(computed=2)
