-- Watching the streams of examples/tdengine/power.sql.
-- [START show]
SHOW power.STREAMS;
SELECT stream_name, status, `trigger` FROM information_schema.ins_streams ORDER BY stream_name;
-- [END show]

-- [START find]
-- TDengine 3.4.x: the streams named like a pattern, and the statement that created one.
SHOW power.STREAMS LIKE 'mode%';
SHOW CREATE STREAM power.modes;
-- [END find]

-- [START tasks]
SELECT * FROM information_schema.ins_stream_tasks;
-- [END tasks]
