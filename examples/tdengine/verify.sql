-- Checking a stream's results against the same triggers computed in batch (examples/tdengine/stream.sql).
-- [START verify]
-- every window the stream has closed, compared with its output table
VERIFY STREAM power.avg_10s;
-- one day of windows
VERIFY STREAM power.avg_10s FROM '2025-01-01 00:00:00' TO '2025-01-02 00:00:00';
-- the last hour, and the windows that differ recalculated, then verified again
VERIFY STREAM power.avg_10s FROM now - 1h REPAIR;
-- [END verify]
