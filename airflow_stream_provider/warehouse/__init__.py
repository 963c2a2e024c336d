"""TDengine databases, supertables, subtables and regular tables as Delta tables.

:class:`Warehouse` and its results are imported when first named: the modules that only read the
catalog or register an insert listener (Airflow's DAG parsing, the triggerer) need none of the
query engine's imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from airflow_stream_provider.warehouse.catalog import Catalog, SubTable, TableInfo, WarehouseError

if TYPE_CHECKING:
    from airflow_stream_provider.warehouse.warehouse import Result, SystemView, Warehouse

__all__ = ["Catalog", "Result", "SubTable", "SystemView", "TableInfo", "Warehouse", "WarehouseError"]

_LAZY = {"Result", "SystemView", "Warehouse"}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        return getattr(importlib.import_module("airflow_stream_provider.warehouse.warehouse"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
