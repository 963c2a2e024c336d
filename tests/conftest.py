"""Shared fixtures: a private home folder per run, one local Spark session, a warehouse per test and the
``sql(wh, text)`` helper."""

from __future__ import annotations

import logging
import os
import tempfile
import time
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings

from airflow_stream_provider.hooks import bind

if TYPE_CHECKING:
    from airflow_stream_provider.warehouse import Result, Warehouse

_HOME = tempfile.mkdtemp(prefix="airflow-stream-test-")
os.environ["AIRFLOW_STREAM_HOME"] = _HOME
os.environ.setdefault("AIRFLOW_STREAM_TIMEZONE", "UTC")
# Spark hands timestamps to Python in the process's local zone; fix it so results read the same anywhere.
os.environ["TZ"] = "UTC"
time.tzset()
# the test process reads Airflow connections through the hooks, as the CLI, the node and the tasks do
bind()


# this machine is shared: a property test is judged by its examples, never by how long one took
settings.register_profile("shared-machine", deadline=None)
settings.load_profile("shared-machine")

# py4j logs from object finalizers at interpreter exit, after pytest has closed its streams.
logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.fixture(scope="session")
def spark():
    from airflow_stream_provider.spark.session import local_session

    # one JVM serves the whole suite, which creates thousands of Delta tables: Delta keeps a log
    # (and its snapshot) per table it has read, so the driver gets more than Spark's default 1g
    session = local_session("airflow-stream-tests", extra={"spark.driver.memory": "2g"})
    yield session
    session.stop()


@pytest.fixture
def wh(spark, tmp_path, monkeypatch) -> Warehouse:
    """An empty warehouse in ``tmp_path / "warehouse"`` on the shared session, with ``tmp_path`` as the home
    folder (stream state, outboxes). A test module that needs tables overrides ``wh`` by requesting it."""
    from airflow_stream_provider.warehouse import Warehouse

    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(tmp_path))
    return Warehouse(tmp_path / "warehouse", spark=spark)


def sql(wh: Warehouse, text: str) -> list[Result]:
    """Run every statement of ``text`` on ``wh`` and return their results in order."""
    from airflow_stream_provider import statements

    return list(statements.run(wh, text))
