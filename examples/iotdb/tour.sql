-- IoTDB's SQL beside TDengine's: a database, two rows of one device, and a windowed count.
-- [START tour]
CREATE DATABASE root.ln;
INSERT INTO root.ln.wf01.wt01(time, temperature, status) VALUES
    (2021-05-11T22:18:14.598+08:00, 20.5, true), (2021-05-11T22:18:24+08:00, 21, false);
SELECT count(temperature) FROM root.ln.** GROUP BY ([2021-05-11T22:18:00+08:00, 2021-05-11T22:18:30+08:00), 10s);
-- [END tour]

-- [START series]
CREATE TIMESERIES root.ln.wf01.wt01.humidity WITH DATATYPE=FLOAT, ENCODING=RLE;
SHOW TIMESERIES root.ln.**;
SHOW DEVICES root.ln.**;
-- [END series]

-- [START ttl]
-- keep the last hour of root.ln's points (milliseconds), then every point again
SET TTL TO root.ln 3600000;
UNSET TTL TO root.ln;
-- [END ttl]
