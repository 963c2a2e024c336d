#!/usr/bin/env bash
# The scaled-out topology.
set -euo pipefail
# [START cluster]
dev/cluster start --workers 2 --cores 1 --memory 1g      # prints the master's URL
.venv/bin/airflow-stream node start --master spark://127.0.0.1:7077
dev/cluster status
.venv/bin/airflow-stream node stop && dev/cluster stop
# [END cluster]
# [START object_store]
export AIRFLOW_STREAM_WAREHOUSE=s3://bucket/prefix
export AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=... AWS_REGION=us-east-1
export AWS_ENDPOINT_URL=http://127.0.0.1:9000            # a store other than AWS, such as MinIO
# [END object_store]
# [START celery]
pip install 'airflow-stream-provider[scale]'
export AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=postgresql+psycopg2://airflow:airflow@db/airflow
export AIRFLOW__CORE__EXECUTOR=CeleryExecutor
export AIRFLOW__CELERY__BROKER_URL=redis://redis:6379/0
airflow celery worker
# [END celery]
# [START compose]
(umask 077; printf 'AIRFLOW_JWT_SECRET=%s\nAIRFLOW_STREAM_NODE_TOKEN=%s\nMINIO_ROOT_PASSWORD=%s\n' \
   "$(openssl rand -hex 32)" "$(openssl rand -hex 32)" "$(openssl rand -hex 16)" > docker/.env)
docker compose --env-file docker/.env -f docker/compose.yaml up --build
# [END compose]
