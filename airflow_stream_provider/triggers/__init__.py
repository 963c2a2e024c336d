"""Deferrable triggers run by Airflow's triggerer: they wait without holding a worker slot.

Both poll small files only (no Spark, no JVM), in a thread so the triggerer's event loop never
blocks, both serialize to JSON-safe keyword arguments, and both report a failed check as one
``{"status": "error", "message": ...}`` event, on which the waiting task raises.

- :class:`CheckpointCommitTrigger` (:mod:`.checkpoint`) fires when the stream's detector has
  committed a micro-batch past the last one consumed.
- :class:`EventTimeTrigger` (:mod:`.event_time`) fires when the trigger table's latest event time
  minus WATERMARK reaches an instant (SLIDING triggers).
- :class:`StreamComputeTrigger`, :class:`StreamInstantTrigger`, :class:`StreamNotifyTrigger` and
  :class:`StreamCommitTrigger` (:mod:`.node`) run a window or PERIOD stream's tasks from the
  triggerer, the stream node doing the work.

While the stream is stopped (STOP STREAM) neither fires. The classes are imported here because
serialized triggers name them by this package's path (see :data:`.base.CLASSPATH_MODULE`). The
probes they run (:mod:`..streams.probes`, with Arrow and Delta) are imported when a trigger first
checks, so that parsing the DAGs that name these triggers stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from airflow_stream_provider.triggers.checkpoint import CheckpointCommitTrigger
from airflow_stream_provider.triggers.event_time import EventTimeTrigger
from airflow_stream_provider.triggers.served import (
    StreamCommitTrigger,
    StreamComputeTrigger,
    StreamInstantTrigger,
    StreamNotifyTrigger,
)

if TYPE_CHECKING:
    from airflow_stream_provider.streams.probes import (  # noqa: F401  (named by __getattr__ below)
        check_windows,
        last_commit,
        latest_version,
        max_event_time,
    )

__all__ = ["CheckpointCommitTrigger", "EventTimeTrigger", "StreamCommitTrigger", "StreamComputeTrigger",
           "StreamInstantTrigger", "StreamNotifyTrigger"]

#: the probes, at their old paths; imported when first named, as they read Delta tables with Arrow
_PROBES = {"check_windows", "last_commit", "latest_version", "max_event_time"}


def __getattr__(name: str) -> object:
    if name in _PROBES:
        return getattr(importlib.import_module("airflow_stream_provider.streams.probes"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
