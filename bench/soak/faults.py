"""The soak's faults: when each component is killed, and the thread that kills and restarts them."""

from __future__ import annotations

import random
import threading
import time
import traceback
from dataclasses import dataclass, field

from bench.soak.cluster import TASK_SEARCH_S, Cluster
from bench.soak.spec import COMPONENTS, say


@dataclass
class Fault:
    at: float  # seconds after the feed starts
    component: str
    delay: float  # seconds from the kill to the restart
    done: str | None = None
    error: str | None = None
    #: a fault whose kill the restart waits for, besides ``delay`` (the node's, for the task's)
    holds_for: Fault | None = None
    #: set once this fault's kill was made or given up
    tried: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)


#: seconds from a node's kill to the task process kill that follows it
TASK_AFTER_NODE_S = 3.0


def plan_faults(rng: random.Random, seconds: float) -> list[Fault]:
    """Each component killed ``max(1, 0.75 x minutes)`` times, at random moments between 10% and 75%
    of the feed (the rest shows that the streams recover while rows still come), each restarted 1 to
    5 s after its kill; a component's kills are at least 20 s apart.

    A task process is killed :data:`TASK_AFTER_NODE_S` after each kill of the node: while the node
    hosts the streams their tasks run in the triggerer, the node working, and no task process runs;
    while it is down, their tasks resume on workers, which do the work themselves. That node stays
    down until the task process is killed (or none was found in :data:`TASK_SEARCH_S`): a triggerer
    restarted just before takes the triggers over only once the old one is deemed dead (10 s
    without a heartbeat here), and until then no task resumes anywhere."""
    times = max(1, int(0.75 * seconds / 60))
    faults = []
    for component in COMPONENTS:
        if component == "task":
            continue
        slots = sorted(rng.uniform(0.1, 0.75) * seconds for _ in range(times))
        for i in range(1, len(slots)):
            slots[i] = max(slots[i], slots[i - 1] + 20)
        faults += [Fault(at, component, rng.uniform(1, 5)) for at in slots if at < seconds]
    for node in [f for f in faults if f.component == "node"]:
        node.holds_for = Fault(node.at + TASK_AFTER_NODE_S, "task", 0.0)
        faults.append(node.holds_for)
    return sorted(faults, key=lambda f: f.at)


class Injector(threading.Thread):
    """Runs the planned faults, each in a thread of its own, so a slow restart delays no other fault."""

    def __init__(self, cluster: Cluster, faults: list[Fault], started: float) -> None:
        super().__init__(daemon=True, name="soak-faults")
        self.cluster = cluster
        self.faults = faults
        self.started = started
        self.workers: list[threading.Thread] = []

    def run(self) -> None:
        for fault in self.faults:
            time.sleep(max(0.0, self.started + fault.at - time.monotonic()))
            worker = threading.Thread(target=self._one, args=(fault,), daemon=True)
            worker.start()
            self.workers.append(worker)

    def _one(self, fault: Fault) -> None:
        with self.cluster.locks[fault.component]:
            try:
                try:
                    fault.done = self.cluster.kill(fault.component)
                finally:
                    fault.tried.set()
                if fault.done is None:
                    fault.error = "nothing to kill"
                    return
                say(f"fault: SIGKILL {fault.done}; restart in {fault.delay:.1f} s"
                    + (f", once the {fault.holds_for.component} fault is done" if fault.holds_for else ""))
                time.sleep(fault.delay)
                if fault.holds_for is not None:
                    fault.holds_for.tried.wait(fault.holds_for.at - fault.at + TASK_SEARCH_S + 5)
                self.cluster.restart(fault.component)
                if fault.component != "task":
                    say(f"fault: {fault.component} restarted")
            except Exception as err:
                fault.error = f"{type(err).__name__}: {err}"
                say(f"fault on {fault.component} failed: {fault.error}\n{traceback.format_exc()}")

    def finish(self, timeout: float) -> None:
        self.join(timeout)
        for worker in list(self.workers):
            worker.join(timeout)

