"""The node's worker count: one per core the node may run on, as ``nproc`` (which reads the
process's CPU affinity) counts them, and narrowed with the affinity; the variable overrides it."""

from __future__ import annotations

import os
import subprocess

import pytest

from airflow_stream_provider.node.worker import default_workers


def nproc() -> int:
    return int(subprocess.run(["nproc"], capture_output=True, text=True, check=True).stdout)


def test_one_worker_per_usable_core(monkeypatch):
    monkeypatch.delenv("AIRFLOW_STREAM_NODE_WORKERS", raising=False)
    assert default_workers() == nproc()


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="CPU affinity is Linux's")
def test_a_narrower_affinity_means_fewer_workers(monkeypatch):
    monkeypatch.delenv("AIRFLOW_STREAM_NODE_WORKERS", raising=False)
    before = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, {min(before)})
        assert default_workers() == nproc() == 1
    finally:
        os.sched_setaffinity(0, before)


def test_the_variable_overrides_the_cores(monkeypatch):
    monkeypatch.setenv("AIRFLOW_STREAM_NODE_WORKERS", "7")
    assert default_workers() == 7
    monkeypatch.setenv("AIRFLOW_STREAM_NODE_WORKERS", "0")
    assert default_workers() == 0


def test_the_home_config_sets_the_workers_and_the_variable_wins(monkeypatch, tmp_path):
    monkeypatch.delenv("AIRFLOW_STREAM_NODE_WORKERS", raising=False)
    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(tmp_path))
    (tmp_path / "airflow-stream.toml").write_text("[node]\nworkers = 12\n")
    assert default_workers() == 12
    monkeypatch.setenv("AIRFLOW_STREAM_NODE_WORKERS", "3")
    assert default_workers() == 3
    (tmp_path / "airflow-stream.toml").write_text("[node]\nworkers = 'many'\n")
    monkeypatch.delenv("AIRFLOW_STREAM_NODE_WORKERS")
    with pytest.raises(ValueError, match=r"\[node\] workers"):
        default_workers()
