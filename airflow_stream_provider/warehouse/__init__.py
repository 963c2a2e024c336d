"""TDengine databases, supertables, subtables and regular tables as Delta tables.

Every name here is imported when first named: the modules that only register an insert listener
(Airflow's DAG parsing, the triggerer) need neither the catalog's Arrow types nor the query engine.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from airflow_stream_provider.warehouse.catalog import Catalog, SubTable, TableInfo, WarehouseError
    from airflow_stream_provider.warehouse.result import Result
    from airflow_stream_provider.warehouse.warehouse import SystemView, Warehouse

__all__ = ["Catalog", "Result", "SubTable", "SystemView", "TableInfo", "Warehouse", "WarehouseError"]

#: name -> the module defining it
_LAZY = {"Catalog": "catalog", "SubTable": "catalog", "TableInfo": "catalog", "WarehouseError": "catalog",
         "Result": "result", "SystemView": "warehouse", "Warehouse": "warehouse"}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        return getattr(importlib.import_module(f"airflow_stream_provider.warehouse.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
