"""A small client of Airflow's REST API (v2): pause and unpause DAGs, create backfills and asset events.

Where the API is and who calls it come from ``AIRFLOW_STREAM_API_URL``, ``AIRFLOW_STREAM_API_USER``
and ``AIRFLOW_STREAM_API_PASSWORD``, or the ``[airflow]`` table of ``airflow-stream.toml``
(``url``, ``username``, ``password``); the default is ``http://127.0.0.1:8080`` without a user,
which works when Airflow's simple auth manager makes everyone admin.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime

from airflow_stream_provider import config

DEFAULT_URL = "http://127.0.0.1:8080"
#: how many times a request that can be sent twice without harm (a read, a pause, a token) is sent
#: while Airflow does not answer in time: a busy api-server (its database locked by the scheduler's
#: writes, on SQLite) can take longer than the timeout now and then
ATTEMPTS_ON_TIMEOUT = 3
#: methods whose request can be sent again: a POST that timed out may have created its object
SAFE_TO_REPEAT = frozenset({"GET", "PATCH", "PUT", "DELETE"})


class AirflowApiError(RuntimeError):
    """Airflow's API refused a request or could not be reached; the message says which and why."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.timed_out = False  # no answer within the client's timeout


def configured_url() -> str | None:
    """The API's address as configured for this provider (environment, then ``airflow-stream.toml``)."""
    return os.environ.get("AIRFLOW_STREAM_API_URL") or config.settings().get("airflow", {}).get("url")


class AirflowApi:
    def __init__(self, url: str | None = None, username: str | None = None, password: str | None = None,
                 timeout: float = 10.0, token: str | None = None) -> None:
        section = config.settings().get("airflow", {})
        self.url = (url or configured_url() or DEFAULT_URL).rstrip("/")
        self.username = username or os.environ.get("AIRFLOW_STREAM_API_USER") or section.get("username")
        self.password = password or os.environ.get("AIRFLOW_STREAM_API_PASSWORD") or section.get("password")
        self.timeout = timeout
        self._token: str | None = token  # a caller's own JWT, used as it is

    def _send(self, method: str, path: str, body: dict | None = None, *, auth: bool = True,
              repeatable: bool | None = None) -> dict:
        """Send a request; one that is ``repeatable`` (by default: by its method) is sent again, at
        most :data:`ATTEMPTS_ON_TIMEOUT` times in all, when Airflow does not answer in time."""
        if repeatable is None:
            repeatable = method in SAFE_TO_REPEAT
        attempts = ATTEMPTS_ON_TIMEOUT if repeatable else 1
        attempt = 1
        while True:
            try:
                return self._send_once(method, path, body, auth=auth)
            except AirflowApiError as err:
                if not err.timed_out:
                    raise
                if attempt == attempts:
                    err.args = (f"{err} (sent {attempts} time(s), {self.timeout:g} s each)",)
                    raise
            time.sleep(attempt)
            attempt += 1

    def _send_once(self, method: str, path: str, body: dict | None, *, auth: bool) -> dict:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if auth:
            request.add_header("Authorization", f"Bearer {self.token()}")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                text = response.read().decode()
        except urllib.error.HTTPError as err:
            detail = err.read().decode(errors="replace")[:500]
            raise AirflowApiError(f"Airflow API {method} {path}: HTTP {err.code}: {detail}", err.code) from None
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            error = AirflowApiError(f"Airflow API at {self.url} is not reachable: {reason}")
            error.timed_out = isinstance(reason, TimeoutError)
            raise error from None
        return json.loads(text) if text else {}

    def token(self) -> str:
        if self._token is None:
            if self.username:
                answer = self._send("POST", "/auth/token", {"username": self.username, "password": self.password},
                                    auth=False, repeatable=True)  # (a token more creates nothing)
            else:
                answer = self._send("GET", "/auth/token", auth=False)
            self._token = answer["access_token"]
        return self._token

    def set_paused(self, dag_id: str, paused: bool) -> bool:
        """Pause or unpause a DAG; False when Airflow does not know it yet (not parsed)."""
        try:
            self._send("PATCH", f"/api/v2/dags/{urllib.parse.quote(dag_id)}", {"is_paused": paused})
        except AirflowApiError as err:
            if err.status == 404:
                return False
            raise
        return True

    def asset_id(self, uri: str) -> int | None:
        """The id of the asset whose URI is ``uri``; None while no DAG names it."""
        query = urllib.parse.urlencode({"uri_pattern": uri, "limit": 100})
        answer = self._send("GET", f"/api/v2/assets?{query}")
        return next((int(a["id"]) for a in answer.get("assets", []) if a.get("uri") == uri), None)

    def create_asset_event(self, asset_id: int, extra: dict, partition_key: str | None = None) -> dict:
        """An event of the asset ``asset_id``, which schedules the DAGs waiting for it."""
        body: dict = {"asset_id": asset_id, "extra": extra}
        if partition_key is not None:
            body["partition_key"] = partition_key
        return self._send("POST", "/api/v2/assets/events", body)

    def create_backfill(self, dag_id: str, start: datetime, end: datetime, *, max_active_runs: int = 4,
                        attempts: int = 6) -> dict:
        """A backfill that reruns every run of ``dag_id`` in ``[start, end]``, done ones included.

        Airflow answers 503 when its database was busy (SQLite under concurrent writes); nothing
        was created then, so the request is sent again, after 1, 2, 4, ... seconds."""
        body = {"dag_id": dag_id, "from_date": start.isoformat(), "to_date": end.isoformat(),
                "reprocess_behavior": "completed", "max_active_runs": max_active_runs}
        attempt = 1
        while True:
            try:
                return self._send("POST", "/api/v2/backfills", body)
            except AirflowApiError as err:
                if err.status != 503 or attempt == attempts:
                    raise
            time.sleep(2 ** (attempt - 1))
            attempt += 1

    def dag(self, dag_id: str) -> dict | None:
        """The DAG ``dag_id`` as Airflow's API describes it (``is_paused``, ...); None when Airflow
        does not know it (not parsed yet)."""
        try:
            return self._send("GET", f"/api/v2/dags/{urllib.parse.quote(dag_id)}")
        except AirflowApiError as err:
            if err.status == 404:
                return None
            raise

    def trigger_dag_run(self, dag_id: str, run_id: str, conf: dict, note: str | None = None) -> dict:
        """A run of ``dag_id`` named ``run_id``, without a logical date, its task reading ``conf``;
        sent again while Airflow does not answer in time, a run of that name having been created
        once at most (Airflow answers 409 to the second)."""
        body = {"dag_run_id": run_id, "logical_date": None, "conf": conf, "note": note}
        try:
            return self._send("POST", f"/api/v2/dags/{urllib.parse.quote(dag_id)}/dagRuns", body, repeatable=True)
        except AirflowApiError as err:
            if err.status != 409:
                raise
        return self.dag_run(dag_id, run_id)

    def dag_run(self, dag_id: str, run_id: str) -> dict:
        """The run ``run_id`` of ``dag_id`` (``state``: queued, running, success or failed)."""
        return self._send("GET", f"/api/v2/dags/{urllib.parse.quote(dag_id)}/dagRuns/{urllib.parse.quote(run_id)}")
