-- Voltage alarms of two levels (TDengine 3.4.0's sub-event windows): an alarm opens when a meter reads
-- 230 V or more; each change between level 0 (240 V or more) and level 1 (230 V or more) closes a
-- sub-window and opens the next, and a reading under 220 V ends the alarm. power.voltage_alarms
-- holds a row per sub-window, and at the alarm's start the whole alarm's.
-- [START alarm]
CREATE STREAM IF NOT EXISTS power.alarms
    EVENT_WINDOW(START WITH (voltage >= 240, voltage >= 230) END WITH voltage < 220) TRUE_FOR(10s)
    FROM power.meters PARTITION BY tbname
    NOTIFY('ws://127.0.0.1:8765/notify') ON (WINDOW_OPEN | WINDOW_CLOSE)
    INTO power.voltage_alarms
    AS SELECT _twstart AS ts, count(*) AS readings, max(voltage) AS peak FROM %%trows;
-- [END alarm]
