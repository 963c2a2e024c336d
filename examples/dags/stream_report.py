"""DAGs of your own beside the stream DAGs: one waits for a stream's windows with the provider's
sensor, one sends a TDengine-format notification when a task fails.

Put this file in Airflow's ``dags_folder`` beside the provider's DAG file.
"""

from __future__ import annotations

from datetime import datetime

# [START sensor]
from airflow.sdk import DAG, task

from airflow_stream_provider import StreamCheckpointSensor

with DAG(
    dag_id="power_avg_10s_report",
    schedule="@continuous",
    max_active_runs=1,
    start_date=datetime(2025, 1, 1),
    catchup=False,
    tags=["stream:power.avg_10s"],
) as report_dag:
    # deferred in the triggerer until the detector of power.avg_10s commits window events
    windows = StreamCheckpointSensor(task_id="wait_for_windows", stream="power.avg_10s")

    @task
    def report() -> None:
        print("new windows in power.avg_10s_out")

    windows >> report()
# [END sensor]

# [START notifier]
from airflow.providers.standard.operators.bash import BashOperator

from airflow_stream_provider import WebSocketNotifier

with DAG(
    dag_id="nightly_export",
    schedule="@daily",
    start_date=datetime(2025, 1, 1),
    catchup=False,
    # an ON_TIME event whose result holds the DAG, run, task, try and state, and the extra result
    on_failure_callback=WebSocketNotifier(urls="ws://127.0.0.1:8765/notify", result={"job": "export"}),
) as notifier_dag:
    BashOperator(task_id="export", bash_command="airflow-stream sql --format csv 'SELECT * FROM power.meters'")
# [END notifier]
