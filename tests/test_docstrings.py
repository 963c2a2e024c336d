"""The API reference of the Airflow classes: every constructor argument of the public operators,
sensors, triggers, timetables, notifier and hook has a ``:param:`` line in its class's docstring
(``dev/docs`` renders them with warnings as errors)."""

from __future__ import annotations

import inspect
import re

import pytest

import airflow_stream_provider as api

#: the public classes of the Airflow roles (all of the public API but the insert trigger API)
ROLES = ("operators", "sensors", "triggers", "timetables", "notifications", "hooks")
AIRFLOW_CLASSES = sorted(name for name, module in api._PUBLIC.items() if module.split(".")[1] in ROLES)


def test_every_airflow_role_of_the_public_api_is_checked():
    assert len(AIRFLOW_CLASSES) == 20
    assert {"StreamComputeOperator", "StreamSensor", "StreamCommitTrigger", "RecalcTimetable", "WebSocketNotifier",
            "WebSocketHook"} <= set(AIRFLOW_CLASSES)


def constructor_arguments(cls: type) -> list[str]:
    return [name for name in inspect.signature(cls.__init__).parameters if name != "self"]


@pytest.mark.parametrize("name", AIRFLOW_CLASSES)
def test_every_constructor_argument_has_a_param_line(name):
    cls = getattr(api, name)
    doc = cls.__dict__.get("__doc__") or ""
    documented = re.findall(r"^\s*:param (\w+):", doc, re.MULTILINE)
    assert documented == list(dict.fromkeys(documented)), f"{name}: a :param: line twice"
    assert set(constructor_arguments(cls)) == set(documented), name

