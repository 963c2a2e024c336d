"""The soak's checks: outputs, notifications and PERIOD instants against the oracle, and the streams'
status (see the package's docstring)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from bench.soak.cluster import Receiver
from bench.soak.oracle import Windows, epoch_ms, oracle_windows
from bench.soak.spec import DB, FOREIGN, IN_FLIGHT_MS, PERIOD_S, STREAMS, Soaked

if TYPE_CHECKING:
    from airflow_stream_provider.warehouse import Warehouse


@dataclass
class Findings:
    windows: int = 0  # oracle windows checked in output tables
    foreign: int = 0  # of which over the attached table the foreign writer feeds
    notifications: int = 0  # oracle windows checked in notifications
    instants: int = 0  # PERIOD instants checked
    lost: int = 0
    duplicated: int = 0
    stale: int = 0  # results of windows that are gone, never invalidated
    invalidated: int = 0  # output rows of windows that are gone, correctly invalidated
    #: (stream, group, start) of those rows: TDengine keeps them, so VERIFY reports them as extra
    invalidated_keys: set[tuple] = field(default_factory=set)
    resent: int = 0  # messages received again (same messageId)
    unreadable: int = 0
    failed: list[str] = field(default_factory=list)
    pending: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.stale or self.failed or self.pending or self.unreadable)


def foreign_table(home: Path) -> Path:
    """Where the foreign writer keeps the attached table: outside the warehouse."""
    return home / "owner" / "readings"


def foreign_rows(home: Path) -> pd.DataFrame:
    """The attached table's final rows, read with delta-rs, under the names the streams use."""
    return _delta(foreign_table(home)).rename(columns={"event_time": "ts", "device_id": "tbname", "site": "loc"})


def _delta(path: Path) -> pd.DataFrame:
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return DeltaTable(str(path)).to_pandas()
    except TableNotFoundError:
        return pd.DataFrame()


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None or (isinstance(a, float) and math.isnan(a)) or (isinstance(b, float) and math.isnan(b)):
        return (a is None or math.isnan(a)) and (b is None or math.isnan(b))
    return abs(a - b) <= 1e-9 * max(1.0, abs(b))


def _matches(got: tuple, want: tuple) -> bool:
    return got[0] == want[0] and _same(got[1], want[1]) and _same(got[2], want[2]) and int(got[3]) == want[3]


def _group_names(home: Path, spec: Soaked) -> dict[str, str | None]:
    """group id -> the group (a subtable name, or None without PARTITION BY), from the stream's
    event log."""
    events = _delta(home / "state" / DB / spec.name / "events")
    if events.empty or not spec.by_tbname:
        return {}
    out = {}
    for gid, keys in zip(events["group_id"].astype(str), events["group_keys"]):
        value = json.loads(keys) if isinstance(keys, str) else keys
        if isinstance(value, dict):
            value = list(value.values())
        out[gid] = value[0] if isinstance(value, list) and value else value
    return out


def _invalidated_in_log(home: Path, spec: Soaked, groups: dict[str, str | None]) -> set[tuple]:
    """(group, start) of the windows whose latest event in the stream's event log is an invalidation."""
    events = _delta(home / "state" / DB / spec.name / "events")
    if events.empty:
        return set()
    events = events.sort_values(["batch_id", "seq"]).drop_duplicates("trigger_id", keep="last")
    gone = events[events["event_type"] == "WINDOW_INVALIDATION"]
    return {(groups.get(str(g)) if spec.by_tbname else None, int(s))
            for g, s in zip(gone["group_id"], epoch_ms(gone["window_start"]))}


