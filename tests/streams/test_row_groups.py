"""How a window-less stream's results find their groups: one group per combination of the key
columns' values, NULL a value of its own, numbered in order of first appearance."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from airflow_stream_provider.streams.fire.rows import _groups, _values


def oracle(rows: list[tuple]) -> tuple[list[int], list[int]]:
    first: dict[tuple, int] = {}
    for i, row in enumerate(rows):
        first.setdefault(row, i)
    order = sorted(first.values())
    number = {rows[i]: n for n, i in enumerate(order)}
    return [number[row] for row in rows], order


@given(st.lists(st.tuples(st.sampled_from(["a", "b", None]), st.sampled_from([1, 2, 3, None])), max_size=40))
def test_each_row_gets_the_number_of_its_combination(rows: list[tuple]) -> None:
    keys = [pa.chunked_array([pa.array([r[0] for r in rows], pa.string())]),
            pa.chunked_array([pa.array([r[1] for r in rows], pa.int32())])]
    codes, firsts = _groups(keys, len(rows))
    expected_codes, expected_firsts = oracle(rows)
    assert codes.tolist() == expected_codes
    assert firsts.tolist() == expected_firsts


def test_no_key_columns_make_one_group() -> None:
    codes, firsts = _groups([], 3)
    assert codes.tolist() == [0, 0, 0] and firsts.tolist() == [0]


def test_group_values_keep_integers_and_read_timestamps_in_microseconds() -> None:
    # an integer column with a NULL stays integers (not floats), a timestamp becomes epoch microseconds
    assert _values(pa.chunked_array([pa.array([7, None], pa.int64())])) == [7, None]
    moment = datetime(2024, 1, 1, tzinfo=UTC)
    stamps = pa.chunked_array([pa.array([moment], pa.timestamp("us", "UTC"))])
    assert _values(stamps) == [1_704_067_200_000_000]
