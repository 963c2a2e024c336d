"""What `airflow-stream receive` and the demo print for a message."""

from __future__ import annotations

import json

from airflow_stream_provider.notify.receiver import describe


def test_describe_prints_one_line_per_event_with_utc_times():
    message = {"messageId": "m", "timestamp": 0, "streams": [
        {"streamName": "power.avg", "events": [
            # 1735689610000 ms is 2025-01-01 00:00:10 UTC
            {"tableName": "avg_d1", "eventType": "WINDOW_CLOSE", "triggerType": "Time",
             "windowStart": 1735689610000, "windowEnd": 1735689620000, "result": {"v": 2.5}},
            {"tableName": "avg_d1", "eventType": "WINDOW_OPEN", "triggerType": "Time",
             "windowStart": 1735689620000000},  # a microsecond table
        ]},
        {"streamName": "power.tick", "events": [
            {"tableName": "tick", "eventType": "ON_TIME", "triggerType": "Period", "eventTime": 1735689600000}]},
    ]}
    assert describe(json.dumps(message)).splitlines() == [
        'power.avg: WINDOW_CLOSE Time avg_d1 [00:00:10.000..00:00:20.000] result={"v": 2.5}',
        "power.avg: WINDOW_OPEN Time avg_d1 [00:00:20.000000]",
        "power.tick: ON_TIME Period tick [00:00:00.000]",
    ]
    assert describe("not json").startswith("(not JSON)")
