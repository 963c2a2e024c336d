"""Provider metadata read by Airflow's providers manager through the entry point."""

from __future__ import annotations

from airflow_stream_provider import __version__


def get_provider_info() -> dict:
    return {
        "package-name": "airflow-stream-provider",
        "name": "Airflow Stream",
        "description": "TDengine-style `CREATE STREAM` processing on Spark and Delta Lake tables.",
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": "Airflow Stream",
                "external-doc-url": "https://pypi.org/project/airflow-stream-provider/",
                "tags": ["software"],
            }
        ],
        "operators": [
            {
                "integration-name": "Airflow Stream",
                "python-modules": [
                    "airflow_stream_provider.operators.compute",
                    "airflow_stream_provider.operators.notify",
                    "airflow_stream_provider.operators.commit",
                    "airflow_stream_provider.operators.recalculate",
                ],
            }
        ],
        "sensors": [
            {
                "integration-name": "Airflow Stream",
                "python-modules": [
                    "airflow_stream_provider.sensors.checkpoint",
                    "airflow_stream_provider.sensors.event_time",
                ],
            }
        ],
        "triggers": [
            {
                "integration-name": "Airflow Stream",
                "python-modules": [
                    "airflow_stream_provider.triggers.checkpoint",
                    "airflow_stream_provider.triggers.event_time",
                ],
            }
        ],
        "hooks": [
            {"integration-name": "Airflow Stream", "python-modules": ["airflow_stream_provider.hooks.websocket"]}
        ],
        "connection-types": [
            {
                "hook-class-name": "airflow_stream_provider.hooks.websocket.WebSocketHook",
                "connection-type": "stream_ws",
            }
        ],
        "notifications": ["airflow_stream_provider.notifications.websocket.WebSocketNotifier"],
        "plugins": [
            {
                "name": "airflow_stream",
                "plugin-class": "airflow_stream_provider.plugin.AirflowStreamPlugin",
            }
        ],
    }
