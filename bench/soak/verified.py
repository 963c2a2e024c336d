"""The soak's last check: ``VERIFY STREAM`` of every stream once the oracle's checks pass, which must
find no difference but the rows TDengine's semantics keep (a window that late rows, updates or
deletes took apart keeps its result, invalidated, and the batch no longer finds it: VERIFY reports
it as ``extra``, and the oracle's checks found it invalidated)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bench.soak.spec import DB, STREAMS, say

if TYPE_CHECKING:
    from airflow_stream_provider.warehouse import Warehouse


@dataclass
class Verified:
    streams: int = 0  # streams verified
    triggers: int = 0  # triggers they recomputed in batch
    rows: int = 0  # output rows compared
    kept: int = 0  # extra rows that are invalidated results, as TDengine keeps them
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_all(wh: Warehouse, invalidated: set[tuple], verifiable=lambda spec: True) -> Verified:
    """VERIFY STREAM of each stream of the soak ``verifiable`` accepts; ``invalidated`` holds
    (stream, group, start in ms) of the output rows the oracle's checks found invalidated."""
    from airflow_stream_provider.streams.verify import verify
    from airflow_stream_provider.streams.verify_report import EXTRA

    began = time.monotonic()
    out = Verified()
    for spec in STREAMS:
        if not verifiable(spec):
            continue
        report = verify(wh, DB, spec.name)
        out.streams += 1
        out.triggers += report.triggers
        out.rows += report.compared
        for d in report.differences:
            values = dict(zip(d.columns, d.old or ()))
            group = values.get("tag_tbname") if spec.by_tbname else None
            key = (spec.name, group, int(d.ts.timestamp() * 1000))
            if d.status == EXTRA and key in invalidated:
                out.kept += 1
                continue
            out.problems.append(f"VERIFY {spec.name}: {d.status} {d.table}@{d.ts.isoformat()} {d.columns} "
                                f"{d.old} -> {d.new} ({d.trigger_id})")
        say(report.summary())
    out.seconds = time.monotonic() - began
    return out
