"""Row-at-a-time reference windows, written from reference 000's wording, independent of the core.

Every function takes a list of row dicts sorted by ``ts`` and returns windows as tuples
``(start, end, rows)`` (plus extra fields where the type has them), all windows closed as a query
over a finished table sees them.
"""

from __future__ import annotations


def true_for(start: int, end: int, rows: int, duration: int | None, count: int | None, op: str | None) -> bool:
    checks = []
    if duration is not None:
        checks.append(end - start >= duration)
    if count is not None:
        checks.append(rows >= count)
    if not checks:
        return True
    return any(checks) if op == "OR" else all(checks)


def interval(rows, size, step, offset=0, keep_empty=True):
    if not rows:
        return []
    first, last = rows[0]["ts"], rows[-1]["ts"]
    # the first window holding the first row: the smallest k with k*step + offset + size > first
    k = (first - offset - size) // step + 1
    out = []
    while k * step + offset <= last:
        start = k * step + offset
        n = sum(1 for r in rows if start <= r["ts"] < start + size)
        if n or keep_empty:
            out.append((start, start + size, n))
        k += 1
    return out


def session(rows, gap):
    out = []
    current = None
    for r in rows:
        if current and r["ts"] - current[1] <= gap:
            current = (current[0], r["ts"], current[2] + 1)
        else:
            if current:
                out.append(current)
            current = (r["ts"], r["ts"], 1)
    if current:
        out.append(current)
    return out


def state(rows, duration=None, count=None, op=None):
    """Windows as (start, end, rows, prev_state, state, next_state); NULL states are skipped."""
    runs = []
    for r in rows:
        if r["_state"] is None:
            continue
        if runs and runs[-1][3] == r["_state"]:
            s, _, n, v = runs[-1]
            runs[-1] = (s, r["ts"], n + 1, v)
        else:
            runs.append((r["ts"], r["ts"], 1, r["_state"]))
    out = []
    for i, (s, e, n, v) in enumerate(runs):
        if true_for(s, e, n, duration, count, op):
            prev = runs[i - 1][3] if i else None
            nxt = runs[i + 1][3] if i + 1 < len(runs) else None
            out.append((s, e, n, prev, v, nxt))
    return out


def event(rows, duration=None, count=None, op=None):
    """Windows as (start, end, rows, opening row ts, closing row ts); unfinished windows are dropped."""
    out = []
    opened_at = None
    n = 0
    for r in rows:
        if opened_at is None and r["_start"]:
            opened_at, n = r["ts"], 0
        if opened_at is not None:
            n += 1
            if r["_end"]:
                if true_for(opened_at, r["ts"], n, duration, count, op):
                    out.append((opened_at, r["ts"], n))
                opened_at = None
    return out


def count_windows(rows, size, step):
    valid = [r["ts"] for r in rows if r.get("_valid", True)]
    out = []
    j = 0
    while j * step < len(valid):
        part = valid[j * step: j * step + size]
        out.append((part[0], part[-1], len(part), j))
        j += 1
    return out
