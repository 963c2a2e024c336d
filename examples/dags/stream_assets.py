"""DAGs of your own scheduled on a stream's output table: each output table is an Airflow asset,
``airflow-stream://<db>/<table>``, and every batch the stream commits (and every recalculation) is an
asset event naming the windows it wrote.

Put this file in Airflow's ``dags_folder`` beside the stream DAGs (examples/dags/power_streams.py).
"""

from __future__ import annotations

from datetime import datetime

# [START asset]
from airflow.sdk import DAG, Asset, PartitionedAssetTimetable, StartOfDayMapper, task

max_voltage = Asset("airflow-stream://power/max_voltage_1m_out")

with DAG(dag_id="max_voltage_report", schedule=[max_voltage], start_date=datetime(2025, 1, 1),
         catchup=False) as report_dag:

    @task
    def report(triggering_asset_events=None) -> None:
        for event in triggering_asset_events[max_voltage]:
            extra = event.extra  # the stream, the windows ({start, end}), the batches, the rows written
            print(extra["stream"], extra["windows"], extra["rows"], extra["recalculation"])

    report()
# [END asset]

# [START partitions]
# one run per day that a window of the stream falls in; a recalculation re-runs the days it rewrote
with DAG(dag_id="max_voltage_daily", schedule=PartitionedAssetTimetable(
        assets=max_voltage, default_partition_mapper=StartOfDayMapper()), catchup=False) as daily_dag:

    @task
    def summarize(dag_run=None) -> None:
        print("the day", dag_run.partition_key)

    summarize()
# [END partitions]
