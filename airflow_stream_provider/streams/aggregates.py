"""The commonest live query without SQL: a window's placeholders and plain aggregates of ``%%trows``.

A live batch of a window stream asks, for each window that closed, something like ``SELECT _twstart,
_twend, count(*), avg(current), max(voltage) FROM %%trows``. DuckDB answers it in a few
milliseconds (:mod:`.duckdb`), most of them spent registering the rows and planning the LATERAL
query. Here a query of that shape is answered straight from the Arrow rows: each window's rows are a
slice of its group's rows sorted by time, and each aggregate a reduction of the slice.

What qualifies (:func:`plan`): a single ``SELECT ... FROM %%trows`` without WHERE, GROUP BY,
HAVING, ORDER BY, LIMIT or DISTINCT, whose items are placeholders and ``count(*)``, or ``count``,
``sum``, ``avg``, ``min`` and ``max`` of a plain column, with at least one aggregate (so one row per
window). Anything else goes to DuckDB or Spark as before. At run time (:func:`evaluate`) the rows
must also suit: ``sum``/``avg`` of integers whose total could leave 64 bits, or ``min``/``max`` over
floating point values with a NaN (which Spark orders above every number), go to DuckDB. The results
are those Spark gives: NULLs skipped, an aggregate of no value NULL (``count`` 0), ``avg`` in double
precision, a floating point ``sum`` added in row order; ``tests/streams/test_local_compute.py``
holds them to Spark's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import pyarrow as pa
from sqlglot import exp

from airflow_stream_provider.sql.ast import PlaceholderTable, StreamPlaceholder
from airflow_stream_provider.values import epoch_micros
from airflow_stream_provider.windows.detector import group_codes

#: the aggregates computed here, by their TDengine names
FUNCTIONS = ("count", "sum", "avg", "min", "max")
#: the parts of a SELECT a planned query has
_PARTS = ("expressions", "from", "from_")


@dataclass(frozen=True)
class Item:
    """A select item: a placeholder (``placeholder`` set), or an aggregate ``function`` of
    ``column`` (None: ``count(*)``)."""

    name: str
    placeholder: str | None = None
    function: str | None = None
    column: str | None = None


def plan(tree: exp.Expr) -> tuple[Item, ...] | None:
    """The items of ``tree`` when it is a query this module answers, else None."""
    if not isinstance(tree, exp.Select) or any(v for k, v in tree.args.items() if k not in _PARTS):
        return None
    source = tree.args.get("from") or tree.args.get("from_")
    if not isinstance(source, exp.From) or not isinstance(source.this, PlaceholderTable) \
            or source.this.name != "%%trows" or source.this.args.get("alias") is not None:
        return None
    items = []
    for item in tree.expressions:
        if not isinstance(item, exp.Alias):
            return None
        body, name = item.this, item.alias
        if isinstance(body, StreamPlaceholder):
            items.append(Item(name, placeholder=body.name))
            continue
        if not isinstance(body, exp.Anonymous) or body.name.lower() not in FUNCTIONS or len(body.expressions) != 1:
            return None
        function, (arg,) = body.name.lower(), body.expressions
        if isinstance(arg, exp.Star) and function == "count":
            items.append(Item(name, function="count"))
        elif isinstance(arg, exp.Column) and isinstance(arg.this, exp.Identifier) and not arg.table:
            items.append(Item(name, function=function, column=arg.name))
        else:
            return None
    if not any(i.function for i in items):
        return None  # placeholders alone: a row per row of %%trows, not per window
    return tuple(items)


@dataclass(frozen=True)
class Slices:
    """Each window's rows as a slice ``[lo, hi)`` of the rows in ``order``."""

    order: np.ndarray
    lo: np.ndarray
    hi: np.ndarray


