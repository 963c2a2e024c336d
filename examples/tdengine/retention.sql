-- Retention: how long a database keeps its rows; the retention run deletes older ones.
-- [START keep]
CREATE DATABASE IF NOT EXISTS power KEEP 30d;
-- TDengine's three tiers: rows go after the last, the longest
CREATE DATABASE IF NOT EXISTS archive KEEP 30d, 180d, 365d;
ALTER DATABASE power KEEP 90d;
-- [END keep]