def notified(messages: list[dict], spec: Soaked, groups: dict[str, str | None],
             findings: Findings) -> dict[tuple, tuple[str, dict | None]]:
    """(group, start) -> (the last event type, its result) of every window of ``spec`` notified;
    a WINDOW_CLOSE repeated for one triggerId without an invalidation between counts as duplicated."""
    last: dict[str, tuple[str, tuple, dict | None]] = {}
    for msg in messages:
        for stream in msg["streams"]:
            if stream["streamName"].split(".")[-1] != spec.name:
                continue
            for ev in stream["events"]:
                key = (groups.get(str(ev.get("groupId"))) if spec.by_tbname else None, int(ev["windowStart"]))
                before = last.get(ev["triggerId"])
                if before is not None and before[0] == ev["eventType"] == "WINDOW_CLOSE":
                    findings.duplicated += 1
                    findings.problems.append(f"{spec.name}: WINDOW_CLOSE of {key} sent twice ({ev['triggerId']})")
                last[ev["triggerId"]] = (ev["eventType"], key, ev.get("result"))
    return {key: (kind, result) for kind, key, result in last.values()}


def check(home: Path, receiver: Receiver, status: list[dict]) -> Findings:
    """Every check of the module's docstring, on the tables and the notifications as they are now."""
    findings = Findings()
    tables = {"m": _delta(home / "warehouse" / DB / "m"), FOREIGN: foreign_rows(home)}
    for table in tables.values():
        table["t"] = epoch_ms(table["ts"])
    raw, findings.unreadable = receiver.messages()
    messages, seen = [], set()
    for msg in raw:
        if msg["messageId"] in seen:
            findings.resent += 1
            continue
        seen.add(msg["messageId"])
        messages.append(msg)
    for spec in STREAMS:
        if spec.kind == "period":
            _check_period(home, spec, findings)
            continue
        want = oracle_windows(spec, tables[spec.over])
        if spec.over == FOREIGN and spec.kind != "notify":
            findings.foreign += len(want)
        groups = _group_names(home, spec)
        sent = notified(messages, spec, groups, findings) if spec.notify or spec.kind == "notify" else None
        if spec.kind != "notify":
            _check_output(home, spec, want, sent, groups, findings)
        if sent is not None:
            _check_notified(spec, want, sent, findings)
    for row in status:
        if row["status"] == "failed":
            findings.failed.append(f"{row['stream_name']}: {row.get('last_error')}")
        findings.pending += int(row.get("notify_pending") or 0)
    return findings


def _check_output(home: Path, spec: Soaked, want: Windows, sent: dict | None, groups: dict,
                  findings: Findings) -> None:
    out = _delta(home / "warehouse" / DB / f"{spec.name}_out")
    got: dict[tuple, tuple] = {}
    if not out.empty:
        group = out["tag_tbname"] if spec.by_tbname else pd.Series([None] * len(out))
        ends = epoch_ms(out["we"]) if "we" in out else pd.Series([None] * len(out))
        for g, start, end, a, mx, n in zip(group, epoch_ms(out["ts"]), ends, out["a"], out["mx"], out["n"]):
            key = (g, int(start))
            if key in got:
                findings.duplicated += 1
                findings.problems.append(f"{spec.name}: two output rows for {key}")
            got[key] = (None if end is None or pd.isna(end) else int(end), None if pd.isna(a) else float(a),
                        None if pd.isna(mx) else float(mx), int(n))
    for key, value in want.items():
        findings.windows += 1
        if key not in got:
            findings.lost += 1
            findings.problems.append(f"{spec.name}: window {_show(key)} missing from the output, expected {value}")
        elif not _matches(got[key], value):
            findings.lost += 1
            findings.problems.append(f"{spec.name}: window {_show(key)} is {got[key]}, expected {value}")
    extra = set(got) - set(want)
    if extra:
        gone = ({k for k, (kind, _r) in sent.items() if kind == "WINDOW_INVALIDATION"} if sent is not None
                else _invalidated_in_log(home, spec, groups))
        for key in sorted(extra, key=str):
            if key in gone:
                findings.invalidated += 1
                findings.invalidated_keys.add((spec.name, *key))
            else:
                findings.stale += 1
                findings.problems.append(f"{spec.name}: output row {_show(key)} {got[key]} is no window of the "
                                         "final table, and was not invalidated")


