"""Airflow DAG file: renders every stream of ``$AIRFLOW_STREAM_HOME/streams`` as DAGs
(``stream__<db>__<name>`` and ``stream__<db>__<name>__recalc``), and the retention DAG
(``airflow_stream__retention``) once a database has a retention."""

from airflow_stream_provider.dag_factory import render_retention, render_streams

globals().update(render_streams())
globals().update(render_retention())
