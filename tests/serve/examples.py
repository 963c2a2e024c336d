"""The client examples of ``examples/clients/``, loaded as modules for the tests that run them."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType


def client_example(name: str) -> ModuleType:
    """``examples/clients/<name>.py`` as a module."""
    path = Path(__file__).resolve().parents[2] / "examples" / "clients" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"examples_clients_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
