-- A stream declared in the DAG folder (examples/dags/power_streams.py): the highest voltage of each
-- meter of examples/tdengine/tables.sql per minute. Its database is its folder's name, power.
-- [START declaration]
-- on change: recreate and recalculate from 2025-01-01T00:00:00Z
-- freshness: 5m, silent after 3 periods
CREATE STREAM max_voltage_1m INTERVAL(1m) SLIDING(1m) FROM meters PARTITION BY tbname
    INTO max_voltage_1m_out
    AS SELECT _twstart ts, max(voltage) max_voltage, count(*) readings FROM %%trows;
-- [END declaration]
