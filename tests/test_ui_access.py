"""The Streams page's routes decide access from the path's names alone, before reading any file, and
answer one 404 without hints.

A user with no access asking for ``power/secret_strem`` must not learn that ``secret_stream``
exists, and ``/api/streams/%2e%2e/notes`` must not open ``$AIRFLOW_STREAM_HOME/notes.sql``.
Airflow's auth manager is replaced by a table of the DAG ids each user may read or run (a running
Airflow is what tests/airflow/test_streams_page.py uses); the routes and the store are the
product's.
"""

from __future__ import annotations

import json

import pytest
from fastapi import HTTPException
from fastapi.testclient import TestClient

from airflow_stream_provider.plan.ids import stream_dag_ids
from airflow_stream_provider.plan.state import StreamState
from airflow_stream_provider.sql import parse
from airflow_stream_provider.streams.store import StreamStore
from airflow_stream_provider.ui import app as ui
from tests.test_airflow_api import server

SECRET = "CREATE STREAM power.secret_stream PERIOD(10s) NOTIFY('ws://127.0.0.1:9/')"


class User:
    def __init__(self, name: str, reads: set[str], runs: set[str]) -> None:
        self.name, self.reads, self.runs = name, reads, runs

    def get_name(self) -> str:
        return self.name


@pytest.fixture
def client(tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(tmp_path))
    store = StreamStore(tmp_path)
    (stmt,) = parse(SECRET)
    store.create("power", stmt, SECRET, StreamState.from_json({"created": "2025-01-01T00:00:00+00:00"}))
    # a definition that no longer parses: reading it would answer with its parse error
    (tmp_path / "streams" / "power" / "broken.sql").write_text("CREATE STREAM garbage;\n")
    (tmp_path / "notes.sql").write_text("not a stream\n")
    asked: list[str] = []

    def authorize(user, dag_id, method, run=False):
        asked.append(dag_id)
        if dag_id not in (user.runs if run else user.reads):
            raise HTTPException(403, f"{user.get_name()} may not {'run' if run else 'read'} {dag_id}")

    monkeypatch.setattr(ui, "_authorize", authorize)
    app = ui.create_app()
    holder = {"user": User("nobody", set(), set())}
    app.dependency_overrides[ui.current_user] = lambda: holder["user"]

    def as_user(user: User) -> TestClient:
        holder["user"] = user
        return TestClient(app)

    as_user.asked = asked  # type: ignore[attr-defined]
    return as_user


BODY = {"start": "2025-01-01T00:00:00Z", "end": "2025-01-01T00:02:00Z"}


@pytest.mark.parametrize("path", ["power/secret_stream", "power/secret_strem", "power/broken", "power/nosuch",
                                  "%2e%2e/notes", "power/%2e%2e", "power/a%00b",
                                  "power/" + "s" * 300])
def test_a_user_who_may_not_read_gets_one_404_without_hints(client, path):
    http = client(User("nobody", set(), set()))
    for response in (http.get(f"/api/streams/{path}"), http.post(f"/api/streams/{path}/recalculate", json=BODY)):
        assert response.status_code == 404, response.text
        assert response.json() == {"detail": "no such stream"}


def test_names_that_break_the_rule_are_refused_before_authorization(client):
    http = client(User("nobody", set(), set()))
    for path in ("%2e%2e/notes", "power/%2e%2e", "power/a%00b", "power/" + "s" * 300):
        http.get(f"/api/streams/{path}")
    assert client.asked == []


def test_a_reader_gets_no_hint_either_and_a_broken_stream_still_answers(client):
    main = stream_dag_ids("power", "secret_stream")[0]
    http = client(User("reader", {main, stream_dag_ids("power", "secret_strem")[0],
                                   stream_dag_ids("power", "broken")[0]}, set()))
    assert http.get("/api/streams/power/secret_strem").json() == {"detail": "no such stream"}
    broken = http.get("/api/streams/power/broken")
    assert broken.status_code == 404 and "expected a trigger" in broken.json()["detail"]  # only a reader sees why
    recalc = http.post("/api/streams/power/secret_stream/recalculate", json=BODY)
    assert recalc.status_code == 403  # may read, may not run: as Airflow says


def test_the_listing_refuses_a_bad_database_name(client):
    http = client(User("nobody", set(), set()))
    assert http.get("/api/streams", params={"db": ".."}).status_code == 404


WINDOW = ("CREATE STREAM power.avg1m INTERVAL(1m) SLIDING(1m) FROM power.m1 INTO avg1m_out "
          "AS SELECT _twstart, avg(v) FROM %%trows")


@pytest.mark.parametrize("setting", ["provider", "airflow"])
def test_recalculate_calls_the_configured_api_never_the_request_host(client, tmp_path, monkeypatch, setting):
    (stmt,) = parse(WINDOW)
    StreamStore(tmp_path).create("power", stmt, WINDOW, StreamState.from_json({"created": "2025-01-01T00:00:00+00:00"}))
    configured_requests: list[tuple[str, str, str]] = []
    elsewhere_requests: list[tuple[str, str, str]] = []
    configured, _ = server([(200, {"id": 7})], configured_requests)
    elsewhere, _ = server([], elsewhere_requests)
    configured_url = f"http://127.0.0.1:{configured.server_port}"
    try:
        if setting == "provider":
            monkeypatch.setenv("AIRFLOW_STREAM_API_URL", configured_url)
        else:  # Airflow's own [api] base_url, with a path prefix
            monkeypatch.delenv("AIRFLOW_STREAM_API_URL", raising=False)
            monkeypatch.setenv("AIRFLOW__API__BASE_URL", configured_url + "/airflow")
        main, recalc = stream_dag_ids("power", "avg1m")
        http = client(User("operator", {main, recalc}, {recalc}))
        host = f"127.0.0.1:{elsewhere.server_port}"
        answer = http.post("/api/streams/power/avg1m/recalculate", json=BODY,
                           headers={"Host": host, "Authorization": "Bearer caller-token"})
        assert answer.status_code == 200, answer.text
        assert "backfill 7 of " + recalc in answer.json()["message"]
        prefix = "" if setting == "provider" else "/airflow"
        assert configured_requests == [("POST", prefix + "/api/v2/backfills", "Bearer caller-token")]
        assert elsewhere_requests == []  # the Host header named it: it gets neither the request nor the token
    finally:
        configured.shutdown()
        elsewhere.shutdown()


def test_the_trigger_list_is_shown_only_to_who_may_read_every_dag(client, tmp_path):
    """A trigger belongs to no DAG and its LastError can hold data values written anywhere in the
    home: only a user who may read every DAG (Airflow's DAG access without a DAG id) sees the list."""
    (tmp_path / "triggers").mkdir()
    (tmp_path / "triggers" / "registry.json").write_text(json.dumps({"triggers": [{
        "id": "t1", "name": "secret_alerts", "type": "STATELESS", "event": "AFTER_INSERT",
        "pattern": ["root", "ln", "**"], "class": "alerts.Alert", "uri": None, "install": None}]}))
    (tmp_path / "triggers" / "stats.json").write_text(json.dumps({"t1": {
        "fired": 3, "failed": 1, "last_error": "fire raised RuntimeError: secret value 42.0", "last_error_at": None}}))
    reader = client(User("reader", {stream_dag_ids("power", "secret_stream")[0]}, set()))
    assert reader.get("/api/triggers").json()["triggers"] == []
    admin = client(User("admin", {None}, set()))  # None: every DAG
    (shown,) = admin.get("/api/triggers").json()["triggers"]
    assert shown["TriggerName"] == "secret_alerts" and shown["Failed"] == 1