def window_slices(rows: pa.Table, ts: str, keys: Sequence[str], triggers: Sequence[dict], *, end_inclusive: bool,
                  bounds: tuple[str, str]) -> Slices | None:
    """Where each trigger's rows are in ``rows`` sorted by group then time: the rows whose ``keys``
    equal the trigger's ``%%1``, ``%%2``... (NULL equal to NULL) and whose time is in the trigger's
    ``bounds`` (two placeholder names: from, included, and to, included when ``end_inclusive``).
    None when a key is not a column of ``rows``, or a trigger's value cannot be compared with it."""
    if any(key not in rows.column_names for key in keys):
        return None
    count = rows.num_rows
    both = {}
    for i, key in enumerate(keys, start=1):  # the rows' keys, then the triggers', in one numbering
        column = rows[key].combine_chunks()
        try:
            theirs = pa.array([t.get(f"%%{i}") for t in triggers], column.type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            return None
        both[key] = pa.concat_arrays([column, theirs])
    numbered = group_codes(pa.table(both), tuple(keys))[0] if keys else np.zeros(count + len(triggers), np.int64)
    codes, wanted = numbered[:count], numbered[count:]
    times = _column_micros(rows[ts])
    order = np.lexsort((times, codes))
    codes, times = codes[order], times[order]
    start, end = np.searchsorted(codes, wanted, "left"), np.searchsorted(codes, wanted, "right")
    lo = np.empty(len(triggers), np.int64)
    hi = np.empty(len(triggers), np.int64)
    for j, trigger in enumerate(triggers):
        low, high = trigger.get(bounds[0]), trigger.get(bounds[1])
        if not isinstance(low, datetime) or not isinstance(high, datetime) or low.tzinfo is None \
                or high.tzinfo is None:
            return None
        run = times[start[j]:end[j]]
        lo[j] = start[j] + np.searchsorted(run, epoch_micros(low), "left")
        hi[j] = start[j] + np.searchsorted(run, epoch_micros(high), "right" if end_inclusive else "left")
    return Slices(order, lo, np.maximum(hi, lo))


def _column_micros(column: pa.ChunkedArray) -> np.ndarray:
    """A time column as microseconds since the epoch (a time without zone is UTC's wall time)."""
    kind = column.type
    column = column.cast(pa.timestamp("us", tz=kind.tz)) if kind.unit != "us" else column
    return column.cast(pa.int64()).to_numpy(zero_copy_only=False)


def aggregate(function: str, column: pa.ChunkedArray | None, slices: Slices) -> pa.Array | None:
    """``function`` of ``column``'s values (None: ``count(*)``) in each window, as Spark computes it;
    None when these values are for DuckDB (:mod:`.duckdb`) to aggregate."""
    lo, hi = slices.lo, slices.hi
    if column is None:
        return pa.array(hi - lo, pa.int64())
    kind = column.type
    column = column.combine_chunks().take(pa.array(slices.order))
    valid = column.is_valid().to_numpy(zero_copy_only=False)
    seen = np.concatenate([[0], np.cumsum(valid, dtype=np.int64)])
    counts = seen[hi] - seen[lo]
    if function == "count":
        return pa.array(counts, pa.int64())
    empty = counts == 0
    integer = pa.types.is_integer(kind)
    if not integer and not pa.types.is_floating(kind):
        if function in ("min", "max") and pa.types.is_timestamp(kind):
            return _extreme(function, column, valid, slices, empty)
        return None
    values = column.fill_null(0).to_numpy(zero_copy_only=False)
    if function in ("min", "max"):
        if not integer and bool(np.isnan(values[valid]).any()):
            return None
        return _extreme(function, column, valid, slices, empty)
    if integer:
        values = values.astype(np.int64)
        biggest = int(np.abs(values).max()) if len(values) else 0
        # a sum that could leave 64 bits (Spark's overflow error), or an average whose double precision
        # sum could round (Spark adds the values as doubles): DuckDB's
        if biggest * max(len(values), 1) >= 2 ** (63 if function == "sum" else 53):
            return None
        total = np.concatenate([[0], np.cumsum(values, dtype=np.int64)])
        sums = total[hi] - total[lo]
        if function == "sum":
            return pa.array(sums, pa.int64(), mask=empty)
        return pa.array(sums.astype(np.float64) / np.where(empty, 1, counts), pa.float64(), mask=empty)
    values = values.astype(np.float64)
    # floating point: added in row order, as Spark adds them (no pairwise or compensated sum)
    sums = np.array([np.cumsum(values[a:b])[-1] if b > a else 0.0 for a, b in zip(lo.tolist(), hi.tolist())])
    if function == "sum":
        return pa.array(sums, pa.float64(), mask=empty)
    return pa.array(sums / np.where(empty, 1, counts), pa.float64(), mask=empty)


def _extreme(function: str, column: pa.Array, valid: np.ndarray, slices: Slices, empty: np.ndarray) -> pa.Array:
    """min or max of each window's values (NULLs skipped; NULL for a window with none)."""
    kind = column.type
    plain = column.cast(pa.int64()) if pa.types.is_timestamp(kind) else column
    values = plain.fill_null(0).to_numpy(zero_copy_only=False)
    pick: Callable[[np.ndarray], np.generic] = np.min if function == "min" else np.max
    out: list[object] = []
    for a, b, none in zip(slices.lo.tolist(), slices.hi.tolist(), empty.tolist()):
        if none:
            out.append(None)
        else:
            part = values[a:b]
            keep = valid[a:b]
            out.append(pick(part if keep.all() else part[keep]).item())
    found = pa.array(out, plain.type)
    return found.cast(kind) if pa.types.is_timestamp(kind) else found


def evaluate(items: Sequence[Item], rows: pa.Table, triggers: pa.Table, slices: Slices,
             column_of: Callable[[str], str]) -> pa.Table | None:
    """The results of a planned query: ``__idx`` then each item, one row per trigger, from the
    trigger rows ``triggers`` (``__idx`` and one column per placeholder, :func:`column_of` names
    them) and the rows of ``%%trows``; None when DuckDB must compute them."""
    columns: dict[str, pa.Array | pa.ChunkedArray] = {"__idx": triggers["__idx"]}
    for k, item in enumerate(items):
        if item.placeholder is not None:
            found: pa.Array | pa.ChunkedArray | None = triggers[column_of(item.placeholder)]
        else:
            assert item.function is not None
            name = None
            if item.column is not None:
                name = next((c for c in rows.column_names if c.lower() == item.column.lower()), None)
                if name is None:
                    return None
            found = aggregate(item.function, None if name is None else rows[name], slices)
        if found is None:
            return None
        columns[f"__c{k}"] = found
    return pa.table(columns)
