"""The event-driven alternative to a window stream's ``@continuous`` DAG, as ``bench/latency.py``
measures it: an Asset whose AssetWatcher runs a :class:`CommittedBatchesTrigger` in the triggerer,
and a DAG scheduled on that Asset that computes the batches the triggering asset events name.

Each new detector commit becomes an asset event; the scheduler turns queued asset events into a
DAG run (one at a time: events that arrive during a run are folded into the next one), whose
compute task reads the highest committed batch from the events' payloads.

The stream's own ``@continuous`` DAG must not run beside this one: both would consume the same
batches (``bench/latency.py`` leaves it out of its DAGs folder).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Asset, AssetWatcher
from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from airflow_stream_provider.operators import (
    StreamCommitOperator,
    StreamComputeOperator,
)
from airflow_stream_provider.triggers import check_windows


class CommittedBatchesTrigger(BaseEventTrigger):
    """Fires once for every new committed detector batch range of a stream (never twice for a batch
    while the triggerer runs; after a restart it fires again for batches not yet consumed, which a
    run computes once: the consumed mark only moves forward)."""

    def __init__(self, state_dir: str, poll_interval: float = 0.5) -> None:
        super().__init__()
        self.state_dir = str(state_dir)
        self.poll_interval = float(poll_interval)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"state_dir": self.state_dir, "poll_interval": self.poll_interval})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        emitted = -1
        while True:
            found = check_windows(self.state_dir)
            if found is not None and found["status"] == "committed" and found["to_batch"] > emitted:
                emitted = found["to_batch"]
                yield TriggerEvent(found)
            await asyncio.sleep(self.poll_interval)


class AssetComputeOperator(StreamComputeOperator):
    """Computes the batches up to the highest one the run's triggering asset events name."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(kind="window", **kwargs)

    def execute(self, context: Any) -> dict:
        events = [e for found in context["triggering_asset_events"].values() for e in found]
        upto = max(e.extra["payload"]["to_batch"] for e in events)
        return self._compute(context, {"status": "committed", "to_batch": upto})


def asset_dag(db: str, name: str, home: Path) -> DAG:
    """``stream__<db>__<name>__assets``: the window stream ``db.name`` scheduled by asset events."""
    state_dir = home / "state" / db / name
    asset = Asset(name=f"stream_{db}_{name}_commits", uri=f"airflow-stream://{db}/{name}",
                  watchers=[AssetWatcher(name=f"stream_{db}_{name}_watcher",
                                         trigger=CommittedBatchesTrigger(str(state_dir)))])
    common = {"stream": f"{db}.{name}", "home": str(home)}
    with DAG(f"stream__{db}__{name}__assets", schedule=[asset], start_date=datetime(2025, 1, 1),
             catchup=False, max_active_runs=1, is_paused_upon_creation=False) as dag:
        AssetComputeOperator(task_id="compute", **common) >> StreamCommitOperator(task_id="commit", **common)
    return dag
