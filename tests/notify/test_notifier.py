"""WebSocketNotifier as an Airflow callback, in a DAG run by ``airflow dags test`` (real Airflow)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from airflow_stream_provider.notify.message import validate
from tests.notify.conftest import events_of

pytestmark = pytest.mark.airflow

AIRFLOW = Path(sys.executable).with_name("airflow")

DAG_FILE = """
from datetime import datetime

from airflow.sdk import DAG, task

from airflow_stream_provider.notifications.websocket import WebSocketNotifier

with DAG("notified", schedule=None, start_date=datetime(2025, 1, 1)):
    @task(on_success_callback=WebSocketNotifier(urls="{url}", stream_name="ops",
                                                result={{"note": "{{{{ ti.task_id }}}} done"}}))
    def fine():
        return 1

    @task(on_failure_callback=WebSocketNotifier(urls=["{url}"]), retries=0)
    def broken():
        raise ValueError("boom")

    fine() >> broken()
"""


def test_notifier_sends_from_task_callbacks(tmp_path, receivers):
    rec = receivers()
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "notified.py").write_text(textwrap.dedent(DAG_FILE.format(url=rec.url)))
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "airflow"), "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    migrate = subprocess.run([str(AIRFLOW), "db", "migrate"], env=env, capture_output=True, text=True, timeout=300,
                             check=False)
    assert migrate.returncode == 0, migrate.stderr[-2000:]
    run = subprocess.run([str(AIRFLOW), "dags", "test", "notified", "2025-01-02"], env=env, capture_output=True,
                         check=False, text=True, timeout=300)
    messages = rec.messages()
    assert len(messages) == 2, run.stdout[-3000:] + run.stderr[-3000:]
    for msg in messages:
        validate(msg)
    by_task = {ev["tableName"]: (msg["streams"][0]["streamName"], ev) for msg in messages for ev in events_of([msg])}
    stream, ok = by_task["fine"]
    assert stream == "ops" and ok["result"]["state"] == "success" and ok["result"]["note"] == "fine done"
    stream, failed = by_task["broken"]
    assert stream == "notified" and failed["result"]["state"] == "failed"
    assert failed["result"]["dag_id"] == "notified" and failed["eventType"] == "ON_TIME"
