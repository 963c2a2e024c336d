"""Insert listeners: code that sees every write through the warehouse before and after its commit.

The warehouse does not know what listens: a higher layer registers a listener here (the insert
triggers of :mod:`airflow_stream_provider.streams.insert_triggers`). Every write path calls
:func:`before` once its rows are checked and before anything is committed, and :func:`after`
once they are committed. A listener refuses a write by raising from ``before`` (nothing is
written); a listener that fails after the commit leaves a notice (:func:`take_notices`) that the
caller shows (the CLI exits with status 3).

A write reaches listeners as :class:`Write` units, one per device and firing unit: a row of an
SQL INSERT, a batch of a load, a device's rows of a continuous query's or a stream's output. A
TDengine table is the device ``root.<database>.<table>`` (a subtable by its own name) and its
data columns are its measurements.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from airflow_stream_provider import model as m
from airflow_stream_provider.model.names import TBNAME

if TYPE_CHECKING:
    import pyarrow as pa

    from airflow_stream_provider.warehouse.catalog import TableInfo

_lock = threading.Lock()
_listeners: list[InsertListener] = []
_notices: list[str] = []


@dataclass(frozen=True)
class Write:
    """Rows written to one device: times in epoch microseconds, and each written measurement with
    its type and values (``None`` where the row has no point)."""

    device: m.SeriesPath
    micros: tuple[int, ...]
    columns: tuple[tuple[str, m.SeriesType, tuple[object, ...]], ...]
    table: bool = False  # a TDengine table's rows, not IoTDB points

    @property
    def rows(self) -> int:
        return len(self.micros)


class InsertListener(Protocol):
    def active(self) -> bool:
        """Whether the listener wants writes now (cheap: checked on every write)."""

    def before(self, writes: Sequence[Write]) -> list[str]:
        """Called before the commit; raise to refuse the write. Returns notices."""

    def after(self, writes: Sequence[Write]) -> list[str]:
        """Called after the commit. Returns notices (failures the caller reports)."""


def register(listener: InsertListener) -> None:
    with _lock:
        if listener not in _listeners:
            _listeners.append(listener)


def unregister(listener: InsertListener) -> None:
    with _lock:
        if listener in _listeners:
            _listeners.remove(listener)


def active() -> list[InsertListener]:
    """The listeners that want the writes now; empty in the common case, when nothing listens."""
    return [listener for listener in list(_listeners) if listener.active()]


def before(listening: Sequence[InsertListener], writes: Sequence[Write]) -> None:
    for listener in listening:
        _note(listener.before(writes))


def after(listening: Sequence[InsertListener], writes: Sequence[Write]) -> None:
    for listener in listening:
        _note(listener.after(writes))


def _note(notices: Iterable[str]) -> None:
    with _lock:
        _notices.extend(notices)


def take_notices() -> list[str]:
    """The notices left by listeners since the last call (a trigger that failed after its write)."""
    with _lock:
        out = list(_notices)
        _notices.clear()
    return out


# --- writes out of tables ---------------------------------------------------------------------


def series_type(dtype: m.DataType) -> m.SeriesType:
    """The IoTDB type a TDengine column shows as in a tablet."""
    name = dtype.name
    if name == "BOOL":
        return m.SeriesType.BOOLEAN
    if name in ("TINYINT", "SMALLINT", "INT", "TINYINT UNSIGNED", "SMALLINT UNSIGNED"):
        return m.SeriesType.INT32
    if name in ("BIGINT", "INT UNSIGNED", "BIGINT UNSIGNED", "TIMESTAMP"):
        return m.SeriesType.INT64
    if name == "FLOAT":
        return m.SeriesType.FLOAT
    if name in ("DOUBLE", "DECIMAL"):
        return m.SeriesType.DOUBLE
    return m.SeriesType.TEXT


def _python(array: pa.Array, kind: m.SeriesType) -> tuple[object, ...]:
    """An Arrow column as the plain values a tablet holds (timestamps as epoch ms, decimals as numbers)."""
    import pyarrow as pa  # here, not above: registering a listener (at DAG parsing) needs no Arrow

    if pa.types.is_timestamp(array.type):
        array = array.cast(pa.timestamp("ms", tz="UTC")).cast(pa.int64())
    elif pa.types.is_decimal(array.type):
        values = array.to_pylist()
        return tuple(None if v is None else int(v) if kind is m.SeriesType.INT64 else float(v) for v in values)
    elif pa.types.is_binary(array.type) or pa.types.is_large_binary(array.type):
        return tuple(None if v is None else v.hex() for v in array.to_pylist())
    return tuple(array.to_pylist())


def _epoch_micros(array: pa.Array) -> tuple[int, ...]:
    """:func:`~airflow_stream_provider.values.epoch_micros` of each timestamp of ``array``, as one
    Arrow cast (a write holds many)."""
    import pyarrow as pa

    return tuple(array.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64()).to_pylist())


def table_writes(info: TableInfo, rows: pa.Table, *, per_row: bool) -> list[Write]:
    """The writes of ``rows`` (in ``info``'s columns) to a TDengine table: one per subtable, or one
    per row with ``per_row`` (an SQL INSERT, as IoTDB fires an INSERT's rows one by one)."""
    metrics = [c for c in info.data_columns if c.role == "metric"]
    ts = info.columns[0].name
    if info.is_super:
        names = rows[TBNAME].to_pylist()
        devices = {name: m.SeriesPath(("root", info.db, name)) for name in set(names)}
    else:
        names = None
        device = m.SeriesPath(("root", info.db, info.name))
    micros = _epoch_micros(rows[ts])
    kinds = [series_type(c.dtype) for c in metrics]
    values = [_python(rows[c.name].combine_chunks(), kind) for c, kind in zip(metrics, kinds, strict=True)]
    out: list[Write] = []
    for name, indices in _groups(names, rows.num_rows, per_row):
        out.append(Write(
            devices[name] if names is not None else device,
            tuple(micros[i] for i in indices),
            tuple((c.name, kind, tuple(column[i] for i in indices))
                  for c, kind, column in zip(metrics, kinds, values, strict=True)), table=True))
    return out


def _groups(names: list | None, count: int, per_row: bool) -> Iterator[tuple[object, list[int]]]:
    if per_row:
        for i in range(count):
            yield (names[i] if names is not None else None), [i]
        return
    if names is None:
        yield None, list(range(count))
        return
    groups: dict[object, list[int]] = {}
    for i, name in enumerate(names):
        groups.setdefault(name, []).append(i)
    yield from groups.items()


def series_write(device: m.SeriesPath, times: pa.Array, columns: dict[str, pa.Array],
                 types: Callable[[str], m.SeriesType]) -> Write:
    """The write of IoTDB points to one device: ``columns`` by measurement, None meaning no point;
    a row without any point is no row."""
    values = [(name, types(name), _python(array, types(name))) for name, array in columns.items()]
    micros = _epoch_micros(times)
    keep = [i for i in range(len(micros)) if any(column[i] is not None for _, _, column in values)]
    if len(keep) < len(micros):
        micros = tuple(micros[i] for i in keep)
        values = [(name, kind, tuple(column[i] for i in keep)) for name, kind, column in values]
    return Write(device, micros, tuple(values))


def split_rows(write: Write) -> list[Write]:
    """One write per row, keeping in each only the measurements the row has a point of (an IoTDB
    INSERT row names its measurements; a NULL is no point)."""
    out = []
    for i, at in enumerate(write.micros):
        columns = tuple((name, kind, (values[i],)) for name, kind, values in write.columns if values[i] is not None)
        if columns:
            out.append(Write(write.device, (at,), columns, write.table))
    return out
