"""Streams: their definitions, computations, outputs and runs.

Importing the package registers the insert-trigger listener with the warehouse
(:mod:`.insert_triggers`), so every process that runs streams or statements fires insert triggers.
"""

from airflow_stream_provider.streams import insert_triggers as _insert_triggers  # noqa: F401
