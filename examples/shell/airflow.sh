#!/usr/bin/env bash
# Airflow and the stream DAGs.
set -euo pipefail
# [START dags_folder]
export AIRFLOW__CORE__DAGS_FOLDER=$(.venv/bin/python -c 'import airflow_stream_provider, os; print(os.path.dirname(airflow_stream_provider.__file__) + "/dags")')
# [END dags_folder]
# [START backfill]
airflow backfill create --dag-id stream__power__avg_10s__recalc \
    --from-date 2025-01-01T00:00:00 --to-date 2025-01-01T01:00:00
# [END backfill]
# [START api]
export AIRFLOW_STREAM_API_URL=http://127.0.0.1:8080
export AIRFLOW_STREAM_API_USER=admin AIRFLOW_STREAM_API_PASSWORD=admin
# [END api]
# [START spark_connect]
# the stream node's Spark Connect, with its token as the password (read from the environment)
export AIRFLOW_CONN_SPARK_CONNECT='{"conn_type": "spark_connect", "host": "10.0.0.5", "port": 15002,
    "password": "<the token in node/token>"}'
# [END spark_connect]
# [START stream_ws]
# a notification receiver: a password alone is sent as a bearer token, over wss:// only
export AIRFLOW_CONN_STREAM_WS_DEFAULT='{"conn_type": "stream_ws", "host": "alerts.example.com", "port": 443,
    "password": "<token>", "extra": {"headers": {"X-Team": "ops"}, "verify": true}}'
# more connections, each serving the receivers on its host and port
export AIRFLOW_STREAM_NOTIFY_CONN_IDS=stream_ws_default,stream_ws_ops
# [END stream_ws]
# [START storage]
# the object store of an s3:// warehouse: login the key id, password the secret
export AIRFLOW_CONN_WAREHOUSE_S3='{"conn_type": "aws", "login": "<access key id>", "password": "<secret key>",
    "extra": {"endpoint_url": "http://minio:9000", "region_name": "us-east-1"}}'
export AIRFLOW_STREAM_STORAGE_CONN_ID=warehouse_s3
# [END storage]
