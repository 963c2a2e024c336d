-- A stream over the example meters (examples/tdengine/tables.sql): per subtable, the average current
-- and the highest voltage of every closed 10-second window, into the supertable avg_10s_out.
-- FILL_HISTORY_FIRST counts the rows written before the stream. Safe to run again.
-- [START stream]
USE power;
CREATE STREAM IF NOT EXISTS avg_10s INTERVAL(10s) SLIDING(10s) FROM meters PARTITION BY tbname
    STREAM_OPTIONS(FILL_HISTORY_FIRST)
    INTO avg_10s_out
    AS SELECT _twstart, avg(current), max(voltage) FROM %%tbname WHERE _c0 >= _twstart AND _c0 < _twend;
-- [END stream]

-- [START output]
SELECT tag_tbname, _twstart, avg_current, max_voltage FROM power.avg_10s_out ORDER BY tag_tbname;
-- [END output]
