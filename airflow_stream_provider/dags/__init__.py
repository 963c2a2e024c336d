"""DAG files shipped with the provider; point Airflow's ``dags_folder`` here, or copy them."""
