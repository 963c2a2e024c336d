"""An insert trigger that refuses temperatures above the attribute "limit".

    CREATE STATELESS TRIGGER high_temperature BEFORE INSERT ON root.ln.**.temperature
      AS 'high_temperature.HighTemperature' USING URI 'examples/triggers/high_temperature.py'
      WITH ("limit" = "100")

As a BEFORE trigger with the PESSIMISTIC strategy, a ``fire`` that returns False writes nothing of the
statement.
"""

from __future__ import annotations

# [START trigger]
from airflow_stream_provider import FailureStrategy, InsertTrigger, Tablet, TriggerAttributes


class HighTemperature(InsertTrigger):
    def validate(self, attributes: TriggerAttributes) -> None:   # raising fails the CREATE
        attributes.get_float("limit")

    def on_create(self, attributes: TriggerAttributes) -> None:  # once per instance, after validate
        self.limit = attributes.get_float("limit")

    def on_drop(self) -> None:                                   # once, at DROP TRIGGER
        pass

    def restore(self) -> None:                                   # a STATEFUL instance after a node restart
        pass

    def failure_strategy(self) -> FailureStrategy:               # OPTIMISTIC unless said
        return FailureStrategy.PESSIMISTIC

    def fire(self, tablet: Tablet) -> bool:                      # False or an exception: failed
        return all(v is None or v <= self.limit for _, values in tablet.columns() for v in values)
# [END trigger]
