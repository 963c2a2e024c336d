"""Reading a table's rows with the Delta kernel (delta-rs), for tests that poll outputs while other
processes compute them: a Spark query in the test process every second would take a core from the
processes under test, and the kernel reads what any other reader of the table would."""

from __future__ import annotations

from pathlib import Path

from deltalake import DeltaTable

from airflow_stream_provider.warehouse import Warehouse


def delta_rows(table: str | Path, columns: list[str] | None = None) -> list[dict]:
    """The rows of the Delta table at ``table`` (a path or an object store URL); none before its first commit."""
    if not DeltaTable.is_deltatable(str(table)):
        return []
    return DeltaTable(str(table)).to_pyarrow_table(columns=columns).to_pylist()


def table_rows(wh: Warehouse, db: str, name: str, columns: list[str] | None = None) -> list[dict]:
    """The rows of table ``db.name`` of ``wh``, read with the kernel."""
    return delta_rows(str(wh.catalog.table_path(db, name)), columns)
