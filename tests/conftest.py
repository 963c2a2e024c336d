"""Shared fixtures: a private home folder per run and one local Spark session."""

from __future__ import annotations

import logging
import os
import tempfile
import time

import pytest

from airflow_stream_provider.hooks import bind

_HOME = tempfile.mkdtemp(prefix="airflow-stream-test-")
os.environ["AIRFLOW_STREAM_HOME"] = _HOME
os.environ.setdefault("AIRFLOW_STREAM_TIMEZONE", "UTC")
# Spark hands timestamps to Python in the process's local zone; fix it so results read the same anywhere.
os.environ["TZ"] = "UTC"
time.tzset()
# the test process reads Airflow connections through the hooks, as the CLI, the node and the tasks do
bind()


# py4j logs from object finalizers at interpreter exit, after pytest has closed its streams.
logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.fixture(scope="session")
def spark():
    from airflow_stream_provider.spark.session import local_session

    session = local_session("airflow-stream-tests")
    yield session
    session.stop()
