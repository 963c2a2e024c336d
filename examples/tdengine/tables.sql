-- Smart-meter tables of the TDengine documentation on the Delta warehouse, then queries over them.
-- Safe to run again: existing tables are kept and a write of an existing timestamp replaces the row.
-- [START tables]
CREATE DATABASE IF NOT EXISTS power PRECISION 'ms';
USE power;

CREATE STABLE IF NOT EXISTS meters (ts TIMESTAMP, current FLOAT, voltage INT, phase FLOAT)
    TAGS (groupid INT, location VARCHAR(24));
CREATE TABLE IF NOT EXISTS d1001 USING meters TAGS (2, 'California.SanFrancisco');

INSERT INTO d1001 VALUES ('2025-01-01 00:00:00', 10.3, 219, 0.31) ('2025-01-01 00:00:10', 12.6, 218, 0.33)
    d1002 USING meters TAGS (3, 'California.LosAngeles')
    VALUES ('2025-01-01 00:00:00', 10.2, 220, 0.23) ('2025-01-01 00:00:10', 11.8, 231, 0.35);
-- [END tables]

-- [START update]
-- An update: the same (subtable, timestamp) again replaces the row.
INSERT INTO d1001 VALUES ('2025-01-01 00:00:10', 12.9, 226, 0.34);
-- [END update]

-- [START queries]
SELECT tbname, location, groupid, ts, current, voltage FROM meters ORDER BY tbname, ts;
SELECT tbname, COUNT(*) AS n, AVG(current) AS avg_current, SPREAD(voltage) AS spread_v
    FROM meters GROUP BY tbname ORDER BY tbname;
-- [END queries]
