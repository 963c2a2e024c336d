"""Trigger classes for the tests, in the manner of IoTDB's integration-test triggers: they record
what they see in files under the attribute "dir", so that any process (a CLI run, the stream node)
can be checked. Loaded with USING URI, as IoTDB's tests load TriggerFireTimesCounter.jar."""

import fcntl
import json
import os
import time
from pathlib import Path

from airflow_stream_provider import FailureStrategy, InsertTrigger


def _append(path: Path, line: str) -> None:
    with path.open("a", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.write(line + "\n")


class Recorder(InsertTrigger):
    """TriggerFireTimesCounter, with its lifecycle: <dir>/<name>.log gets one line per call, and
    each fire's tablet as JSON."""

    def _log(self, line: str) -> None:
        _append(self.folder / f"{self.name}.log", line)

    def validate(self, attributes):
        self.folder = Path(attributes.get_string("dir"))
        self.name = attributes.get_string("name")
        self._log("validate " + json.dumps(attributes.get_attributes(), sort_keys=True))

    def on_create(self, attributes):
        self._log("on_create " + json.dumps(attributes.get_attributes(), sort_keys=True))

    def restore(self):
        self._log("restore")

    def on_drop(self):
        self._log("on_drop")

    def fire(self, tablet):
        self._log("fire " + json.dumps({"device": tablet.device, "rows": tablet.row_size, "pid": os.getpid(),
                                        "schemas": [[s.name, s.type.value] for s in tablet.schemas],
                                        "timestamps": list(tablet.timestamps),
                                        "values": [list(v) for v in tablet.values]}))
        return True


class Refuser(Recorder):
    """Fails on a value equal to the attribute "bad": by returning False, or raising with
    "raise" = "true"; its strategy is the attribute "strategy"."""

    def on_create(self, attributes):
        super().on_create(attributes)
        self.bad = attributes.get_float("bad")
        self.raises = attributes.get_bool_or_default("raise", False)
        self.strategy = FailureStrategy(attributes.get_string_or_default("strategy", "OPTIMISTIC"))

    def failure_strategy(self):
        return self.strategy

    def fire(self, tablet):
        super().fire(tablet)
        if any(v == self.bad for column in tablet.values for v in column):
            if self.raises:
                raise RuntimeError(f"value {self.bad} is not allowed")
            return False
        return True


class Sleeper(Recorder):
    def fire(self, tablet):
        super().fire(tablet)
        time.sleep(30)
        return True


class Rejecting(InsertTrigger):
    def validate(self, attributes):
        if not attributes.has_attribute("limit"):
            raise ValueError("the attribute limit is required")
        attributes.get_float("limit")


class BrokenCreate(Recorder):
    def on_create(self, attributes):
        raise OSError("cannot open the alert channel")


class BrokenDrop(Recorder):
    def on_drop(self):
        raise OSError("cannot close the alert channel")


class NotATrigger:
    def fire(self, tablet):
        return True
