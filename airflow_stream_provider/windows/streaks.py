"""EVENT_WINDOW with ``TRUE_FOR(start(limit))`` and ``TRUE_FOR(end(limit))`` (TDengine 3.4.2): a window
opens only once START WITH has held row after row for the limit (a streak; its first row starts the
window), and closes only once END WITH has held row after row for the limit (the streak's first row
ends it; the streak's later rows belong to no window). A row that breaks a streak starts the count
again; an open window stays open. The window as a whole still answers to TRUE_FOR's own limit.

The scan goes row by row (streams that give these limits are few and their windows long); its carry
holds the open window and the streak under way, so a live scan decides as one scan over all rows.
Condition fields are row indices of this call or JSON text carried from an earlier one, made JSON by
the caller (:func:`.core._event`).
"""

from __future__ import annotations

import numpy as np

from airflow_stream_provider.windows.spec import WindowSpec, limit_met


def event_streaks(spec: WindowSpec, ts: np.ndarray, start_at: np.ndarray, end_at: np.ndarray,
                  carry: dict, final: bool) -> tuple[dict[str, list], dict]:
    """The windows of one group's rows (``start_at``/``end_at``: START WITH / END WITH of each row),
    as lists: start, end, rows, closed, opened, open fields, close fields."""
    out: dict[str, list] = {k: [] for k in ("s", "e", "c", "closed", "opened", "of", "cf")}
    o = dict(carry["open"]) if carry.get("open") else None
    streak = dict(carry["streak"]) if carry.get("streak") else None
    no_limit = (None, None, None)

    def add(o: dict, end: int, rows: int, closed: bool, cf: object) -> None:
        for key, value in zip(out, (o["start"], end, rows, closed, not o["opened"], o["fields"], cf), strict=True):
            out[key].append(value)

    for i, t in enumerate(ts.tolist()):
        if o is None:
            if not start_at[i]:
                streak = None
                continue
            if streak is None:
                streak = {"first": t, "count": 0, "fields": i}
            streak["count"] += 1
            if not limit_met(spec.start_limit or no_limit, t - streak["first"], streak["count"]):
                continue
            o = {"start": streak["first"], "last": t, "count": streak["count"], "fields": streak["fields"],
                 "opened": False, "ending": None}
            streak = None
        else:
            o["last"], o["count"] = t, o["count"] + 1
        if not end_at[i]:
            o["ending"] = None
            continue
        ending = o["ending"] or {"first": t, "count": 0, "rows": o["count"], "fields": i}
        ending["count"] += 1
        o["ending"] = ending
        if limit_met(spec.end_limit or no_limit, t - ending["first"], ending["count"]):
            if spec.qualifies_one(ending["first"] - o["start"], ending["rows"]) or o["opened"]:
                add(o, ending["first"], ending["rows"], True, ending["fields"])
            o = None
    if o is not None:
        if final:
            o = None  # a query reports only windows whose end condition was met
        elif not o["opened"] and spec.qualifies_one(o["last"] - o["start"], o["count"]):
            add(o, o["last"], o["count"], False, None)
            o["opened"] = True
    return out, {**carry, "open": o, "streak": None if final else streak}
