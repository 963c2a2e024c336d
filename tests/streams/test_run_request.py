"""The run request: each entry point's maker says what kind of run it asks for."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from airflow_stream_provider.streams.run_request import RunRequest


def test_the_cli_run_detects_computes_and_records_everything_pending():
    said: list[str] = []
    request = RunRequest.everything(progress=said.append)
    assert (request.detect, request.commit, request.at, request.upto_batch, request.detected) == (True, True, None,
                                                                                                  None, None)
    assert request.progress is not None
    request.progress("x")
    assert said == ["x"]
    assert RunRequest() == RunRequest.everything()


def test_a_served_request_reads_the_task_s_batch_instant_and_try_and_returns_its_progress():
    runtime = object()
    body = {"role": "compute", "upto_batch": 7, "at": "2026-01-01T00:01:00+00:00", "attempt": ["scheduled__x", "2"]}
    request = RunRequest.served(body, runtime)  # type: ignore[arg-type]
    assert request.upto_batch == 7
    assert request.at == datetime(2026, 1, 1, 0, 1, tzinfo=UTC)
    assert request.attempt == ("scheduled__x", 2)
    assert (request.detect, request.commit, request.runtime) == (False, False, runtime)
    bare = RunRequest.served({"role": "compute"}, runtime)  # type: ignore[arg-type]
    assert (bare.at, bare.attempt, bare.upto_batch) == (None, None, None)


def test_a_task_on_a_worker_hands_its_progress_to_the_commit_task():
    request = RunRequest.task(upto_batch=3, detect=False)
    assert (request.upto_batch, request.detect, request.commit, request.runtime) == (3, False, False, None)


def test_a_live_batch_is_computed_from_the_events_the_detector_just_wrote():
    batch, runtime = dataclasses.make_dataclass("Batch", ["id"])(11), object()
    request = RunRequest.live(batch, runtime)  # type: ignore[arg-type]
    assert (request.upto_batch, request.detected, request.detect, request.commit) == (11, batch, False, True)


def test_a_request_is_frozen_and_takes_keywords_only():
    with pytest.raises(dataclasses.FrozenInstanceError):
        RunRequest().commit = False  # type: ignore[misc]
    with pytest.raises(TypeError):
        RunRequest(None)  # type: ignore[misc]
