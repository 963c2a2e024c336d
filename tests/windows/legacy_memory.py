"""A trigger table in memory, with its versions and change feed as Delta keeps them, and a driver
that feeds a legacy group (:class:`~airflow_stream_provider.windows.legacy.LegacyGroup`) and
applies its events to an output the way the runtime does: without Spark, for exact tests of the
legacy rules and for the randomized comparison with an oracle."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable

import pandas as pd

from airflow_stream_provider.model.events import TriggerKind
from airflow_stream_provider.sql import parse
from airflow_stream_provider.windows.legacy import LegacyGroup
from airflow_stream_provider.windows.trigger_plan import TriggerPlan

S = 1_000_000  # microseconds per second


class MemoryTable:
    """Rows keyed by ``key`` (timestamps in microseconds); every write or delete is one version."""

    def __init__(self, columns: tuple[str, ...], key: tuple[str, ...] = ("ts",), ts: str = "ts") -> None:
        self.columns, self.key, self.ts = columns, key, ts
        self.versions: list[dict[tuple, dict]] = [{}]
        self.feed: list[dict] = []

    @property
    def version(self) -> int:
        return len(self.versions) - 1

    def write(self, rows: Iterable[dict]) -> int:
        """One INSERT: a row at an existing key replaces it; within the write the last one wins."""
        current = dict(self.versions[-1])
        last: dict[tuple, dict] = {}
        for row in rows:
            last[tuple(row[k] for k in self.key)] = {c: row.get(c) for c in self.columns}
        version = self.version + 1
        for key, row in last.items():
            if key in current:
                self.feed.append({**current[key], "_change_type": "update_preimage", "_commit_version": version})
                self.feed.append({**row, "_change_type": "update_postimage", "_commit_version": version})
            else:
                self.feed.append({**row, "_change_type": "insert", "_commit_version": version})
            current[key] = row
        self.versions.append(current)
        return version

    def delete(self, where: Callable[[dict], bool]) -> int:
        current = dict(self.versions[-1])
        version = self.version + 1
        for key, row in list(current.items()):
            if where(row):
                self.feed.append({**row, "_change_type": "delete", "_commit_version": version})
                del current[key]
        self.versions.append(current)
        return version

    def rows(self, version: int | None = None) -> pd.DataFrame:
        found = list(self.versions[self.version if version is None else version].values())
        return pd.DataFrame(found, columns=list(self.columns))

    def read(self, version: int, lo: int, hi: int, keep: Callable[[pd.DataFrame], pd.Series] | None = None
             ) -> pd.DataFrame:
        rows = self.rows(version)
        rows = rows[(rows[self.ts] >= lo) & (rows[self.ts] <= hi)]
        if keep is not None and len(rows):
            rows = rows[keep(rows)]
        return rows.reset_index(drop=True).astype({self.ts: "int64"})

    def changes(self, after: int, upto: int) -> pd.DataFrame:
        found = [r for r in self.feed if after < r["_commit_version"] <= upto]
        return pd.DataFrame(found, columns=[*self.columns, "_change_type", "_commit_version"])


def legacy_plan(text: str, columns: tuple[str, ...], key: tuple[str, ...] = ("ts",), ts: str = "ts") -> TriggerPlan:
    """The trigger plan of a legacy CREATE STREAM over a table of ``columns``."""
    [stmt] = parse(text)
    return TriggerPlan.build(stmt, "t", path="memory", columns=list(columns), ts_column=ts, row_key=key)


class Driver:
    """Feeds one group of a legacy stream from a :class:`MemoryTable`, keeping its state as JSON
    between calls as Spark does, and keeps its output as the runtime writes it: each window's
    aggregate (``agg`` over the rows the window counts), removed when the window is retracted."""

    def __init__(self, plan: TriggerPlan, table: MemoryTable, agg: Callable[[pd.DataFrame], tuple],
                 group: tuple = ()) -> None:
        self.plan, self.table, self.agg, self.group = plan, table, agg, group
        self.state = "{}"
        self.seen = 0
        self.now = 0
        self.output: dict[int, tuple] = {}
        self.events: list[pd.DataFrame] = []

    def _group_rows(self, rows: pd.DataFrame) -> pd.DataFrame:
        for name, value in zip(self.plan.keys, self.group):
            rows = rows[rows[name] == value]
        return rows

    def run(self, now: int | None = None, upto: int | None = None) -> pd.DataFrame:
        """Feed every change since the last run (up to version ``upto``) as one micro-batch."""
        if now is not None:
            self.now = now
        upto = self.table.version if upto is None else upto
        changes = self._group_rows(self.table.changes(self.seen, upto))
        self.seen = upto

        def read(version: int, lo: int, hi: int) -> pd.DataFrame:
            return self._group_rows(self.table.read(version, lo, hi))

        group = LegacyGroup(self.plan, self.group, json.loads(self.state), read, now=self.now)
        if len(changes):
            group.apply(changes.astype({self.table.ts: "int64"}).reset_index(drop=True))
        group.emit()
        self.state = json.dumps(group.state())
        events = group.all_events()
        if events is None:
            return pd.DataFrame()
        self.events.append(events)
        self.apply(events)
        return events

    def apply(self, events: pd.DataFrame) -> None:
        """Write and retract as the runtime does: per window, its latest event decides."""
        latest = events.drop_duplicates("trigger_id", keep="last")
        for ev in latest.itertuples(index=False):
            start = int(ev.window_start.value // 1000)
            if ev.event_type == "WINDOW_INVALIDATION":
                self.output.pop(start, None)
                continue
            if ev.event_type not in ("WINDOW_CLOSE", "WINDOW_UPDATE", "MAX_DELAY"):
                continue
            end = int(ev.window_end.value // 1000)
            inclusive = self.plan.spec.kind is not TriggerKind.INTERVAL
            rows = self._group_rows(self.table.rows(int(ev.table_version)))
            rows = rows[(rows["ts"] >= start) & ((rows["ts"] <= end) if inclusive else (rows["ts"] < end))]
            if isinstance(ev.adjust, str):
                adjust = json.loads(ev.adjust)
                keys = adjust["keys"]
                dropped = {tuple(k) for k in adjust["drop"]}
                rows = rows[[tuple(v) not in dropped for v in rows[keys].itertuples(index=False, name=None)]]
                rows = pd.concat([rows, pd.DataFrame(adjust["add"], columns=rows.columns)], ignore_index=True)
            self.output[start] = self.agg(self.plan_filter(rows))

    def plan_filter(self, rows: pd.DataFrame) -> pd.DataFrame:
        """PRE_FILTER (the legacy WHERE), as the computation applies it to %%trows."""
        if self.plan.pre_filter is None or rows.empty:
            return rows
        from airflow_stream_provider.sql.tdengine.dialect import parse_fragment
        from airflow_stream_provider.windows import expr

        return rows[expr.holds(parse_fragment(self.plan.pre_filter, clause="WHERE"), rows, "ts")]
