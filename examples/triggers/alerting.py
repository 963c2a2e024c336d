"""Reference 004's ClusterAlertingExample, in Python: an alert for every DOUBLE or FLOAT value above
50 (warning) or 100 (critical), posted as JSON in Alertmanager's alert format to the URL of the
attribute "url".

    CREATE TRIGGER high_temperature AFTER INSERT ON root.ln.**.temperature
      AS 'alerting.ClusterAlertingExample' USING URI 'examples/triggers/alerting.py'
      WITH ("url" = "http://127.0.0.1:9093/api/v2/alerts")
"""

from __future__ import annotations

# [START alerting]
import json
import logging
import urllib.request

from airflow_stream_provider import InsertTrigger, Tablet, TriggerAttributes

log = logging.getLogger(__name__)


class ClusterAlertingExample(InsertTrigger):
    def validate(self, attributes: TriggerAttributes) -> None:
        if not attributes.get_string_or_default("url", "").startswith(("http://", "https://")):
            raise ValueError('the attribute "url" must be an http(s) URL of an Alertmanager-style receiver')

    def on_create(self, attributes: TriggerAttributes) -> None:
        self.url = attributes.get_string("url")
        self.alertname = attributes.get_string_or_default("alertname", "alert_test")
        self.timeout = attributes.get_float_or_default("timeout", 5.0)

    def fire(self, tablet: Tablet) -> bool:
        alerts = []
        for schema, values in tablet.columns():
            if schema.type.value not in ("DOUBLE", "FLOAT"):  # as the example, only floating-point columns
                continue
            series = f"{tablet.device}.{schema.name}"
            for value in values:
                if value is None or value <= 50.0:
                    continue
                severity = "critical" if value > 100.0 else "warning"
                log.info("trigger value > %s", 100 if severity == "critical" else 50)
                alerts.append({
                    "labels": {"alertname": self.alertname, "series": series, "value": str(value),
                               "severity": severity},
                    "annotations": {"summary": "high temperature",
                                    "description": f"{self.alertname}: {series} is {value}"},
                })
        if alerts:
            request = urllib.request.Request(self.url, data=json.dumps(alerts).encode(), method="POST",
                                             headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return 200 <= response.status < 300
        return True
# [END alerting]
