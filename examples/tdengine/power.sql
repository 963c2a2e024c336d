-- Smart meters: the tables of the TDengine reference examples, and streams over them.
-- [START tables]
CREATE DATABASE IF NOT EXISTS power PRECISION 'ms';
USE power;

CREATE STABLE IF NOT EXISTS power.meters (ts TIMESTAMP, current FLOAT, voltage INT, phase FLOAT)
    TAGS (groupid INT, location VARCHAR(24));

INSERT INTO power.d1001 USING power.meters TAGS (2, 'California.SanFrancisco')
    VALUES ('2025-01-01 00:00:00', 10.3, 219, 0.31) ('2025-01-01 00:00:10', 12.6, 218, 0.33)
    power.d1002 USING power.meters TAGS (3, 'California.LosAngeles')
    VALUES ('2025-01-01 00:00:00', 10.2, 220, 0.23);
-- [END tables]

-- [START period]
-- Row count of the supertable every hour.
CREATE STREAM IF NOT EXISTS power.hourly_rows PERIOD(1h)
    INTO power.hourly_rows_out
    AS SELECT cast(_tlocaltime / 1000000 AS TIMESTAMP), count(*) FROM power.meters;
-- [END period]

-- [START interval_notify]
-- Per-meter one-minute averages, notified on open and close.
CREATE STREAM IF NOT EXISTS power.avg_current INTERVAL(1m) SLIDING(1m) FROM power.meters PARTITION BY tbname
    STREAM_OPTIONS(WATERMARK(5s) | FILL_HISTORY('2025-01-01 00:00:00'))
    NOTIFY('ws://127.0.0.1:8765/notify') ON (WINDOW_OPEN | WINDOW_CLOSE)
    INTO power.avg_current_out OUTPUT_SUBTABLE(concat('avg_', tbname))
    TAGS (meter VARCHAR(64) AS tbname)
    AS SELECT _twstart, avg(current), max(voltage) FROM %%tbname WHERE ts >= _twstart AND ts < _twend;
-- [END interval_notify]

-- [START event_window]
-- Over-voltage episodes lasting at least 30 seconds.
CREATE STREAM IF NOT EXISTS power.overvoltage
    EVENT_WINDOW(START WITH voltage > 225 END WITH voltage <= 225) TRUE_FOR(30s)
    FROM power.meters PARTITION BY tbname
    NOTIFY('ws://127.0.0.1:8765/notify') ON (WINDOW_CLOSE)
    INTO power.overvoltage_out
    AS SELECT _twstart, _twend, max(voltage), _twrownum FROM %%trows;
-- [END event_window]

-- [START state_keys]
-- Operating modes of each meter (TDengine 3.4.x): a window per run of (voltage above 220, phase above
-- 0.3); each window ends where the next begins, and the runs at or below 220 V are not reported.
CREATE STREAM IF NOT EXISTS power.modes
    STATE_WINDOW(voltage > 220, phase > 0.3) EXTEND(1) ZEROTH_STATE(FALSE, NO_ZEROTH)
    FROM power.meters PARTITION BY tbname
    NOTIFY('ws://127.0.0.1:8765/notify') ON (WINDOW_OPEN | WINDOW_CLOSE)
    INTO power.modes_out
    AS SELECT _twstart, _twend, count(*), avg(current) FROM %%trows;
-- [END state_keys]

-- [START count_window]
-- A notification for every 10 readings with a current above zero; results are not stored.
CREATE STREAM IF NOT EXISTS power.every_ten COUNT_WINDOW(10, 10, current) FROM power.meters PARTITION BY tbname
    STREAM_OPTIONS(CALC_NOTIFY_ONLY | PRE_FILTER(current > 0))
    NOTIFY('ws://127.0.0.1:8765/notify') ON (WINDOW_CLOSE)
    AS SELECT avg(current) FROM %%trows;
-- [END count_window]
