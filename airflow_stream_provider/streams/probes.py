"""Facts about a stream read from small files, without Spark: its detector's last committed batch,
a Delta table's latest version and latest event time. The deferrable triggers poll these in the
triggerer, and SHOW STREAMS reads them too.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from airflow_stream_provider import storage
from airflow_stream_provider.plan.state import StreamState
from airflow_stream_provider.storage import Location, export_credentials, is_remote
from airflow_stream_provider.streams.store import StoredStream, detector_hosted
from airflow_stream_provider.warehouse import writer
from airflow_stream_provider.windows.checkpoint import ENGINE, EVENTS_MARK

if TYPE_CHECKING:
    import pandas as pd

_COMMIT = re.compile(r"^\d+$")
_LOG_ENTRY = re.compile(r"^(\d{20})\.json$")


def stream_state(state_dir: Path) -> StreamState | None:
    """The stream's state as its ``stream.json`` holds it; None while there is none (or it cannot be
    read: a probe only waits, the run that follows reports a damaged state)."""
    try:
        payload = json.loads((state_dir / "stream.json").read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return StreamState.from_json(payload) if isinstance(payload, dict) and payload else None


def checkpoint_id(checkpoint: Location) -> str | None:
    """The identity of a Structured Streaming checkpoint: the query id Spark writes in its
    ``metadata`` file when the checkpoint is made, or None when there is none (or it is unreadable)."""
    try:
        value = json.loads(storage.read_text(storage.join(checkpoint, "metadata")).splitlines()[0]).get("id")
    except (FileNotFoundError, NotADirectoryError, IndexError, ValueError, AttributeError):
        return None
    return str(value) if value else None


def last_commit(checkpoint: Location) -> tuple[int, int | None] | None:
    """The last committed batch of a Structured Streaming checkpoint (a folder, or a prefix on the
    object store) and its ``nextBatchWatermarkMs``, or None before the first commit."""
    commits = storage.join(checkpoint, "commits")
    try:
        names = [int(name) for name in storage.names(commits) if _COMMIT.match(name)]
    except FileNotFoundError:
        return None
    if not names:
        return None
    batch = max(names)
    watermark = None
    try:
        lines = storage.read_text(storage.join(commits, str(batch))).splitlines()
        watermark = json.loads(lines[1]).get("nextBatchWatermarkMs") if len(lines) > 1 else None
    except (OSError, json.JSONDecodeError):
        pass
    return batch, watermark


def last_event_batch(checkpoint: Location) -> int | None:
    """The last batch of a live detector's checkpoint that found events (-1: none yet); None for a
    checkpoint that does not record it (then every committed batch may hold some)."""
    try:
        text = storage.read_text(storage.join(checkpoint, EVENTS_MARK)).strip()
    except FileNotFoundError:
        return -1 if checkpoint_id(checkpoint) is not None and _engine(checkpoint) == ENGINE else None
    except OSError:
        return None
    return int(text) if text.lstrip("-").isdigit() else None


def batch_version(checkpoint: Location, batch: int) -> int | None:
    """The trigger table's version a live detector's batch ``batch`` read up to (its offset's
    ``last``), or None when the checkpoint no longer keeps that offset (or has none)."""
    try:
        value = json.loads(storage.read_text(storage.join(checkpoint, "offsets", str(batch)))).get("last")
    except (FileNotFoundError, NotADirectoryError, ValueError, AttributeError):
        return None
    return int(value) if value is not None else None


def _engine(checkpoint: Location) -> str | None:
    try:
        return json.loads(storage.read_text(storage.join(checkpoint, "metadata")).splitlines()[0]).get("engine")
    except (OSError, IndexError, ValueError, AttributeError):
        return None


def open_delta(location: Location) -> DeltaTable | None:
    """The Delta table at a folder or an ``s3://`` URL (with the object store's credentials in this
    process), or None when there is none."""
    if is_remote(location):
        export_credentials()
    try:
        return DeltaTable(str(location))
    except TableNotFoundError:
        return None


def latest_version(table: Location) -> int | None:
    """The latest version of a Delta table, from the names in its ``_delta_log`` (from its log on
    an object store)."""
    if is_remote(table):
        found = open_delta(table)
        return found.version() if found is not None else None
    table = Path(table)
    try:
        versions = [int(m.group(1)) for p in (table / "_delta_log").iterdir() if (m := _LOG_ENTRY.match(p.name))]
    except FileNotFoundError:
        return None
    return max(versions) if versions else None


def node_hosted(state_dir: Path) -> bool:
    """Whether the stream node hosts the stream's detector now: it holds the detector lock and says
    so in ``detector.json`` (a task detecting for itself holds the lock too, for a moment)."""
    return node_host(state_dir) is not None


def node_host(state_dir: Path) -> int | None:
    """The process of the stream node that hosts the stream's detector now (None: none does; see
    :func:`node_hosted`)."""
    if not detector_hosted(state_dir):
        return None
    try:
        report = json.loads((state_dir / "detector.json").read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    if report.get("host") != "node" or report.get("status") != "running":
        return None
    return int(report.get("pid") or 0)


def check_windows(state_dir: str | Path, table: str | Path | None = None,
                  checkpoint: Location | None = None) -> dict | None:
    """What a window stream's sensor resumes with, or None while there is nothing to do.
    ``checkpoint`` is the detector's (default: ``checkpoint/`` in the state folder)."""
    state_dir = Path(state_dir)
    state = stream_state(state_dir)
    if state is None or state.stopped:
        return None
    consumed = -1 if state.consumed_batch is None else state.consumed_batch
    checkpoint = checkpoint if checkpoint is not None else state_dir / "checkpoint"
    committed = last_commit(checkpoint)
    if committed is not None and committed[0] > consumed:
        with_events = last_event_batch(checkpoint)
        if with_events is None or with_events > consumed:  # (None: a checkpoint that does not say)
            return {"status": "committed", "from_batch": consumed + 1, "to_batch": committed[0],
                    "watermark_ms": committed[1]}
    if table is not None and not detector_hosted(state_dir):
        version = latest_version(table)
        seen = state.detected_version if state.detected_version is not None else state.created_version
        if version is not None and (seen is None or version > seen):
            return {"status": "detect", "version": version, "from_batch": consumed + 1, "to_batch": None}
    return None


