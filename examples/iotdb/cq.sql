-- A continuous query over the device of examples/iotdb/tour.sql: every 20 s, the highest temperature of
-- each 10-second window of the last 20 s, written back to the device as temperature_max.
-- [START cq]
CREATE CQ cq_max
RESAMPLE EVERY 20s
BEGIN
  SELECT max_value(temperature)
  INTO root.ln.wf01.wt01(temperature_max)
  FROM root.ln.wf01.wt01
  GROUP BY(10s)
END;
-- [END cq]

-- [START show]
SHOW CONTINUOUS QUERIES;
-- [END show]

-- [START output]
SELECT temperature_max FROM root.ln.wf01.wt01;
-- [END output]

-- [START drop]
DROP CQ cq_max;
-- [END drop]

-- [START verify_cq]
-- the executions whose ranges start in the span, computed again and compared with the INTO series
VERIFY CQ cq_max FROM 2021-05-11T22:18:00+08:00 TO 2021-05-11T22:19:00+08:00;
VERIFY CQ cq_max REPAIR;
-- [END verify_cq]
