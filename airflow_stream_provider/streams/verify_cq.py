"""VERIFY CQ: an IoTDB continuous query's executions of a range computed again and compared with
its target series.

Each instant ``i`` the query has executed (from its first up to ``last_fired``) whose execution
range ``[i - start_offset, i - end_offset)`` starts in ``[FROM, TO)`` runs again over the series
as they are now, its results shaped into points of the INTO series exactly as an execution writes
them, but kept instead of written. Executions whose ranges overlap write the same times again, so
a later instant's point replaces an earlier one's, as it did when they ran. The target series'
points in the ranges are then compared with them, point by point: ``missing`` (computed, not in
the series), ``extra`` (in the series inside a range, not computed), ``different`` (the values).
REPAIR writes the computed points of the executions that differ again (the instants' own write)
and deletes the extra ones.

The trigger id of a point is ``cq:<instant in microseconds>``; its group is the target series.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable

from airflow_stream_provider import model as m
from airflow_stream_provider.model.names import TBNAME
from airflow_stream_provider.plan.state import StreamState
from airflow_stream_provider.streams.cq import resample_schedule_of
from airflow_stream_provider.streams.runtime import RunReport
from airflow_stream_provider.streams.store import StoredStream, StreamStore, run_lock
from airflow_stream_provider.streams.verify_report import DIFFERENT, EXTRA, MISSING, Difference, VerifyReport, same
from airflow_stream_provider.values import epoch_micros, instant
from airflow_stream_provider.warehouse import Warehouse
from airflow_stream_provider.warehouse.series.expressions import now_micros
from airflow_stream_provider.warehouse.series.query import QueryRunner, TimeRange
from airflow_stream_provider.warehouse.series.statements import write_into
from airflow_stream_provider.warehouse.series.store import TS, SeriesStore


@dataclass(frozen=True)
class _Point:
    value: object
    trigger_id: str  # the execution that wrote it


class _Kept:
    """Where an execution's points go instead of the series: kept, by series and time."""

    def __init__(self, trigger_id: str, span: tuple[int, int]) -> None:
        self.trigger_id = trigger_id
        self.span = span  # the execution's range, microseconds
        self.points: dict[tuple[m.SeriesPath, str], dict[int, _Point]] = {}
        self.batches: list[tuple[m.SeriesPath, pa.Array, dict[str, pa.Array]]] = []

    def write_points(self, batches: Sequence[tuple[m.SeriesPath, pa.Array, dict[str, pa.Array]]],
                     aligned: bool = False, *, per_row: bool = False) -> int:
        for device, times, values in batches:
            self.batches.append((device, times, values))
            stamps = [epoch_micros(t) for t in times.cast(pa.timestamp("us", tz="UTC")).to_pylist()]
            for name, array in values.items():
                series = self.points.setdefault((device, name), {})
                for at, value in zip(stamps, array.to_pylist(), strict=True):
                    if value is not None:
                        series[at] = _Point(value, self.trigger_id)
        return 0


def verify(warehouse: Warehouse, stored: StoredStream, store: StreamStore, start: datetime, end: datetime, *,
           repair: bool, say: Callable[[str], None]) -> VerifyReport:
    """VERIFY CQ over the executions whose ranges start in ``[start, end)``; with ``repair``, those
    that differ are executed again and the extra points deleted, then it verifies again."""
    report, kept = _verify(warehouse, stored, store.load_state(stored.db, stored.name), start, end, say)
    if repair and report.differences:
        first = report
        with run_lock(stored):
            removed = _repair(warehouse, first, kept, say)
        report, _ = _verify(warehouse, stored, store.load_state(stored.db, stored.name), start, end, say)
        report.repaired, report.removed = first.differences, removed
        report.repair = RunReport(stored.qualified, triggers=len({d.trigger_id for d in first.differences
                                                                  if d.status != EXTRA}))
    return report


