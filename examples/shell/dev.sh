#!/usr/bin/env bash
# Working on the provider.
set -euo pipefail
# [START dev]
dev/setup                          # .venv with the test extras, the jars, the servers the tests use
dev/lint                           # import contracts, ruff, mypy
dev/docs                           # the documentation site, warnings as errors
dev/test                           # all of the above, then the whole suite
dev/test -m "not spark and not airflow"   # the unit tests only (no JVM)
dev/test -m soak                   # the soak with faults alone
SOAK_SEED=7 dev/test -m soak       # replay a soak's feed and fault plan
# [END dev]
