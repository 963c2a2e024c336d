"""Airflow plugin of the provider: the entry point through which Airflow finds its parts: the
stream timetables, and the "Streams" page (a FastAPI app on the api-server at ``/streams``,
linked from Airflow's navigation)."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from airflow_stream_provider.timetables import TIMETABLES

#: where the Streams page's app is mounted on the api-server
URL_PREFIX = "/streams"


def _fastapi_apps() -> list[dict]:
    from airflow_stream_provider.ui.app import create_app

    return [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "Streams"}]


class AirflowStreamPlugin(AirflowPlugin):
    name = "airflow_stream"
    timetables = TIMETABLES
    fastapi_apps = _fastapi_apps()
    external_views = [{
        "name": "Streams",
        "href": URL_PREFIX.lstrip("/") + "/",  # relative to Airflow's base URL
        "destination": "nav",
        "url_route": "streams",
        "category": "browse",
    }]
