"""TDengine databases, supertables, subtables and regular tables as Delta tables."""

from airflow_stream_provider.warehouse.catalog import Catalog, SubTable, TableInfo, WarehouseError
from airflow_stream_provider.warehouse.warehouse import Result, SystemView, Warehouse

__all__ = ["Catalog", "Result", "SubTable", "SystemView", "TableInfo", "Warehouse", "WarehouseError"]
