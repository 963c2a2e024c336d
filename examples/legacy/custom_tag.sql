-- Reference 003's custom tag example, in TDengine's stream syntax before 3.3.7, on the tables of
-- examples/tdengine/tables.sql. Run it a section at a time, with
-- `airflow-stream run power.streams2 --until-idle` after each write.
-- [START create]
CREATE STREAM streams2 TRIGGER AT_ONCE IGNORE UPDATE 0
    INTO st1 TAGS(cc VARCHAR(100)) AS SELECT _wstart, count(*) c1 FROM meters
    PARTITION BY concat('tag-', tbname) AS cc INTERVAL(10s);
-- [END create]

-- [START insert]
INSERT INTO d1001 VALUES ('2025-01-01 00:01:00', 10.3, 219, 0.31) ('2025-01-01 00:01:05', 11.0, 221, 0.32);
INSERT INTO d1002 VALUES ('2025-01-01 00:01:02', 9.8, 220, 0.30);
-- [END insert]

-- [START select]
SELECT tbname, _wstart, c1, cc FROM st1 ORDER BY cc;
-- [END select]

-- [START rewrite]
INSERT INTO d1001 VALUES ('2025-01-01 00:01:05', 12.0, 222, 0.30);
DELETE FROM d1002 WHERE ts = '2025-01-01 00:01:02';
-- [END rewrite]
