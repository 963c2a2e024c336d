"""Airflow finds the provider and its plugin through the package's entry points."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

AIRFLOW = Path(sys.executable).with_name("airflow")

pytestmark = pytest.mark.airflow


def airflow(*args: str, home: Path) -> subprocess.CompletedProcess:
    env = os.environ.copy()
    env.update(AIRFLOW_HOME=str(home), AIRFLOW__CORE__LOAD_EXAMPLES="False")
    return subprocess.run([str(AIRFLOW), *args], capture_output=True, text=True, timeout=300, env=env)


def test_airflow_lists_the_provider_and_the_plugin(tmp_path):
    providers = airflow("providers", "list", "--output", "json", home=tmp_path)
    assert providers.returncode == 0, providers.stderr
    listed = {p["package_name"]: p for p in json.loads(providers.stdout)}
    assert "airflow-stream-provider" in listed
    from airflow_stream_provider import __version__

    assert listed["airflow-stream-provider"]["version"] == __version__

    plugins = airflow("plugins", "--output", "json", home=tmp_path)
    assert plugins.returncode == 0, plugins.stderr
    names = {p["name"] for p in json.loads(plugins.stdout)}
    assert "airflow_stream" in names


def test_provider_info_matches_airflow_schema():
    import airflow
    import jsonschema
    from airflow import providers_manager  # noqa: F401 - the schema ships beside it

    from airflow_stream_provider.get_provider_info import get_provider_info

    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    jsonschema.validate(get_provider_info(), schema)


def test_airflow_lists_the_notifier_and_the_connection_type(tmp_path):
    notifications = airflow("providers", "notifications", "--output", "json", home=tmp_path)
    assert notifications.returncode == 0, notifications.stderr
    classes = {n["notification_class_name"] for n in json.loads(notifications.stdout)}
    assert "airflow_stream_provider.notifications.websocket.WebSocketNotifier" in classes
    hooks = airflow("providers", "hooks", "--output", "json", home=tmp_path)
    assert hooks.returncode == 0, hooks.stderr
    by_type = {h["connection_type"]: h for h in json.loads(hooks.stdout)}
    assert by_type["stream_ws"]["class"] == "airflow_stream_provider.hooks.websocket.WebSocketHook"
