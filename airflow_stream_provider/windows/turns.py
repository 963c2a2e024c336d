"""The turns of the detectors' batches in one process: at most so many batches at once, those
expected to report the most windows first (:class:`Turns`), and the calls a batch makes from inside
its turn to hand it on while it waits elsewhere (:func:`elsewhere`) or once its results are written
(:func:`step_back`)."""

from __future__ import annotations

import collections
import contextlib
import heapq
import itertools
import threading
from collections.abc import Iterator

#: the turns whose slot the calling thread's batch holds (none: it holds no turn)
_holding = threading.local()


class Turns:
    """At most ``slots`` batches at once among the detectors of a process, those expected to report
    the most windows first, and none waiting more than ``max_wait_s`` for its turn.

    A new version of a table wakes every stream on it at once. Run side by side, their batches share
    the interpreter's lock, and each of them ends only when nearly all have: every stream's output
    waits for the whole round. Taken in turns, the first ends after one batch, the next after two:
    half the round on average, for the same work. A freed slot goes to the work that finishes a
    batch already detected (its computation asked by a task), then to the detector expected to
    report the most windows (``weight``, :meth:`.detector.Detector.expected_events`), those expected to report
    as many in the order they asked: batches costing about the same, the results wait least in all
    when the batches with the most of them go first. One whose batch is not expected to report a
    window (:meth:`.detector.Detector.expects_windows`) waits until no other does: its place in the round
    delays no result. A batch that waits for something else (its computation for Spark, its
    notifications for a receiver: :func:`elsewhere`) hands its slot on meanwhile, and takes the
    next one back before any other; one that has written its results (LOW_LATENCY_CALC) steps back
    (:meth:`step_back`), what is left of it reporting no window. One that holds its turn long all the
    same delays the others by ``max_wait_s`` at most: then they run beside it, over the slots, as they
    would without turns."""

    def __init__(self, slots: int, max_wait_s: float = 1.0) -> None:
        if slots < 1:
            raise ValueError(f"a process needs at least one batch slot, not {slots}")
        self.max_wait_s = max_wait_s
        self._free = slots  # below zero while batches that waited too long run over the slots
        self._lock = threading.Lock()
        # (-weight, order asked, its event): a heap, the heaviest first, then the first to ask
        self._waiting: list[tuple[float, int, threading.Event]] = []
        self._asked = itertools.count()
        self._later: collections.deque[threading.Event] = collections.deque()  # expected to report nothing

    @contextlib.contextmanager
    def turn(self, *, expected: bool = True, weight: float = 0.0, first: bool = False) -> Iterator[None]:
        """The block runs in a turn; ``expected``: the batch is expected to report windows, about
        ``weight`` of them; ``first``: it finishes work already detected (computing a batch's
        windows), which goes before the batches waiting, as a batch back from :meth:`away` does."""
        self._take(first=first, later=not expected, weight=weight)
        _holding.turns = self
        try:
            yield
        finally:
            _holding.turns = None
            self._give()

    @contextlib.contextmanager
    def away(self) -> Iterator[None]:
        """The block runs without the turn the calling thread holds, which it takes back after it,
        first in line."""
        _holding.turns = None
        self._give()
        try:
            yield
        finally:
            self._take(first=True)
            _holding.turns = self

    def step_back(self) -> None:
        """The calling thread's batch, holding a turn, has written its results: the rest of it waits
        for a turn behind the batches expected to report windows, as a batch expected to report
        none does."""
        self._give()
        self._take(first=False, later=True)

    def _take(self, *, first: bool, later: bool = False, weight: float = 0.0) -> None:
        with self._lock:
            mine = None
            if self._free > 0 and not self._waiting and not self._later:
                self._free -= 1
            else:
                mine = threading.Event()
                if first:
                    heapq.heappush(self._waiting, (-float("inf"), -next(self._asked), mine))
                elif later:
                    self._later.append(mine)
                else:
                    heapq.heappush(self._waiting, (-weight, next(self._asked), mine))
        if mine is not None and not mine.wait(self.max_wait_s):  # (set: the slot was handed over)
            with self._lock:
                if not mine.is_set():  # waited long enough: run over the slots
                    if mine in self._later:
                        self._later.remove(mine)
                    else:
                        self._waiting = [entry for entry in self._waiting if entry[2] is not mine]
                        heapq.heapify(self._waiting)
                    self._free -= 1

    def _give(self) -> None:
        with self._lock:
            if self._free >= 0 and (self._waiting or self._later):
                (heapq.heappop(self._waiting)[2] if self._waiting else self._later.popleft()).set()
            else:
                self._free += 1


@contextlib.contextmanager
def elsewhere() -> Iterator[None]:
    """The calling thread's batch waits for something other than this process (Spark, a receiver)
    during the block: the turn it holds, if any, goes to the next batch meanwhile."""
    turns = getattr(_holding, "turns", None)
    if turns is None:
        yield
        return
    with turns.away():
        yield


def step_back() -> None:
    """The calling thread's batch has written its results: what is left of it waits behind the batches
    of the process expected to report windows (:meth:`Turns.step_back`); nothing without turns."""
    turns = getattr(_holding, "turns", None)
    if turns is not None:
        turns.step_back()
