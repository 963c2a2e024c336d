"""What running one statement gives back: its message, the rows of a query, the count of rows written
or deleted, and the notices of insert triggers that failed after their write."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from airflow_stream_provider import model as m


@dataclass
class Result:
    statement: m.Statement
    message: str
    table: pa.Table | None = None  # the rows of a SELECT
    rows: int = 0  # rows written or deleted
    #: what went wrong without stopping the statement: an insert trigger that failed after its write
    notices: tuple[str, ...] = ()
