#!/usr/bin/env bash
# airflow-stream serve: TDengine's and IoTDB's HTTP interfaces over the warehouse.
set -euo pipefail

# [START serve]
airflow-stream serve &                      # TDengine on 127.0.0.1:6041, IoTDB on 127.0.0.1:18080
server=$!
sleep 3
curl -s -u root:taosdata -d "CREATE DATABASE IF NOT EXISTS power" http://127.0.0.1:6041/rest/sql
curl -s -u root:taosdata -d "SHOW DATABASES" http://127.0.0.1:6041/rest/sql/power
curl -s -u root:taosdata --data-binary "meters,location=LA current=10.3,voltage=219i 1648432611249" \
     "http://127.0.0.1:6041/influxdb/v1/write?db=power&precision=ms"
curl -s -u root:root -H "Content-Type: application/json" -d '{"sql": "show databases"}' \
     http://127.0.0.1:18080/rest/v2/query
kill -TERM "$server"                        # finishes the requests in flight, then exits
wait "$server"
# [END serve]
