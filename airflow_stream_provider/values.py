"""Small value helpers every layer uses: instants as integers since the Unix epoch, and JSON
files replaced whole."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

#: the Unix epoch, aware
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def epoch_micros(at: datetime) -> int:
    """Microseconds since the epoch of an aware datetime (a naive one is read as UTC)."""
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return (at - EPOCH) // timedelta(microseconds=1)


def write_json(path: Path, payload: Any) -> None:
    """Replace ``path`` with ``payload`` as JSON in one step: a reader sees the old file or the new
    one, never a part (each writing process writes its own temporary file beside it)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(payload), encoding="utf-8")
    tmp.replace(path)
