"""Airflow notifiers: a TDengine-format notification from any DAG's callbacks."""
