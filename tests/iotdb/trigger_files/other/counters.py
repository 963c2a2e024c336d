"""A second file named counters.py with a class named Recorder: a trigger loaded from here must not
be confused with one loaded from ../counters.py."""

from pathlib import Path

from airflow_stream_provider import InsertTrigger


class Recorder(InsertTrigger):
    def on_create(self, attributes):
        self.path = Path(attributes.get_string("dir")) / f"{attributes.get_string('name')}.log"

    def fire(self, tablet):
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write("the other recorder\n")
        return True
