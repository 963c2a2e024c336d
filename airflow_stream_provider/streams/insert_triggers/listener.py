"""The warehouse's insert listener that fires the registered triggers whose pattern matches a write
(:data:`LISTENER`, registered when this module is imported).

Every process that writes through the warehouse fires the triggers whose pattern matches, re-reading
the registry when it changes. A STATELESS trigger fires on this process's instance; a STATEFUL one
on the stream node's, over its trigger port. A failure under PESSIMISTIC aborts a BEFORE INSERT's
write, and stops the AFTER INSERT triggers after it. A trigger whose code timed out (its ``fire``,
or making its instance) is not called again in the same write: the rest of the write's rows fail
for it at once, under its strategy, so a hung trigger costs one timeout per write, not per row.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import CorruptStateError
from airflow_stream_provider.streams.insert_triggers.client import NodeClient, tablet_json
from airflow_stream_provider.streams.insert_triggers.instance import (
    Instance,
    TriggerTimeout,
    fire_timeout,
    setup_timeout,
)
from airflow_stream_provider.streams.insert_triggers.registry import (
    Counts,
    Entry,
    TriggerError,
    TriggerRegistry,
    folder,
)
from airflow_stream_provider.warehouse import listeners
from airflow_stream_provider.warehouse.listeners import Write

#: a call of one trigger on one tablet: (None when it succeeded, else why; the strategy that
#: applies; whether its code timed out)
Fire = Callable[[Entry, m.Tablet, float], tuple[str | None, m.FailureStrategy, bool]]


class TriggerHome:
    """The triggers of one trigger folder, as this process sees them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.registry = TriggerRegistry(root)
        self.instances: dict[str, Instance] = {}  # stateless, by trigger id
        self.node = NodeClient()
        self._matches: dict[tuple[str, m.SeriesPath, str], bool] = {}
        self._lock = threading.RLock()  # writers of one process may run on several threads (the node's)

    def entries(self) -> list[Entry]:
        with self._lock:
            entries = self.registry.entries()
            if self.instances:
                live = {e.id for e in entries}
                for trigger_id in [i for i in self.instances if i not in live]:
                    self.instances.pop(trigger_id).drop()  # dropped by another process: this instance ends too
            return entries

    def matched(self, entry: Entry, write: Write, millis: tuple[int, ...]) -> m.Tablet | None:
        schemas, values = [], []
        for name, kind, column in write.columns:
            key = (entry.id, write.device, name)
            hit = self._matches.get(key)
            if hit is None:
                hit = self._matches[key] = entry.pattern.matches(write.device.nodes + (name,))
            if hit:
                schemas.append(m.Measurement(name, kind))
                values.append(column)
        if not schemas:
            return None
        return m.Tablet(str(write.device), tuple(schemas), millis, tuple(values), write.micros)

    def instance(self, entry: Entry) -> Instance:
        """This process's instance of ``entry``, made at its first fire, and again after a fire of
        it timed out (once that fire has returned: until then, TriggerTimeout)."""
        with self._lock:
            found = self.instances.get(entry.id)
            if found is not None and found.stuck:
                raise TriggerTimeout(f"trigger {entry.name}: its fire of an earlier write has not returned yet")
            if found is None or found.hung:
                found = self.instances[entry.id] = Instance.create(entry, self.root)
            return found

    def fire(self, entry: Entry, tablet: m.Tablet, timeout: float) -> tuple[str | None, m.FailureStrategy, bool]:
        """(None, _, _) when the fire succeeded, else (why, the strategy that applies, whether the
        trigger's code timed out)."""
        if entry.stateful:
            wait = timeout + setup_timeout() + 5  # the node may make the instance again first
            try:
                answer = self.node.call({"op": "fire", "id": entry.id, "tablet": tablet_json(tablet)}, wait)
            except TimeoutError:
                return f"the stream node did not answer within {wait:g} s", entry.strategy, True
            except ConnectionError as err:
                return f"stateful trigger not reachable: {err}", entry.strategy, False
            strategy = m.FailureStrategy(answer.get("strategy") or entry.strategy)
            return answer.get("error"), strategy, bool(answer.get("timed_out"))
        try:
            instance = self.instance(entry)
        except TriggerTimeout as err:
            return f"no instance: {err}", entry.strategy, True
        except TriggerError as err:
            return f"no instance: {err}", entry.strategy, False
        error = instance.fire(tablet, timeout)
        return error, (instance.strategy() if error else entry.strategy), instance.hung


