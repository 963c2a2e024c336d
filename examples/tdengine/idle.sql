-- Meters that stop reporting (TDengine 3.4.1): a meter without readings for 5 minutes of wall-clock
-- time is idle; a row in power.offline_log marks when it went quiet, and another when it came back.
-- [START idle]
CREATE STREAM IF NOT EXISTS power.offline
    SESSION(ts, 10m) FROM power.meters PARTITION BY tbname
    STREAM_OPTIONS(IDLE_TIMEOUT(5m) | EVENT_TYPE(IDLE | RESUME))
    NOTIFY('ws://127.0.0.1:8765/notify') ON (IDLE | RESUME)
    INTO power.offline_log
    AS SELECT cast(_tidleend / 1000000 AS timestamp) AS ts, cast(_tidlestart / 1000000 AS timestamp) AS quiet_since,
              count(*) AS readings_meanwhile
       FROM %%trows;
-- [END idle]
