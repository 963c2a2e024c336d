-- Queries over the example meters (examples/tdengine/tables.sql, after its update).
USE power;

-- [START select]
SELECT tbname, location, ts, voltage FROM meters WHERE voltage > 220 ORDER BY tbname;
-- [END select]

-- [START window_clause]
SELECT tbname, _wstart, _wduration, avg(current) FROM meters
    PARTITION BY tbname INTERVAL(1m) SLIDING(30s) FILL(PREV);
-- [END window_clause]

-- [START delete]
DELETE FROM d1002 WHERE voltage > 230;
-- [END delete]