def _verify(warehouse: Warehouse, stored: StoredStream, state: StreamState, start: datetime, end: datetime,
            say: Callable[[str], None]) -> tuple[VerifyReport, list[_Kept]]:
    series = stored.statement.series
    trig = stored.statement.trigger
    assert series is not None and isinstance(trig, m.ResampleTrigger)
    report = VerifyReport(stored.qualified, start, end)
    if state.last_fired is None:
        return report, []
    schedule = resample_schedule_of(stored, state)
    begin, stop = trig.start_offset.to_timedelta(), trig.end_offset.to_timedelta()
    instants = [i for i in schedule.instants(schedule.first - timedelta(microseconds=1), state.last_fired)
                if start <= i - begin < end]
    points = SeriesStore(warehouse.catalog)
    kept: list[_Kept] = []
    ranges: list[tuple[int, int]] = []
    for at in instants:
        lo, hi = epoch_micros(at - begin), epoch_micros(at - stop)
        runner = QueryRunner(points, warehouse.spark, series.query, range_=TimeRange(lo, hi), now=now_micros())
        into = _Kept(f"cq:{epoch_micros(at)}", (lo, hi))
        write_into(into, series.query, runner.run())
        kept.append(into)
        ranges.append((lo, hi))
    say(f"{series.cq_id}: {len(instants)} execution(s) computed again")
    expected: dict[tuple[m.SeriesPath, str], dict[int, _Point]] = {}
    for into in kept:  # a later execution's point replaces an earlier one's
        for target, found in into.points.items():
            expected.setdefault(target, {}).update(found)
    report.triggers = len(instants)
    report.rows = sum(len(v) for v in expected.values())
    actual = {target: _series_points(points, target, ranges) for target in expected}
    actual.update(_other_targets(points, series.query, ranges, expected))
    report.differences = _compare(expected, actual)
    report.compared = sum(len(v) for v in actual.values())
    report.differences.sort(key=lambda d: (d.ts, d.table, d.status))
    return report, kept


def _series_points(points: SeriesStore, target: tuple[m.SeriesPath, str],
                   ranges: list[tuple[int, int]]) -> dict[int, object]:
    """The points of series ``target`` (device, measurement) inside any of ``ranges``."""
    device, name = target
    found = points.expand([device.child(name)])
    if not found or not ranges:
        return {}
    s = found[0]
    table = DeltaTable(str(points.info(s.database).path)).to_pyarrow_table(
        columns=[TS, s.column], filters=[(TBNAME, "=", str(device))])
    table = table.filter(pc.is_valid(table[s.column]))
    out: dict[int, object] = {}
    for at, value in zip(table[TS].to_pylist(), table[s.column].to_pylist(), strict=True):
        micros = epoch_micros(at)
        if any(lo <= micros < hi for lo, hi in ranges):
            out[micros] = value
    return out


def _other_targets(points: SeriesStore, query: m.SeriesQuery, ranges: list[tuple[int, int]],
                   expected: dict) -> dict[tuple[m.SeriesPath, str], dict[int, object]]:
    """The INTO series no execution computed a point of (every point of theirs in the ranges is extra)."""
    out = {}
    for item in query.into:
        if any(node.startswith(("$", "::")) or "${" in node for node in item.device.nodes):
            continue  # a placeholder device: the series it stands for are those computed
        for name in item.measurements:
            target = (item.device, name)
            if target not in expected and "$" not in name and "::" not in name:
                found = _series_points(points, target, ranges)
                if found:
                    out[target] = found
    return out


def _compare(expected: dict[tuple[m.SeriesPath, str], dict[int, _Point]],
             actual: dict[tuple[m.SeriesPath, str], dict[int, object]]) -> list[Difference]:
    found = []
    for target in expected.keys() | actual.keys():
        device, name = target
        label = str(device.child(name))
        mine, theirs = expected.get(target, {}), actual.get(target, {})
        for at in mine.keys() | theirs.keys():
            when = instant(at)
            point = mine.get(at)
            trigger = point.trigger_id if point is not None else ""
            if at not in theirs:
                assert point is not None
                found.append(Difference(MISSING, label, when, trigger, label, (name,), None, (point.value,), target))
            elif point is None:
                found.append(Difference(EXTRA, label, when, "", label, (name,), (theirs[at],), None, target))
            elif not same(point.value, theirs[at]):
                found.append(Difference(DIFFERENT, label, when, trigger, label, (name,), (theirs[at],),
                                        (point.value,), target))
    return found


def _repair(warehouse: Warehouse, found: VerifyReport, kept: list[_Kept], say: Callable[[str], None]) -> int:
    """Write again the points of the executions that differ, in instant order; delete the extra
    points. The extra points deleted."""
    points = SeriesStore(warehouse.catalog)
    extra = [d for d in found.differences if d.status == EXTRA]
    for d in extra:
        device, name = d.key
        series = points.expand([device.child(name)])
        if series:
            points.delete_points(series, d.ts, d.ts)
    wrong = {d.trigger_id for d in found.differences if d.status != EXTRA}
    spans = [into.span for into in kept if into.trigger_id in wrong]
    # (an execution overlapping one written again is written again after it, as it ran after it)
    again = [into for into in kept if any(lo < into.span[1] and into.span[0] < hi for lo, hi in spans)]
    for into in again:
        points.write_points(into.batches)
    say(f"wrote the points of {len(again)} execution(s) again, deleted {len(extra)} extra point(s)")
    return len(extra)
