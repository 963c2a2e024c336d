-- A Delta table the team already has, read as a supertable without being copied: each device's rows
-- are a subtable, its site a tag. The table's change data feed is turned on by the attach.
-- [START attach]
CREATE DATABASE IF NOT EXISTS power;
CREATE STABLE power.meters FROM DELTA '/data/readings'
    MAP (TIMESTAMP event_time, TBNAME device_id, TAGS (location = site), COLUMNS (voltage, current))
    ENABLE CHANGE FEED;
-- [END attach]

-- [START stream]
CREATE STREAM power.s1 INTERVAL(10s) SLIDING(10s) FROM power.meters PARTITION BY tbname
    STREAM_OPTIONS(FILL_HISTORY) INTO power.out AS
    SELECT _twstart, avg(voltage) AS v, sum(current) AS c, count(*) AS n FROM %%tbname
    WHERE _c0 >= _twstart AND _c0 < _twend;
-- [END stream]

-- A table of the shared catalog (docs: "The shared catalog"), found by its name there.
-- [START catalog]
CREATE STABLE IF NOT EXISTS power.readings FROM CATALOG iot.readings
    MAP (TIMESTAMP event_time, TBNAME device_id, TAGS (location = site));
-- [END catalog]

-- [START regular]
CREATE TABLE IF NOT EXISTS power.totals FROM DELTA 's3://team-bucket/gold/totals'
    MAP (TIMESTAMP at, COLUMNS (amount)) WRITABLE;
-- [END regular]

-- [START inspect]
SHOW power.STABLES;
DESCRIBE power.meters;
SELECT table_name, source, access FROM information_schema.ins_stables;
-- [END inspect]

-- [START detach]
DROP STABLE power.meters;
-- [END detach]
