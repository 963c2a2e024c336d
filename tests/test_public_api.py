"""The public API: one stable home at the package top, old paths still importable with a warning, and
the package top light enough for the triggerer and DAG parsing."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

import airflow_stream_provider as api
from airflow_stream_provider.model import insert_triggers

#: what users are told to import (README, docs, examples); a rename inside must never break these
DOCUMENTED = {
    "InsertTrigger", "Tablet", "TriggerAttributes", "Measurement", "FailureStrategy", "TriggerEvent", "TriggerType",
    "StreamComputeOperator", "StreamNotifyOperator", "StreamCommitOperator", "StreamRecalculateOperator",
    "StreamCheckpointSensor", "StreamEventTimeSensor",
    "CheckpointCommitTrigger", "EventTimeTrigger", "StreamComputeTrigger", "StreamInstantTrigger",
    "StreamNotifyTrigger", "StreamCommitTrigger",
    "PeriodTimetable", "SlidingTimetable", "ResampleTimetable", "RecalcTimetable",
    "WebSocketNotifier", "WebSocketHook", "StreamProject", "StreamDeclaration", "StreamDeployOperator",
}


def test_every_documented_name_is_importable_from_the_package_top():
    assert set(api.__all__) == set(api._PUBLIC) >= DOCUMENTED
    for name in api.__all__:
        value = getattr(api, name)
        assert isinstance(value, type), name
        assert value.__name__ == name
    assert set(dir(api)) >= DOCUMENTED


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        api.Nope  # noqa: B018


def test_the_insert_trigger_api_is_the_same_class_at_both_paths():
    assert api.InsertTrigger is insert_triggers.InsertTrigger
    assert api.Tablet is insert_triggers.Tablet


def test_the_old_insert_trigger_path_still_imports_with_a_deprecation_warning():
    sys.modules.pop("airflow_stream_provider.model.callbacks", None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = importlib.import_module("airflow_stream_provider.model.callbacks")
    assert old.InsertTrigger is api.InsertTrigger
    assert any(issubclass(w.category, DeprecationWarning) and "airflow_stream_provider" in str(w.message)
               for w in caught)


def test_the_package_top_and_the_insert_trigger_api_import_no_airflow():
    code = ("import sys, airflow_stream_provider as a; a.InsertTrigger; "
            "print(sorted(m for m in sys.modules if m == 'airflow' or m.startswith('airflow.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_sensors_old_path_under_the_operators_warns_and_gives_the_same_class():
    from airflow_stream_provider import operators, sensors

    with pytest.warns(DeprecationWarning, match="import it from airflow_stream_provider"):
        old = operators.StreamCheckpointSensor
    assert old is sensors.StreamCheckpointSensor is api.StreamCheckpointSensor
