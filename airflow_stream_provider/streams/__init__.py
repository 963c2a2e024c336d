"""Streams: their definitions, computations, outputs and runs.

Importing the package registers the insert-trigger listener with the warehouse
(:mod:`.callbacks`), so every process that runs streams or statements fires insert triggers.
"""

from airflow_stream_provider.streams import callbacks as _callbacks  # noqa: F401
