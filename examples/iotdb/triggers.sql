-- IoTDB triggers: Python classes of examples/triggers/, run from the checkout's top folder.
-- [START high_temperature]
CREATE STATELESS TRIGGER high_temperature BEFORE INSERT ON root.ln.**.temperature
    AS 'high_temperature.HighTemperature' USING URI 'examples/triggers/high_temperature.py'
    WITH ("limit" = "100");
-- [END high_temperature]

-- [START alerting]
CREATE TRIGGER alert AFTER INSERT ON root.ln.**.temperature
    AS 'alerting.ClusterAlertingExample' USING URI 'examples/triggers/alerting.py'
    WITH ("url" = "http://127.0.0.1:9093/api/v2/alerts");
-- [END alerting]

-- [START show]
SHOW TRIGGERS;
-- [END show]

-- [START drop]
DROP TRIGGER high_temperature;
-- [END drop]
