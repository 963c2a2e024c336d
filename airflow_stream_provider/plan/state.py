"""What a stream has done so far: :class:`StreamState`, the typed contents of its ``stream.json``,
and the rules by which a run's progress joins it (:meth:`StreamState.merged`).

The file itself is read and replaced by :mod:`airflow_stream_provider.streams.store`; this module
does no I/O. The JSON keeps the names and shapes it always had (instants as ISO strings), so a
state written by an earlier release reads back the same, and keys this release does not know are
kept as they are (:attr:`StreamState.other`).

The merge rules: the batch and version marks only move forward, so a late or repeated commit never
rewinds a stream; ``computed`` counts (each run adds its own); ``last_fired`` and ``fired_at`` keep
the later instant; the SLIDING marks keep each group's later ``last``; ``committed_tries`` keeps each run's
later try, for the latest :data:`KEPT_TRIES` runs; the recent entries (:data:`RECENT_KEYS`) keep
those of the last :data:`RECENT_S` seconds; any other key takes the new value (None clears it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

#: the progress marks that only move forward
FORWARD_MARKS = ("consumed_batch", "detected_version", "last_version")
#: those, and the checkpoint they belong to
BATCH_MARKS = (*FORWARD_MARKS, "checkpoint_id")

#: the runs whose committing try a stream keeps, the latest: at PERIOD(10s) the runs of the last 2.8
#: hours (a try left running longer than that after its retry committed computes its instant again)
KEPT_TRIES = 1000
#: the seconds of recent entries a state keeps, for the rates of SHOW STREAMS: ``written`` (a commit's
#: time and output rows), ``read`` (a detector batch's time and input rows), ``latency`` (a commit's
#: time and milliseconds since the detection or instant of what it committed)
RECENT_S = 60.0
#: the keys of those entries, ``[ISO time, number]`` each
RECENT_KEYS = ("written", "read", "latency")


@dataclass(frozen=True)
class StreamState:
    """A stream's ``stream.json``.

    :param created: when the stream was created (its PERIOD and SLIDING schedules start there)
    :param created_version: the trigger table's version then (what a history fill or a schedule reads from)
    :param result_schema: the result columns, as Spark's JSON schema (None: the stream computes nothing)
    :param trigger_table: the trigger table's location and columns (:meth:`.stream.TriggerTable.to_state`)
    :param consumed_batch: the last detector batch whose windows are computed and recorded
    :param detected_version: the trigger table's version the detector has read up to
    :param last_version: the table version a PERIOD stream read up to at its last instant
    :param checkpoint_id: the identity of the detector's checkpoint the batch marks belong to
    :param last_fired: the last PERIOD instant computed (or the instant a START ... IGNORE UNTREATED was run)
    :param fired_at: when (wall clock) a run last fired a trigger (a window, an instant, rows), for freshness
    :param resume_at: a continuous query's next instant after TIMEOUT POLICY DISCARD skipped the missed ones
    :param sliding: each SLIDING group's marks: ``{"origin": ..., "last": ...}``
    :param committed_tries: the committing try of each PERIOD run (a superseded try does nothing)
    :param computed: how many triggers the stream computed, in all
    :param outputs: each group's output subtable
    :param skip_versions: the table versions to ignore, as inclusive ``(first, last)`` ranges
    :param untreated_version: the table version a START ... IGNORE UNTREATED began at
    :param recalculations: how many recalculations ran
    :param recalculated_triggers: how many triggers they computed
    :param stopped: the stream is stopped (STOP STREAM) ...
    :param stopped_at: ... since then (ISO instant) ...
    :param stopped_version: ... with the trigger table at this version
    :param failed: why the stream failed (SHOW STREAMS says so), None while it is well
    :param source_horizon: the time before which the trigger table's rows are gone (retention)
    :param expired_windows: how many windows were left alone because their rows are partly gone
    :param declared_by: the project of DAG-folder declarations the stream was deployed from (None:
        created with ``airflow-stream sql``)
    :param refused: the fingerprint of a declaration refused because it differs from the stream ...
    :param refused_diff: ... and the diff it was refused with
    :param paused_by_code: the stream was stopped because its declaration left the code
    :param semantics: the TDengine version whose behaviour the stream follows, recorded at CREATE
        (its SEMANTICS option, else the home's ``[tdengine] semantics``)
    :param other: the keys this release does not know, kept as they were read
    """

    created: datetime | None = None
    created_version: int | None = None
    semantics: str = "3.3.7"
    result_schema: str | None = None
    trigger_table: Mapping[str, Any] | None = None
    consumed_batch: int | None = None
    detected_version: int | None = None
    last_version: int | None = None
    checkpoint_id: str | None = None
    last_fired: datetime | None = None
    fired_at: datetime | None = None
    resume_at: datetime | None = None
    sliding: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    committed_tries: Mapping[str, int] = field(default_factory=dict)
    computed: int = 0
    outputs: Mapping[str, str] = field(default_factory=dict)
    skip_versions: tuple[tuple[int, int], ...] = ()
    untreated_version: int | None = None
    recalculations: int = 0
    recalculated_triggers: int = 0
    stopped: bool = False
    stopped_at: str | None = None
    stopped_version: int | None = None
    failed: str | None = None
    source_horizon: datetime | None = None
    expired_windows: int = 0
    declared_by: str | None = None
    refused: str | None = None
    refused_diff: str | None = None
    paused_by_code: bool = False
    other: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, payload: Mapping[str, Any]) -> StreamState:
        """The state a ``stream.json`` document holds ({} before the stream's first save)."""
        known = {f.name for f in dataclasses.fields(cls)} - {"other"}
        values: dict[str, Any] = {k: v for k, v in payload.items() if k in known and v is not None}
        for key in ("created", "last_fired", "fired_at", "resume_at", "source_horizon"):
            if key in values:
                values[key] = datetime.fromisoformat(values[key])
        if "skip_versions" in values:
            values["skip_versions"] = tuple((int(a), int(b)) for a, b in values["skip_versions"])
        for key in ("computed", "recalculations", "recalculated_triggers", "expired_windows"):
            if key in values:
                values[key] = int(values[key])
        for key in ("stopped", "paused_by_code"):
            if key in values:
                values[key] = bool(values[key])
        return cls(**values, other={k: v for k, v in payload.items() if k not in known})

    def to_json(self) -> dict[str, Any]:
        """The ``stream.json`` document: the keys that hold something, instants as ISO strings."""
        out: dict[str, Any] = dict(self.other)
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "other" or value is None or value == f.default or (
                    f.default_factory is not dataclasses.MISSING and not value):
                continue
            if isinstance(value, datetime):
                value = value.isoformat()
            elif f.name == "skip_versions":
                value = [list(r) for r in value]
            elif isinstance(value, Mapping):
                value = dict(value)
            out[f.name] = value
        return out

    def replace(self, **changes: Any) -> StreamState:
        """This state with ``changes`` (a key of :attr:`other` by its name, too)."""
        known = {f.name for f in dataclasses.fields(self)}
        unknown = {k: v for k, v in changes.items() if k not in known}
        if unknown:
            other = {**self.other, **unknown}
            changes = {**{k: v for k, v in changes.items() if k in known}, "other": other}
        return dataclasses.replace(self, **changes)

    def started(self) -> StreamState:
        """This state with its STOP STREAM marks gone (START STREAM)."""
        return dataclasses.replace(self, stopped=False, stopped_at=None, stopped_version=None)

    def merged(self, progress: Mapping[str, Any]) -> StreamState:
        """This state with a run's ``progress`` (the JSON keys a run returns) joined by the module's rules."""
        saved = self.to_json()
        for key, value in progress.items():
            before = saved.get(key)
            if key in FORWARD_MARKS and before is not None and value is not None:
                saved[key] = max(before, value)
            elif key == "computed":  # a count: each run adds its own
                saved[key] = int(before or 0) + int(value)
            elif key in ("last_fired", "fired_at") and before:
                saved[key] = max(before, value, key=datetime.fromisoformat)
            elif key == "sliding" and before:
                saved[key] = later_instants(before, value)
            elif key == "committed_tries":
                saved[key] = later_tries(before or {}, value)
            elif key in RECENT_KEYS:
                saved[key] = recent_writes(before or [], value)
            else:
                saved[key] = value
        return StreamState.from_json(saved)


def recent_writes(saved: list, new: list) -> list:
    """The entries ``[ISO time, number]`` of ``saved`` and ``new`` taken together (one of
    :data:`RECENT_KEYS`), those of the last :data:`RECENT_S` seconds before the latest."""
    both = sorted([*saved, *new], key=lambda entry: datetime.fromisoformat(entry[0]))
    if not both:
        return []
    latest = datetime.fromisoformat(both[-1][0])
    return [list(e) for e in both if (latest - datetime.fromisoformat(e[0])).total_seconds() < RECENT_S]


def later_tries(saved: Mapping[str, int], new: Mapping[str, int]) -> dict[str, int]:
    """The committing try of each run, ``saved`` and ``new`` taken together: the later try of a run;
    the latest :data:`KEPT_TRIES` runs."""
    out = dict(saved)
    for run_id, tried in new.items():
        out[run_id] = max(int(tried), int(out.pop(run_id, tried)))  # (popped: the latest goes last)
    return dict(list(out.items())[-KEPT_TRIES:])


def later_instants(saved: Mapping[str, Mapping[str, Any]],
                   new: Mapping[str, Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """The SLIDING marks of each group (``{"origin", "last"}``), ``saved`` and ``new`` taken
    together: the later ``last`` of each group (a group without one has fired nothing yet)."""
    def last(entry: Mapping[str, Any]) -> datetime | None:
        return datetime.fromisoformat(entry["last"]) if entry.get("last") else None

    out = dict(saved)
    for group, entry in new.items():
        before = out.get(group)
        mark, old = last(entry), None if before is None else last(before)
        if before is None or (mark is not None and (old is None or mark > old)):
            out[group] = entry
    return out
