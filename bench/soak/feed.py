"""The soak's rows: what each tick writes, as our own statements or as the steps of the foreign writer."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from bench.soak.spec import DB, DISORDERED, SILENT, STEP, SUBTABLES, T0

#: a row: (event time, value v, state st)
Row = tuple[datetime, int, int]


@dataclass
class Tick:
    """What one tick changes: rows in time order, late rows and updates (written at a timestamp
    between or at existing ones), and deletes (subtable, timestamp)."""

    rows: dict[str, list[Row]] = field(default_factory=lambda: defaultdict(list))
    upserts: dict[str, list[Row]] = field(default_factory=lambda: defaultdict(list))
    deletes: list[tuple[str, datetime]] = field(default_factory=list)


@dataclass
class Feed:
    """Rows written at a steady rate: each tick one row per subtable at the next event time, and
    now and then a late row, an update (a row at an existing timestamp) and a delete, in the
    subtables of ``disordered``. It keeps the timestamps each subtable holds, so that updates and
    deletes hit existing rows; it never deletes a subtable's first or latest rows, so each group's
    first window and latest event time stay what the live detector saw."""

    rng: random.Random
    subtables: tuple[str, ...] = SUBTABLES
    disordered: tuple[str, ...] = DISORDERED
    #: ticks on which a subtable writes nothing (tick % period in the set)
    silent: dict[str, tuple[int, set[int]]] = field(default_factory=lambda: SILENT)
    tick: int = 0
    rows: dict[str, list[datetime]] = field(default_factory=dict)
    states: dict[str, int] = field(default_factory=dict)
    counts: Counter = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self.rows = {s: [] for s in self.subtables}
        self.states = dict.fromkeys(self.subtables, 1)

    def _value(self) -> int:
        return self.rng.randint(0, 10)

    def _state(self, sub: str) -> int:
        if self.rng.random() < 0.3:
            self.states[sub] = 3 - self.states[sub]
        return self.states[sub]

    def next(self) -> Tick:
        """The changes of the next tick."""
        k = self.tick
        self.tick += 1
        at = T0 + k * STEP
        tick = Tick()
        for sub in self.subtables:
            period, silent = self.silent.get(sub, (1, set()))
            if k % period in silent:
                continue
            tick.rows[sub].append((at, self._value(), self._state(sub)))
            self.rows[sub].append(at)
            self.counts["inserts"] += 1
        if k >= 4 and self.rng.random() < 0.5:  # a late row, between existing ones
            sub = self.rng.choice(self.disordered)
            late = T0 + self.rng.randint(max(1, k - 12), k - 2) * STEP + timedelta(seconds=self.rng.choice((3, 5, 7)))
            if late not in self.rows[sub] and late > self.rows[sub][0]:
                tick.upserts[sub].append((late, self._value(), self.rng.randint(1, 2)))
                self.rows[sub].append(late)
                self.rows[sub].sort()
                self.counts["late"] += 1
        if k >= 4 and self.rng.random() < 0.5:  # an update of an earlier row
            sub = self.rng.choice(self.disordered)
            held = [t for t in self.rows[sub][1:-2] if t >= at - 15 * STEP]
            if held:
                target = self.rng.choice(held)
                tick.upserts[sub].append((target, self._value(), self.rng.randint(1, 2)))
                self.counts["updates"] += 1
        if k >= 6 and self.rng.random() < 0.25:  # a delete of an earlier row
            sub = self.rng.choice(self.disordered)
            held = [t for t in self.rows[sub][1:-3] if t >= at - 15 * STEP]
            if held:
                target = self.rng.choice(held)
                self.rows[sub].remove(target)
                tick.deletes.append((sub, target))
                self.counts["deletes"] += 1
        return tick

    def statements(self) -> list[str]:
        """The next tick as our own statements: one INSERT (an update is an INSERT at an existing
        timestamp), then the DELETE."""
        tick = self.next()
        values: dict[str, list[str]] = defaultdict(list)
        for part in (tick.rows, tick.upserts):
            for sub, rows in part.items():
                values[sub] += [f"('{stamp(t)}', {v}, {st})" for t, v, st in rows]
        out = []
        if values:
            out.append("INSERT INTO " + " ".join(f"{DB}.{sub} VALUES {' '.join(rows)}" for sub, rows in values.items()))
        out += [f"DELETE FROM {DB}.{sub} WHERE ts = '{stamp(t)}'" for sub, t in tick.deletes]
        return out

    def steps(self) -> list[dict]:
        """The next tick as the foreign writer's steps: an append of the rows in time order, a MERGE
        of the late rows and updates, a delete by predicate."""
        tick = self.next()

        def rows(part: dict[str, list[Row]]) -> list[list]:
            return [[ms(t), sub, sub, v, st] for sub, got in part.items() for t, v, st in got]

        out: list[dict] = []
        if tick.rows:
            out.append({"append": rows(tick.rows)})
        if tick.upserts:
            out.append({"merge": rows(tick.upserts)})
        out += [{"delete": f"device_id = '{sub}' AND event_time = '{t.isoformat()}'"} for sub, t in tick.deletes]
        return out


def stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M:%S")


def ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


class ForeignWriter:
    """The foreign writer (:mod:`bench.soak.writer`) as a process of its own, with none of this
    project on its path, taking one tick's steps at a time and answering once they are committed."""

    def __init__(self, path: Path, log: Path) -> None:
        self.path = path
        env = {"PATH": "/usr/bin:/bin", "HOME": str(log.parent), "TZ": "UTC"}
        script = Path(__file__).with_name("writer.py")
        with log.open("ab") as handle:
            self.proc = subprocess.Popen([sys.executable, "-I", str(script), str(path)], env=env, cwd=log.parent,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=handle, text=True)
        self._answer()

    def _answer(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("ok"):
            raise RuntimeError(f"the foreign writer stopped (exit {self.proc.poll()}); see its log")
        return line

    def write(self, steps: list[dict]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(steps) + "\n")
        self.proc.stdin.flush()
        self._answer()

    def stop(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
