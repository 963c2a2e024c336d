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

-- [START health]
-- TDengine 3.4.2.5: how each stream keeps up, and its recalculations of the last hour.
SELECT stream_name, status, realtime_lag_ms, input_rows_per_sec_1m, output_rows_per_sec_1m,
       runner_result_latency_avg_1m_ms, history_progress_pct
FROM information_schema.ins_streams ORDER BY stream_name;
SELECT stream_name, recalc_id, `start`, `end`, progress, status, request_time, message
FROM information_schema.ins_stream_recalculates ORDER BY request_time;
-- [END health]
