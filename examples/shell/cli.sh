#!/usr/bin/env bash
# The airflow-stream command, one example per subcommand.
set -euo pipefail
# [START check]
.venv/bin/airflow-stream check -f examples/tdengine/power.sql
.venv/bin/airflow-stream check "CREATE STREAM s INTERVAL(1m) SLIDING(1m) FROM meters
STREAM_OPTIONS(MAX_DELAY(1s)) NOTIFY('ws://h:1') ON (WINDOW_CLOSE)" || echo "exit status $?"
# [END check]
# [START check_to]
.venv/bin/airflow-stream check --to 3.3.7 -f examples/legacy/migrate.sql
# [END check_to]
# [START sql]
.venv/bin/airflow-stream sql -f examples/tdengine/tables.sql
.venv/bin/airflow-stream sql -d power "SELECT tbname, location, ts, voltage FROM meters WHERE voltage > 220"
.venv/bin/airflow-stream sql --format csv -d power "SELECT * FROM meters" > meters.csv
# [END sql]
# [START load]
.venv/bin/airflow-stream load meters.parquet INTO power.meters
.venv/bin/airflow-stream load meters.csv INTO power.meters --batch-rows 500000
# [END load]
# [START node]
.venv/bin/airflow-stream node start --port 15002
.venv/bin/airflow-stream node status
.venv/bin/airflow-stream node status --json
.venv/bin/airflow-stream node stop
# [END node]
# [START run]
.venv/bin/airflow-stream run power.avg_10s --until-idle
# [END run]
# [START verify]
.venv/bin/airflow-stream verify power.avg_10s --from '2025-01-01 00:00:00' --to '2025-01-02 00:00:00'
.venv/bin/airflow-stream verify power.avg_10s --from 'now - 1h' --format json
.venv/bin/airflow-stream verify power.avg_10s --repair                # exit 0: equal after the repair
# [END verify]
# [START retention]
.venv/bin/airflow-stream retention                   # once; the airflow_stream__retention DAG runs it hourly
# [END retention]
# [START receive]
.venv/bin/airflow-stream receive --port 8765                 # prints each event as it arrives
.venv/bin/airflow-stream receive --port 8765 --json --out notifications.jsonl
.venv/bin/airflow-stream receive --host 0.0.0.0 --port 8765 --token "$TOKEN" --tls-cert c.pem --tls-key k.pem
# [END receive]
# [START selfcheck]
.venv/bin/airflow-stream selfcheck
# [END selfcheck]
