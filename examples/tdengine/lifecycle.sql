-- The lifecycle of a stream (examples/tdengine/stream.sql). STOP and START pause and unpause the
-- stream's DAGs, RECALCULATE creates an Airflow backfill: these need Airflow's API.
-- [START stop_start]
STOP STREAM IF EXISTS power.avg_10s;
START STREAM IF EXISTS power.avg_10s;
-- or: resume without processing the rows written while stopped
START STREAM IF EXISTS IGNORE UNTREATED power.avg_10s;
-- [END stop_start]

-- [START recalculate]
RECALCULATE STREAM power.avg_10s FROM '2025-01-01 00:00:00' TO '2025-01-01 01:00:00';
-- [END recalculate]

-- [START drop]
DROP STREAM IF EXISTS power.avg_10s;
-- [END drop]
