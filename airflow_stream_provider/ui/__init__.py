"""The "Streams" page of the Airflow UI."""
