#!/usr/bin/env bash
# The demo, and the whole test suite, from a fresh checkout.
set -euo pipefail
# [START two_commands]
# set everything up, then run the demo: the stream node, Airflow standalone and a WebSocket
# receiver, simulated smart meters and six streams over them, for 10 minutes (Ctrl-C stops it)
dev/setup && .venv/bin/airflow-stream demo

# set everything up, then run the whole test suite (CI runs exactly this: .ci/run)
dev/test
# [END two_commands]
# [START demo_options]
.venv/bin/airflow-stream demo --duration 120 --meters 3 --port 0 --home /tmp/stream-demo
# [END demo_options]
