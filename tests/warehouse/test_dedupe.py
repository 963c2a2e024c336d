"""A batch that writes one key twice keeps the later row, as a second INSERT of a timestamp replaces
the first in TDengine."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from airflow_stream_provider.warehouse.writer import dedupe_last


@given(st.lists(st.tuples(st.sampled_from([1, 2, None]), st.sampled_from(["a", "b", None])), max_size=30))
def test_the_last_row_of_each_key_stays_in_row_order(keys: list[tuple]) -> None:
    table = pa.table({"ts": pa.array([k[0] for k in keys], pa.int64()),
                      "tbname": pa.array([k[1] for k in keys], pa.string()),
                      "row": pa.array(range(len(keys)), pa.int64())})
    last = {k: i for i, k in enumerate(keys)}  # NULL equals NULL here: one key
    expected = sorted(last.values())
    assert dedupe_last(table, ["ts", "tbname"])["row"].to_pylist() == expected
