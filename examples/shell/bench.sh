#!/usr/bin/env bash
# The benchmarks, from the checkout's top folder; each prints its table and whether it meets its target.
set -euo pipefail
# [START bench]
.venv/bin/python bench/ingest.py        # --rows 2000000 --subtables 100
.venv/bin/python bench/windows.py       # --rows 2000000 --groups 100 --repeat 3
.venv/bin/python bench/compute.py       # --groups 100 --windows 100 --loop 40
.venv/bin/python bench/verify.py        # --meters 100 --minutes 1440
.venv/bin/python bench/notify.py        # --events 50000 --latency-samples 200
.venv/bin/python bench/latency.py       # --windows 50 [--skip-airflow] [--skip-assets]
.venv/bin/python bench/iotdb.py         # --devices 1000 --seconds 3600 --statements 20 --repeat 3 --load-rows 10000 --loads 5
.venv/bin/python -m bench.soak --minutes 5 --seed 7    # default --minutes 10, a random seed
.venv/bin/python bench/external.py      # --seconds 60 --meters 100
.venv/bin/python bench/scale.py         # --seconds 20000 --windows 15 --batches 40
.venv/bin/python bench/load.py --streams 1,5,20 --paths low_latency,airflow --minutes 5
.venv/bin/python bench/peers.py         # --rows 2000000 --groups 100 --repeat 3 --parallelism 2
# [END bench]
