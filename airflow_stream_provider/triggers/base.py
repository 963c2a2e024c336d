"""What the stream triggers share: their serialized classpath, the polling loop and its error event."""

from __future__ import annotations

import asyncio
from abc import abstractmethod
from collections.abc import AsyncIterator, Callable

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_stream_provider.hooks import bind

#: the module serialized triggers name: the package, which re-exports every trigger, so that a
#: trigger deferred before a module moved still imports in the triggerer
CLASSPATH_MODULE = "airflow_stream_provider.triggers"

#: the ``status`` of the event a trigger sends when its check failed
ERROR = "error"


class StreamTrigger(BaseTrigger):
    """A trigger that polls ``check()``, a synchronous look at small files that returns None until
    there is something to do."""

    poll_interval: float

    @abstractmethod
    def check(self) -> dict | None:
        """The event to fire, or None while there is nothing to do yet."""

    async def run(self) -> AsyncIterator[TriggerEvent]:
        bind()  # the checks read tables on an object store with the keys of an Airflow connection
        async for event in poll(self.check, self.poll_interval):
            yield event


async def poll(check: Callable[[], dict | None], interval: float) -> AsyncIterator[TriggerEvent]:
    """Run ``check`` in a thread every ``interval`` seconds until it finds something; yield that once.
    A check that raises yields one ``{"status": "error", "message": ...}`` event instead, which the
    task that deferred raises."""
    while True:
        try:
            found = await asyncio.to_thread(check)
        except Exception as err:  # the task reports it; the triggerer's loop carries on
            yield TriggerEvent({"status": ERROR, "message": f"{type(err).__name__}: {err}"})
            return
        if found is not None:
            yield TriggerEvent(found)
            return
        await asyncio.sleep(interval)
