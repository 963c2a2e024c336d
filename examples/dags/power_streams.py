"""Streams declared in the DAG folder: the ``.sql`` files under ``streams/`` (one statement each, a
subfolder naming the database) and a continuous query written in Python, rendered as the stream DAGs
and, while a declaration and the stream home differ, the deploy DAG ``streams__power__deploy``.

Put this file and its ``streams/`` folder in Airflow's ``dags_folder``, instead of the provider's
DAG file: it renders the streams created with ``airflow-stream sql`` too.
"""

from __future__ import annotations

from pathlib import Path

# [START project]
from airflow_stream_provider import StreamDeclaration, StreamProject

project = StreamProject(
    Path(__file__).parent / "streams",
    name="power",
    streams=[
        StreamDeclaration.of(
            """CREATE CQ voltage_max RESAMPLE EVERY 1m
               BEGIN SELECT max_value(voltage) INTO root.power.d1001(voltage_max)
                     FROM root.power.d1001 GROUP BY(1m) END""",
            recreate=True,
        ),
    ],
)
globals().update(project.dags())
# [END project]
