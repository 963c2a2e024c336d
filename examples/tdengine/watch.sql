-- Watching the streams of examples/tdengine/power.sql.
-- [START show]
SHOW power.STREAMS;
SELECT stream_name, status, `trigger` FROM information_schema.ins_streams ORDER BY stream_name;
-- [END show]

-- [START tasks]
SELECT * FROM information_schema.ins_stream_tasks;
-- [END tasks]
