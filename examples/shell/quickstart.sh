#!/usr/bin/env bash
# A first stream by hand, from the checkout's top folder after dev/setup.
set -euo pipefail
# [START quickstart]
.venv/bin/airflow-stream sql -f examples/tdengine/tables.sql       # tables and rows
.venv/bin/airflow-stream sql -f examples/tdengine/stream.sql       # the stream avg_10s
.venv/bin/airflow-stream run power.avg_10s --until-idle            # detect, compute, write
.venv/bin/airflow-stream sql -d power "SELECT * FROM avg_10s_out"  # its output
# [END quickstart]
