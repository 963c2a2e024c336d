"""Deferrable triggers run by Airflow's triggerer: they wait without holding a worker slot.

Both poll small files only (no Spark, no JVM), in a thread so the triggerer's event loop never
blocks, and both serialize to JSON-safe keyword arguments.

- :class:`CheckpointCommitTrigger` fires when the stream's detector has committed a micro-batch
  past the last one consumed (``<checkpoint>/commits/<N>`` exists exactly when batch N is
  committed, its events already appended to the event table). When no process hosts the live
  detector (the stream node holds its lock), it also fires when the trigger table has a Delta
  version newer than the last detection, so that the compute task detects in batch.
- :class:`EventTimeTrigger` fires when the trigger table's latest event time minus WATERMARK
  reaches an instant (SLIDING triggers), read from Delta's file statistics.

While the stream is stopped (STOP STREAM) neither fires.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_stream_provider.streams.store import detector_hosted

_COMMIT = re.compile(r"^\d+$")
_LOG_ENTRY = re.compile(r"^(\d{20})\.json$")


def _state(state_dir: Path) -> dict:
    try:
        return json.loads((state_dir / "stream.json").read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def last_commit(checkpoint: Path) -> tuple[int, int | None] | None:
    """The last committed batch of a Structured Streaming checkpoint and its
    ``nextBatchWatermarkMs``, or None before the first commit."""
    try:
        names = [int(p.name) for p in (checkpoint / "commits").iterdir() if _COMMIT.match(p.name)]
    except FileNotFoundError:
        return None
    if not names:
        return None
    batch = max(names)
    watermark = None
    try:
        lines = (checkpoint / "commits" / str(batch)).read_text(encoding="utf-8").splitlines()
        watermark = json.loads(lines[1]).get("nextBatchWatermarkMs") if len(lines) > 1 else None
    except (OSError, json.JSONDecodeError):
        pass
    return batch, watermark


def latest_version(table: Path) -> int | None:
    """The latest version of a Delta table, from the names in its ``_delta_log``."""
    try:
        versions = [int(m.group(1)) for p in (table / "_delta_log").iterdir() if (m := _LOG_ENTRY.match(p.name))]
    except FileNotFoundError:
        return None
    return max(versions) if versions else None


def check_windows(state_dir: str | Path, table: str | Path | None = None) -> dict | None:
    """What a window stream's sensor resumes with, or None while there is nothing to do."""
    state_dir = Path(state_dir)
    state = _state(state_dir)
    if not state or state.get("stopped"):
        return None
    consumed = int(state.get("consumed_batch", -1))
    committed = last_commit(state_dir / "checkpoint")
    if committed is not None and committed[0] > consumed:
        return {"status": "committed", "from_batch": consumed + 1, "to_batch": committed[0],
                "watermark_ms": committed[1]}
    if table is not None and not detector_hosted(state_dir):
        version = latest_version(Path(table))
        seen = state.get("detected_version", state.get("created_version"))
        if version is not None and (seen is None or version > seen):
            return {"status": "detect", "version": version, "from_batch": consumed + 1, "to_batch": None}
    return None


def max_event_time(table: str | Path, ts_column: str) -> datetime | None:
    """The latest event time of a Delta table, from its files' statistics (read only where a file
    has none)."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        dt = DeltaTable(str(table))
    except TableNotFoundError:
        return None
    actions = dt.get_add_actions(flatten=True)
    key = f"max.{ts_column}"
    if actions.num_rows == 0:
        return None
    if key in actions.schema.names and actions.column(key).null_count == 0:
        values = [v for v in actions.column(key).to_pylist() if v is not None]
    else:
        import pyarrow.compute as pc

        values = [pc.max(dt.to_pyarrow_table(columns=[ts_column]).column(ts_column)).as_py()]
    values = [v for v in values if v is not None]
    if not values:
        return None
    latest = max(values)
    if isinstance(latest, str):
        latest = datetime.fromisoformat(latest)
    return latest if latest.tzinfo else latest.replace(tzinfo=UTC)


class CheckpointCommitTrigger(BaseTrigger):
    """Waits for new window events of a stream (see the module's text)."""

    def __init__(self, state_dir: str, table: str | None = None, poll_interval: float = 0.5) -> None:
        super().__init__()
        self.state_dir = str(state_dir)
        self.table = str(table) if table is not None else None
        self.poll_interval = float(poll_interval)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"state_dir": self.state_dir, "table": self.table, "poll_interval": self.poll_interval})

    def check(self) -> dict | None:
        return check_windows(self.state_dir, self.table)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        async for event in _poll(self.check, self.poll_interval):
            yield event


class EventTimeTrigger(BaseTrigger):
    """Waits until the trigger table's event time minus ``watermark_s`` reaches ``instant``."""

    def __init__(self, state_dir: str, table: str, ts_column: str, instant: str, watermark_s: float = 0.0,
                 poll_interval: float = 1.0) -> None:
        super().__init__()
        self.state_dir = str(state_dir)
        self.table = str(table)
        self.ts_column = ts_column
        self.instant = instant
        self.watermark_s = float(watermark_s)
        self.poll_interval = float(poll_interval)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"state_dir": self.state_dir, "table": self.table, "ts_column": self.ts_column,
                 "instant": self.instant, "watermark_s": self.watermark_s, "poll_interval": self.poll_interval})

    def check(self) -> dict | None:
        if _state(Path(self.state_dir)).get("stopped"):
            return None
        latest = max_event_time(self.table, self.ts_column)
        if latest is None:
            return None
        if latest.timestamp() - self.watermark_s >= datetime.fromisoformat(self.instant).timestamp():
            return {"status": "passed", "event_time": latest.isoformat(), "instant": self.instant}
        return None

    async def run(self) -> AsyncIterator[TriggerEvent]:
        async for event in _poll(self.check, self.poll_interval):
            yield event


async def _poll(check, interval: float) -> AsyncIterator[TriggerEvent]:  # type: ignore[no-untyped-def]
    """Run ``check`` in a thread every ``interval`` seconds until it finds something; yield that once."""
    while True:
        found = await asyncio.to_thread(check)
        if found is not None:
            yield TriggerEvent(found)
            return
        await asyncio.sleep(interval)
