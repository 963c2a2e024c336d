"""Progress of long work: history fills, recalculations and loads.

A :class:`Progress` counts units done of a known total and reports a line such as
``history fill of power.avg_10s: 4,000 of 12,000 windows (33%), 850 windows/s, ETA 9 s``.

Where it goes depends on who listens:

- the ``say`` callback gets the line at most every ``every`` seconds and at the end, which is what
  an Airflow task log shows;
- a ``say`` with a ``show`` method (the CLI's :class:`Console`) gets the :class:`Progress` itself on
  every step, and draws a bar on a terminal;
- with ``path``, the state is also written as JSON (``progress.json`` in the stream's state folder),
  which the Streams page of the Airflow UI reads.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from airflow_stream_provider.files import make_dirs, write_json


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


class Progress:
    def __init__(self, what: str, total: int, unit: str, say: Callable[[str], None] | None = None, *,
                 path: Path | None = None, every: float = 5.0) -> None:
        self.what = what
        self.total = max(0, int(total))
        self.unit = unit
        self.done = 0
        self.say = say or (lambda _line: None)
        self.path = path
        self.every = every
        self.started = time.monotonic()
        self.started_at = datetime.now(UTC)
        self._last_said = self.started
        self.finished = False
        self._record()

    @property
    def fraction(self) -> float:
        return 1.0 if self.total == 0 else min(1.0, self.done / self.total)

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    @property
    def rate(self) -> float | None:
        """Units per second so far; None before the first unit."""
        return self.done / self.elapsed if self.done and self.elapsed > 0 else None

    @property
    def eta(self) -> float | None:
        """Seconds left at the rate so far; None until there is a rate."""
        rate = self.rate
        return (self.total - self.done) / rate if rate else None

    def line(self) -> str:
        text = f"{self.what}: {self.done:,} of {self.total:,} {self.unit} ({self.fraction:.0%})"
        if self.finished:
            return text + f" in {_duration(self.elapsed)}"
        if self.rate is not None:
            text += f", {self.rate:,.0f} {self.unit}/s"
        if self.eta is not None:
            text += f", ETA {_duration(self.eta)}"
        return text

    def advance(self, units: int) -> None:
        self.done = min(self.total, self.done + units) if self.total else self.done + units
        self._report(force=False)

    def finish(self) -> None:
        self.done = max(self.done, self.total)
        self.finished = True
        self._report(force=True)

    def _report(self, *, force: bool) -> None:
        self._record()
        show = getattr(self.say, "show", None)
        if show is not None:
            show(self)
            return
        now = time.monotonic()
        if force or now - self._last_said >= self.every:
            self._last_said = now
            self.say(self.line())

    def as_dict(self) -> dict:
        return {"what": self.what, "unit": self.unit, "done": self.done, "total": self.total,
                "fraction": self.fraction, "eta_s": self.eta, "finished": self.finished,
                "started": self.started_at.isoformat(), "updated": datetime.now(UTC).isoformat(),
                "line": self.line()}

    def _record(self) -> None:
        if self.path is None:
            return
        make_dirs(self.path.parent)
        write_json(self.path, self.as_dict())


def read(path: Path) -> dict | None:
    """The last progress recorded at ``path``, or None."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None


class Console:
    """The CLI's ``say``: prints messages on a stream (stderr), and on a terminal draws each
    :class:`Progress` as a bar on one line, redrawn in place; elsewhere a line every few seconds."""

    WIDTH = 30

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self._bar = False
        self._last = 0.0

    def __call__(self, message: str) -> None:
        self._clear()
        print(message, file=self.stream, flush=True)

    def show(self, progress: Progress) -> None:
        now = time.monotonic()
        if not self.tty:
            if progress.finished or now - self._last >= progress.every:
                self._last = now
                print(progress.line(), file=self.stream, flush=True)
            return
        if not progress.finished and now - self._last < 0.1:
            return
        self._last = now
        filled = round(self.WIDTH * progress.fraction)
        bar = "#" * filled + "." * (self.WIDTH - filled)
        self.stream.write(f"\r\033[K[{bar}] {progress.line()}")
        self._bar = True
        if progress.finished:
            self.stream.write("\n")
            self._bar = False
        self.stream.flush()

    def _clear(self) -> None:
        if self._bar:
            self.stream.write("\r\033[K")
            self._bar = False
