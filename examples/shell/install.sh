#!/usr/bin/env bash
# Installing the provider.
set -euo pipefail
# [START package]
# into the Python environment of an existing Airflow 3.3
pip install airflow-stream-provider
# the scaled-out Airflow: PostgreSQL, the CeleryExecutor with Redis
pip install 'airflow-stream-provider[scale]'
# [END package]
# [START checkout]
# a checkout, on Debian with Python 3.11, Java 17 and Maven: .venv, the jars, the servers the tests use
dev/setup
.venv/bin/airflow-stream selfcheck
# [END checkout]
