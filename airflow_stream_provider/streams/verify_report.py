"""What VERIFY STREAM (and VERIFY CQ) finds: each output row that is not what the batch computes
(:class:`Difference`), and the verification's report (:class:`VerifyReport`): its summary line, its
result set and its JSON."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pyarrow as pa

from airflow_stream_provider.streams.runtime import RunReport
from airflow_stream_provider.values import json_default

#: how close two floating-point values must be to be equal
REL_TOLERANCE = 1e-9

MISSING, EXTRA, DIFFERENT = "missing", "extra", "different"


@dataclass(frozen=True)
class Difference:
    """One output row that is not what the batch computes."""

    status: str  # MISSING, EXTRA or DIFFERENT
    table: str  # the output (sub)table
    ts: datetime  # the row's timestamp key
    trigger_id: str  # "" for an extra row no trigger of the range gives
    group_id: str
    columns: tuple[str, ...]  # the columns that differ (every value column of a missing or extra row)
    old: tuple | None  # the output's values of ``columns`` (None: missing)
    new: tuple | None  # the batch's values (None: extra)
    key: tuple = field(default=(), repr=False, compare=False)  # the row's key in the output table


@dataclass
class VerifyReport:
    stream: str
    start: datetime
    end: datetime
    triggers: int = 0  # triggers of the range computed in batch
    rows: int = 0  # output rows they give
    compared: int = 0  # output rows read
    differences: list[Difference] = field(default_factory=list)
    #: REPAIR: the differences found first, and what recalculating them did
    repaired: list[Difference] | None = None
    repair: RunReport | None = None
    removed: int = 0  # extra rows REPAIR deleted
    version: int | None = None  # the trigger table's version verified at (None: several, or none)
    expired: int = 0  # triggers not judged: their source rows are partly gone (retention)
    horizon: datetime | None = None  # ... before this time
    seconds: float = 0.0
    notified: bool = False  # a notify-only stream: its rows are the results its notifications carried
    forgotten: int = 0  # ... windows not judged: notified before the sent messages its outbox keeps

    @property
    def equal(self) -> bool:
        return not self.differences

    def counts(self, found: list[Difference]) -> str:
        kinds = [(k, sum(d.status == k for d in found)) for k in (MISSING, EXTRA, DIFFERENT)]
        return ", ".join(f"{n} {k}" for k, n in kinds if n)

    def summary(self) -> str:
        against = _n(self.compared, "sent result") if self.notified else _n(self.compared, "output row")
        what = (f"{self.stream}: {_n(self.triggers, 'trigger')} in [{self.start.isoformat()}, "
                f"{self.end.isoformat()}), {_n(self.rows, 'result row')} against {against}")
        if self.version is not None:
            what += f" at version {self.version}"
        if self.expired and self.horizon is not None:
            what += (f"; {_n(self.expired, 'window')} before {self.horizon.isoformat()} not judged: their source rows "
                     "are partly gone (retention)")
        if self.forgotten:
            what += (f"; {_n(self.forgotten, 'window')} not judged: notified before the oldest sent message the "
                     "outbox keeps")
        if self.repaired is not None:
            fixed = len({(d.group_id, d.trigger_id) for d in self.repaired if d.trigger_id})
            what += (f"; repaired {len(self.repaired)} difference{'s' if len(self.repaired) != 1 else ''} "
                     f"({self.counts(self.repaired)}): {fixed} window{'s' if fixed != 1 else ''} recalculated, "
                     f"{self.removed} extra row{'s' if self.removed != 1 else ''} removed; verified again")
        verdict = "equal" if self.equal else \
            f"{_n(len(self.differences), 'difference')} ({self.counts(self.differences)})"
        return f"{what}: {verdict} in {self.seconds:.1f}s"

    def table(self) -> pa.Table:
        """The differences as a result set: one row each, values as JSON text."""
        def text(values: tuple | None) -> str | None:
            return None if values is None else json.dumps(list(values), default=json_default)

        found = self.differences
        return pa.table({
            "status": pa.array([d.status for d in found], pa.string()),
            "table_name": pa.array([d.table for d in found], pa.string()),
            "ts": pa.array([d.ts for d in found], pa.timestamp("us", tz="UTC")),
            "trigger_id": pa.array([d.trigger_id for d in found], pa.string()),
            "group_id": pa.array([d.group_id for d in found], pa.string()),
            "columns": pa.array([",".join(d.columns) for d in found], pa.string()),
            "old": pa.array([text(d.old) for d in found], pa.string()),
            "new": pa.array([text(d.new) for d in found], pa.string()),
        })

    def to_json(self) -> dict:
        return {"stream": self.stream, "from": self.start.isoformat(), "to": self.end.isoformat(),
                "equal": self.equal, "triggers": self.triggers, "rows": self.rows, "compared": self.compared,
                "version": self.version, "expired": self.expired, "forgotten": self.forgotten,
                "horizon": self.horizon.isoformat() if self.horizon else None, "summary": self.summary(),
                "differences": [_difference_json(d) for d in self.differences],
                "repaired": None if self.repaired is None else [_difference_json(d) for d in self.repaired]}


def _n(count: int, what: str) -> str:
    return f"{count} {what}{'s' if count != 1 else ''}"


def _difference_json(d: Difference) -> dict:
    payload = dataclasses.asdict(d)
    del payload["key"]
    payload["ts"] = d.ts.isoformat()
    return json.loads(json.dumps(payload, default=json_default))


def same(a: object, b: object) -> bool:
    """Whether two values of a column are equal (floating-point values within :data:`REL_TOLERANCE`)."""
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=REL_TOLERANCE, abs_tol=1e-12)
    if isinstance(a, datetime) and isinstance(b, datetime):
        return a.replace(tzinfo=a.tzinfo or UTC) == b.replace(tzinfo=b.tzinfo or UTC)
    return a == b
