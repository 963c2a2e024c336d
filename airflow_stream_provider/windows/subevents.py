"""Sub-event windows (TDengine 3.4.0): ``EVENT_WINDOW(START WITH (c1, c2, ...) [END WITH e])``.

On each row the first START WITH condition that holds is the *effective* condition. A window opens
on a row where one holds. While it is open, a row whose effective condition differs from the
current sub-window's closes that sub-window on the row before and opens the next on this row; the
window as a whole (the *parent*) goes on. A row where END WITH holds, or where no condition holds,
closes the last sub-window and the parent with it, that row included. A window whose effective
condition never changed is a plain event window: no parent, no sub-windows.

Each window is one row of the scan's output, told apart by ``ordinal``: 0 for the plain window or
the parent (TDengine's ``windowIndex`` -1), ``k + 1`` for sub-window ``k`` (``windowIndex`` k). The
parent starts where its first sub-window does: it is the window that opened then, and once the
condition first changes, its first sub-window (ordinal 1) opens and closes at once. TRUE_FOR judges
every window, parent and sub-window, on its own. The condition index of an opening is the effective
condition of its first row (the parent's: its first sub-window's); that of a closing is the number
of START WITH conditions when END WITH closed it, the new effective condition when a change did, and
the window's own condition when none held any longer.

Row by row, with the open window in the carry (JSON-safe), so a live scan decides as one batch scan.
Condition fields are row indices of this call or JSON text carried from an earlier one, made JSON by
the caller (:func:`.core._event`).
"""

from __future__ import annotations

import numpy as np

from airflow_stream_provider.windows.spec import WindowSpec

#: the lists of one scan's windows: start, end, rows, closed, opened, open fields, close fields,
#: ordinal, open condition, close condition
OUT_KEYS = ("s", "e", "c", "closed", "opened", "of", "cf", "o", "oi", "ci")


def event_subwindows(spec: WindowSpec, ts: np.ndarray, effective: np.ndarray, end_at: np.ndarray,
                     carry: dict, final: bool) -> tuple[dict[str, list], dict]:
    """The windows of one group's rows (``effective``: the index of the first START WITH condition
    holding on each row, -1 for none; ``end_at``: END WITH on each row)."""
    out: dict[str, list] = {k: [] for k in OUT_KEYS}
    top = _copy(carry.get("open"))  # the plain window or parent: start, last, count, cond, fields, opened
    sub = _copy(carry.get("sub"))  # its current sub-window, once the condition has changed (index >= 0)

    def add(w: dict, ordinal: int, end: int, rows: int, closed: bool, cf: object, ci: int) -> None:
        opened = not w["opened"]
        if not (w["opened"] or spec.qualifies_one(end - w["start"], rows)):
            return
        w["opened"] = True
        values = (w["start"], end, rows, closed, opened, w["fields"], cf, ordinal, w["cond"], ci)
        for key, value in zip(OUT_KEYS, values, strict=True):
            out[key].append(value)

    def close(top: dict, sub: dict | None, i: int, t: int, ci: int) -> None:
        if sub is not None:
            add(sub, sub["index"] + 1, t, sub["count"], True, i, ci)
        add(top, 0, t, top["count"], True, i, ci)

    n = spec.conditions
    for i, (t, c, e) in enumerate(zip(ts.tolist(), effective.tolist(), end_at.tolist(), strict=True)):
        if top is None:
            if c < 0:
                continue
            top = {"start": t, "last": t, "count": 1, "cond": c, "fields": i, "opened": False}
        else:
            current = sub if sub is not None else top
            if c >= 0 and c != current["cond"]:
                if sub is None:  # the first change: the window so far was the parent's first sub-window
                    first = {**top, "opened": False}
                    add(first, 1, top["last"], top["count"], True, i, c)
                    index = 1
                else:
                    add(sub, sub["index"] + 1, sub["last"], sub["count"], True, i, c)
                    index = sub["index"] + 1
                sub = {"start": t, "last": t, "count": 1, "cond": c, "fields": i, "opened": False, "index": index}
            else:
                if sub is not None:
                    sub["last"], sub["count"] = t, sub["count"] + 1
            top["last"], top["count"] = t, top["count"] + 1
            if c < 0:
                close(top, sub, i, t, current["cond"])
                top = sub = None
                continue
        if e:
            close(top, sub, i, t, n)
            top = sub = None
    if top is not None:
        if final:
            top = sub = None  # a query reports only windows that closed
        else:
            for w, ordinal in ((top, 0), (sub, None)):
                if w is not None and not w["opened"]:
                    add(w, w["index"] + 1 if ordinal is None else 0, w["last"], w["count"], False, None, -1)
    return out, {**carry, "open": top, "sub": sub}


def _copy(held: dict | None) -> dict | None:
    return dict(held) if held else None