class InsertTriggers:
    """The warehouse listener that fires the registered triggers (one per process)."""

    def __init__(self) -> None:
        self._homes: dict[Path, TriggerHome] = {}
        self._lock = threading.Lock()

    def home(self, root: Path | None = None) -> TriggerHome:
        root = (root or folder()).absolute()  # on every write: no file system call
        with self._lock:
            found = self._homes.get(root)
            if found is None:
                found = self._homes[root] = TriggerHome(root)
            return found

    def active(self) -> bool:
        try:
            return bool(self.home().entries())
        except CorruptStateError:
            return True  # before() and after() decide which writes the damage concerns

    def before(self, writes: Sequence[Write]) -> list[str]:
        return self._fire(m.TriggerEvent.BEFORE_INSERT, writes)

    def after(self, writes: Sequence[Write]) -> list[str]:
        return self._fire(m.TriggerEvent.AFTER_INSERT, writes)

    def _damaged(self, event: m.TriggerEvent, writes: Sequence[Write], err: CorruptStateError) -> list[str]:
        """A registry that cannot be read: an IoTDB write is refused (a BEFORE trigger might refuse
        it, and no AFTER trigger would hear of it); a TDengine table's write goes on with a warning."""
        if any(not w.table for w in writes):
            raise TriggerError(f"{err}. IoTDB writes are refused until it is repaired: restore it from a backup, "
                               "or remove it, which drops every trigger of this home (CREATE them again)") from None
        if event is m.TriggerEvent.BEFORE_INSERT or not any(w.micros for w in writes):
            return []
        return [f"{err}; no trigger fired on this write (the data is written). Restore the file from a backup, or "
                "remove it, which drops every trigger of this home"]

    def _fire(self, event: m.TriggerEvent, writes: Sequence[Write]) -> list[str]:
        home = self.home()
        try:
            entries = [e for e in home.entries() if e.event is event]
        except CorruptStateError as err:
            return self._damaged(event, writes, err)
        if not entries:
            return []
        return self.fire_writes(event, writes, entries)

    def fire_writes(self, event: m.TriggerEvent, writes: Sequence[Write], entries: Sequence[Entry],
                    fire: Fire | None = None) -> list[str]:
        """Fire ``entries`` on the tablets of ``writes`` they match, under their strategies, and add
        the counts; the notices of the failures. ``fire`` calls one trigger (default: the home's
        :meth:`TriggerHome.fire`; the stream node calls its own stateful instances directly)."""
        home = self.home()
        fire = fire or home.fire
        timeout = fire_timeout()
        notices: list[str] = []
        counts: dict[str, Counts] = {}
        timed_out: dict[str, tuple[str, m.FailureStrategy]] = {}  # id -> why the rest of the write fails
        try:
            for write in writes:
                if not write.micros:
                    continue  # nothing was written (a CQ window without points)
                millis = tuple(t // 1000 for t in write.micros)
                for entry in entries:
                    tablet = home.matched(entry, write, millis)
                    if tablet is None:
                        continue
                    error: str | None
                    if entry.id in timed_out:
                        error, strategy = timed_out[entry.id]
                    else:
                        error, strategy, hung = fire(entry, tablet, timeout)
                        if hung:
                            timed_out[entry.id] = (_not_fired(error), strategy)
                    c = counts.setdefault(entry.id, Counts())
                    c.fired += 1
                    if error is None:
                        continue
                    c.failed += 1
                    c.last_error, c.last_error_at = error, datetime.now(UTC).isoformat(timespec="seconds")
                    message = f"trigger {entry.name} failed on {write.device}: {error}"
                    if strategy is m.FailureStrategy.PESSIMISTIC:
                        if event is m.TriggerEvent.BEFORE_INSERT:
                            raise TriggerError(f"Failed to complete the insertion because trigger error before the "
                                               f"insertion: {message} (PESSIMISTIC: nothing was written)")
                        notices.append(f"{message} (PESSIMISTIC: the triggers after it did not fire; the data is "
                                       "written)")
                        return notices
                    notices.append(f"{message} (the data is written)")
        finally:
            home.registry.add_counts(counts)
        return notices


def _not_fired(error: str | None) -> str:
    """Why the rows after one whose trigger's code timed out fail without a call."""
    if error and error.startswith("fire "):
        return "not fired: its fire timed out earlier in this write"
    if error and error.startswith("no instance"):
        return "not fired: making its instance timed out earlier in this write"
    return "not fired: the stream node did not answer it earlier in this write"


LISTENER = InsertTriggers()
listeners.register(LISTENER)
