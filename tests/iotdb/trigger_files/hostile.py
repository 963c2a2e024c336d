"""Trigger classes that misbehave as the review's T5, T8, T10 and T11 did: they hang, exit or are
interrupted. Each records its calls in <dir>/<name>.log, as counters.Recorder does."""

import json
import sys
import time
from pathlib import Path

from airflow_stream_provider import InsertTrigger


class _Logged(InsertTrigger):
    def validate(self, attributes):
        self.folder = Path(attributes.get_string("dir"))
        self.name = attributes.get_string("name")

    def _log(self, line: str) -> None:
        with (self.folder / f"{self.name}.log").open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")

    def fire(self, tablet):
        self._log("fire " + json.dumps({"timestamps": list(tablet.timestamps)}))
        return True


class HangingCreate(_Logged):
    """on_create hangs (for a minute) while <dir>/<name>.hang exists: so only in the processes
    after the CREATE when the file is made after it."""

    def on_create(self, attributes):
        until = time.monotonic() + 60
        while (self.folder / f"{self.name}.hang").exists() and time.monotonic() < until:
            time.sleep(0.1)


class HangingFire(_Logged):
    def fire(self, tablet):
        super().fire(tablet)
        time.sleep(30)
        return True


class ExitingValidate(_Logged):
    def validate(self, attributes):
        sys.exit(0)


class ExitingFire(_Logged):
    def fire(self, tablet):
        sys.exit(0)


class InterruptedFire(_Logged):
    def fire(self, tablet):
        raise KeyboardInterrupt