def _check_notified(spec: Soaked, want: Windows, sent: dict, findings: Findings) -> None:
    for key, value in want.items():
        findings.notifications += 1
        kind, result = sent.get(key, (None, None))
        if kind != "WINDOW_CLOSE":
            findings.lost += 1
            findings.problems.append(f"{spec.name}: window {_show(key)} not notified as closed (last: {kind})")
            continue
        if result is not None and not _matches((value[0], result.get("a"), result.get("mx"), result.get("n")),
                                               (value[0], *value[1:])):
            findings.lost += 1
            findings.problems.append(f"{spec.name}: window {_show(key)} notified with {result}, expected {value}")
    for key, (kind, _result) in sent.items():
        if kind == "WINDOW_CLOSE" and key not in want:
            findings.stale += 1
            findings.problems.append(f"{spec.name}: window {_show(key)} notified closed, but the final table has "
                                     "no such window and it was not invalidated")


def _check_period(home: Path, spec: Soaked, findings: Findings) -> None:
    from deltalake import DeltaTable

    out = _delta(home / "warehouse" / DB / f"{spec.name}_out")
    if out.empty:
        findings.problems.append(f"{spec.name}: no instant computed")
        findings.lost += 1
        return
    instants = sorted(int(t) for t in epoch_ms(out["ts"]))
    if len(set(instants)) != len(instants):
        findings.duplicated += len(instants) - len(set(instants))
        findings.problems.append(f"{spec.name}: an instant was written twice")
    for t in instants:
        if t % (PERIOD_S * 1000):
            findings.lost += 1
            findings.problems.append(f"{spec.name}: instant {t} is not on the period")
    path = str(home / "warehouse" / DB / "m")
    history = [(int(h["version"]), int(h["timestamp"])) for h in DeltaTable(path).history()]

    def version_at(ms: int) -> int:
        return max((v for v, at in history if at <= ms), default=-1)

    import pyarrow as pa

    changes = pa.RecordBatchReader.from_stream(DeltaTable(path).load_cdf(starting_version=0)).read_all().to_pandas()
    written = changes[changes["_change_type"].isin(["insert", "update_postimage"])]
    per_version = written.groupby("_commit_version").size()
    counts = {int(t): int(n) for t, n in zip(epoch_ms(out["ts"]), out["n"])}

    def rows(lo: int, hi: int) -> int:
        """Rows written in versions (lo, hi]."""
        return int(per_version[(per_version.index > lo) & (per_version.index <= hi)].sum())

    def bounds(at: int) -> tuple[int, int]:
        """The versions an instant's run may have seen last: a commit stamped up to IN_FLIGHT_MS before
        the instant may have landed after the run looked."""
        return version_at(at - IN_FLIGHT_MS), version_at(at)

    for prev, t in zip(instants, instants[1:]):
        (lo_early, lo_late), (hi_early, hi_late) = bounds(prev), bounds(t)
        findings.instants += 1
        if not rows(lo_late, hi_early) <= counts[t] <= rows(lo_early, hi_late):
            findings.lost += 1
            findings.problems.append(
                f"{spec.name}: instant {_show((None, t))} counted {counts[t]} rows; versions ({lo_early}..{lo_late}, "
                f"{hi_early}..{hi_late}] wrote {rows(lo_late, hi_early)} to {rows(lo_early, hi_late)}")
    if len(instants) > 2:  # the instants after the first count each row written between them once
        total = sum(counts[t] for t in instants[1:])
        (lo_early, lo_late), (hi_early, hi_late) = bounds(instants[0]), bounds(instants[-1])
        if not rows(lo_late, hi_early) <= total <= rows(lo_early, hi_late):
            findings.lost += 1
            findings.problems.append(f"{spec.name}: the instants after the first counted {total} rows in all; "
                                     f"{rows(lo_late, hi_early)} to {rows(lo_early, hi_late)} were written")


def _show(key: tuple) -> str:
    group, start = key
    at = datetime.fromtimestamp(start / 1000, UTC).strftime("%m-%d %H:%M:%S")
    return f"{group}@{at}" if group else at


def stream_status(wh: Warehouse) -> list[dict]:
    from airflow_stream_provider import statements

    result = list(statements.run(wh, f"SELECT * FROM information_schema.ins_streams WHERE db_name = '{DB}'"))[-1]
    assert result.table is not None
    return result.table.to_pylist()