def max_event_time(table: str | Path, ts_column: str) -> datetime | None:
    """The latest event time of a Delta table, from its files' statistics (read only where a file
    has none). A local table is the one the writer keeps open, brought up to date."""
    if is_remote(table):
        dt = open_delta(table)
        return None if dt is None else _max_time(dt, ts_column)
    try:
        with writer.latest(table) as kept:
            return _max_time(kept, ts_column)
    except TableNotFoundError:
        return None


#: the Delta operations that add rows to a table (its creation, deletes, vacuums and the like add none)
ROW_WRITES = frozenset({"WRITE", "MERGE", "STREAMING UPDATE", "CREATE TABLE AS SELECT", "REPLACE TABLE AS SELECT"})
#: the commits :func:`last_write_at` looks back over
_RECENT_COMMITS = 50


def last_write_at(table: Location) -> datetime | None:
    """When (wall clock) rows were last written to a Delta table: the time of its latest commit that
    added rows, among its last :data:`_RECENT_COMMITS` (None: none of them did)."""
    dt = open_delta(table)
    if dt is None:
        return None
    for entry in dt.history(_RECENT_COMMITS):  # newest first
        if str(entry.get("operation", "")).upper() in ROW_WRITES and entry.get("timestamp") is not None:
            return datetime.fromtimestamp(int(entry["timestamp"]) / 1000, UTC)
    return None


def _max_time(dt: DeltaTable, ts_column: str) -> datetime | None:
    # statistics by logical names, rows by the kernel's scan: a table with column mapping or deletion
    # vectors is not its files as they are (the snapshot reader needs pyspark's types: imported here,
    # as the triggerer imports this module)
    from airflow_stream_provider.warehouse import snapshots
    from airflow_stream_provider.warehouse.features import features_of

    actions = snapshots.logical_stats(pa.table(dt.get_add_actions(flatten=True)), features_of(dt))
    key = f"max.{ts_column}"
    if actions.num_rows == 0:
        return None
    if key in actions.schema.names and actions.column(key).null_count == 0:
        values = [v for v in actions.column(key).to_pylist() if v is not None]
    else:
        values = [pc.max(snapshots.table_rows(dt, [ts_column]).column(ts_column)).as_py()]
    values = [v for v in values if v is not None]
    if not values:
        return None
    latest = max(values)
    if isinstance(latest, str):
        latest = datetime.fromisoformat(latest)
    return latest if latest.tzinfo else latest.replace(tzinfo=UTC)


def read_events(path: Location, after_batch: int, upto_batch: int | None = None) -> pd.DataFrame:
    import pandas as pd  # (the triggerer and Airflow's DAG parsing import this module, and need no pandas)

    table = open_delta(path)
    if table is None:
        return pd.DataFrame()
    filters = [("batch_id", ">", after_batch)] + ([("batch_id", "<=", upto_batch)] if upto_batch is not None else [])
    frame = table.to_pyarrow_table(filters=filters).to_pandas()
    return frame.sort_values(["batch_id", "seq"], kind="stable").reset_index(drop=True)


def version_at(path: str, at: datetime) -> int | None:
    """The table's version at ``at``: its last commit at or before it (None before the first)."""
    found = None
    for entry in DeltaTable(path).history():
        stamp = datetime.fromtimestamp(entry["timestamp"] / 1000, UTC)
        if stamp <= at and (found is None or entry["version"] > found):
            found = entry["version"]
    return found


def progress_time(stored: StoredStream) -> datetime | None:
    """The event time the stream has processed up to: the end of its latest window event."""
    events = read_events(stored.events_path, -1)
    if events.empty:
        return None
    ends = events["window_end"].dropna()
    latest = ends.max() if len(ends) else events["window_start"].max()
    return latest.to_pydatetime().astimezone(UTC)
