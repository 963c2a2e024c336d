"""The "Streams" page of the Airflow UI: a FastAPI app the plugin mounts on the api-server at
``/streams``, shown in Airflow's navigation as an external view.

Every route requires an Airflow user, exactly as Airflow's own API does: a JWT in the
``Authorization: Bearer`` header or in the ``_token`` cookie that Airflow's UI sets at login (the
page is same-origin, so the browser sends it). Plugin apps are served without authentication by
default; here an anonymous request gets 401 and a bad token 403. Reading needs read access to the
stream's DAG, and the trigger list read access to every DAG; Recalculate needs permission to create
runs of its recalculation DAG, and creates the backfill through Airflow's REST API with the caller's
own token. Verify needs read access to the stream's DAG, and its repair the permission to run the
recalculation DAG. A stream's routes check the names in the path and the read permission before any
file is read, and answer one 404 without hints for a stream that does not exist or that the user may
not read.

Nothing here starts Spark but Verify, which computes the stream's triggers in batch in this process
(VERIFY STREAM); the figures come from each stream's files (see
:mod:`airflow_stream_provider.streams.status`).
"""

from __future__ import annotations

import asyncio
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, JSONResponse
from pydantic import BaseModel

from airflow_stream_provider import progress
from airflow_stream_provider.airflow_api import AirflowApi, AirflowApiError, configured_url
from airflow_stream_provider.exceptions import StreamError
from airflow_stream_provider.hooks import bind
from airflow_stream_provider.model.names import CQ_NAMESPACE, DATABASE, STREAM, InvalidName, check_name, name_problem
from airflow_stream_provider.plan.ids import stream_dag_ids
from airflow_stream_provider.plan.stream import plan_stream
from airflow_stream_provider.streams.store import StoredStream, StreamNotFound, StreamStore

STATIC = Path(__file__).with_name("static")
ASSETS = {"streams.js": "text/javascript", "streams.css": "text/css"}
RECENT_EVENTS = 50


async def current_user(request: Request) -> Any:
    """The Airflow user of the request, by Airflow's own rule (401 without credentials, 403 with a
    bad token)."""
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.security import HTTPAuthorizationCredentials

    header = request.headers.get("authorization", "")
    scheme, _, credentials = header.partition(" ")
    bearer = HTTPAuthorizationCredentials(scheme=scheme, credentials=credentials) if credentials else None
    return await get_user(request, None, bearer)


User = Annotated[Any, Depends(current_user)]


def _authorize(user: Any, dag_id: str | None, method: Literal["GET", "POST", "PUT", "DELETE"],
               run: bool = False) -> None:
    """403 unless ``user`` may do ``method`` on the DAG ``dag_id`` (None: on every DAG, as Airflow
    asks when no DAG is named)."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import (
        DagAccessEntity,
        DagDetails,
    )

    allowed = get_auth_manager().is_authorized_dag(
        method=method, access_entity=DagAccessEntity.RUN if run else None,
        details=None if dag_id is None else DagDetails(id=dag_id), user=user)
    if not allowed:
        raise HTTPException(403, f"{user.get_name()} may not {'run' if run else 'read'} {dag_id or 'every DAG'}")


def _json(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


#: the one answer for a stream that does not exist, that the user may not see, or whose name breaks the
#: name rule: no hint tells them apart
NOT_FOUND = "no such stream"


def _visible(user: Any, db: str, name: str) -> tuple[str, str]:
    """The path's (db, name) in lower case once they obey the name rule and ``user`` may read the
    stream's DAG; 404 otherwise. Decided from the names alone, before any file is read."""
    try:
        db, name = check_name(db, DATABASE), check_name(name, STREAM)
    except InvalidName:
        raise HTTPException(404, NOT_FOUND) from None
    try:
        _authorize(user, stream_dag_ids(db, name)[0], "GET")
    except HTTPException:
        raise HTTPException(404, NOT_FOUND) from None
    return db, name


def _stream(db: str, name: str) -> tuple[StreamStore, StoredStream]:
    """The stream, for names :func:`_visible` let through."""
    store = StreamStore()
    try:
        return store, store.get(db, name)
    except StreamNotFound:
        raise HTTPException(404, NOT_FOUND) from None
    except StreamError as err:
        raise HTTPException(404, str(err)) from None


def _rows(db: str | None = None) -> list[dict]:
    from airflow_stream_provider.streams.status import streams_table
    from airflow_stream_provider.warehouse import Warehouse

    return [{k: _json(v) for k, v in row.items()} for row in streams_table(Warehouse(), db).to_pylist()]


def _events(stored: StoredStream) -> tuple[list[dict], list[dict]]:
    """The latest window events, newest first, and closed windows per minute of window end."""
    from airflow_stream_provider.streams.probes import open_delta

    found = open_delta(stored.events_path)
    if found is None:
        return [], []
    table = found.to_pyarrow_table(columns=["event_type", "trigger_type", "group_keys", "window_start", "window_end",
                                            "row_count", "trigger_id"])
    frame = table.to_pandas()
    if frame.empty:
        return [], []
    frame = frame.sort_values(["window_end", "window_start"], ascending=False, na_position="last")
    recent = [{k: _json(v.to_pydatetime() if hasattr(v, "to_pydatetime") else v) for k, v in row.items()}
              for row in frame.head(RECENT_EVENTS).to_dict("records")]
    for row in recent:
        if row.get("row_count") is not None:
            row["row_count"] = int(row["row_count"])
    closed = frame[frame["event_type"] == "WINDOW_CLOSE"].dropna(subset=["window_end"])
    per_minute = closed.groupby(closed["window_end"].dt.floor("min")).size()
    series = [{"at": _json(at.to_pydatetime()), "windows": int(n)} for at, n in per_minute.items()]
    return recent, series


def _recalculations(stored: StoredStream) -> list[dict]:
    """The stream's recalculation requests kept (``ins_stream_recalculates``), newest first."""
    from airflow_stream_provider.streams import recalculations

    return [{"recalc_id": r.recalc_id, "reason": r.reason, "start": _json(r.start), "end": _json(r.end),
             "request_time": _json(r.request_time), "status": r.status, "progress": r.progress,
             "message": r.message} for r in reversed(recalculations.records(stored))]


class RecalculateBody(BaseModel):
    start: datetime
    end: datetime


class VerifyBody(BaseModel):
    start: datetime | None = None
    end: datetime | None = None
    repair: bool = False


def create_app() -> FastAPI:
    bind()  # statements run from the page read Airflow connections through the hooks
    app = FastAPI(title="Streams", description="TDengine-style streams run by airflow-stream-provider",
                  docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/", include_in_schema=False)
    async def page(user: User) -> FileResponse:
        return FileResponse(STATIC / "streams.html", media_type="text/html", headers={"Cache-Control": "no-store"})

    @app.get("/assets/{name}", include_in_schema=False)
    async def asset(name: str, user: User) -> FileResponse:
        if name not in ASSETS:
            raise HTTPException(404, f"no asset {name}")
        return FileResponse(STATIC / name, media_type=ASSETS[name])

    @app.get("/api/streams")
    async def streams(user: User, db: str | None = None) -> JSONResponse:
        if db is not None and name_problem(db, DATABASE) is not None:
            raise HTTPException(404, "no such database")
        rows = await asyncio.to_thread(_rows, db)
        visible = []
        for row in rows:
            try:
                _authorize(user, stream_dag_ids(row["db_name"], row["stream_name"])[0], "GET")
            except HTTPException:
                continue
            visible.append(row)
        return JSONResponse({"streams": visible, "at": datetime.now(UTC).isoformat()})

    @app.get("/api/triggers")
    async def triggers(user: User) -> JSONResponse:
        """The insert triggers (SHOW TRIGGERS) with their fire and failure counts, for a user who may
        read every DAG: a trigger belongs to no DAG, and its last error can hold values written to any
        table of the home. Anyone else gets an empty list, as /api/streams lists only what they may read."""
        from airflow_stream_provider.streams import insert_triggers

        try:
            _authorize(user, None, "GET")
        except HTTPException:
            return JSONResponse({"triggers": [], "at": datetime.now(UTC).isoformat()})
        table = await asyncio.to_thread(insert_triggers.show)
        return JSONResponse({"triggers": table.to_pylist(), "at": datetime.now(UTC).isoformat()})

    @app.get("/api/streams/{db}/{name}")
    async def stream(db: str, name: str, user: User) -> JSONResponse:
        from airflow_stream_provider.streams.status import samples, stream_status
        from airflow_stream_provider.warehouse import Warehouse

        store, stored = _stream(*_visible(user, db, name))
        plan = plan_stream(stored.statement, stored.db, store.load_state(stored.db, stored.name))
        row = await asyncio.to_thread(stream_status, Warehouse(), stored, store)
        recent, windows = await asyncio.to_thread(_events, stored)
        return JSONResponse({
            "stream": {k: _json(v) for k, v in row.items()},
            "sql": stored.text,
            "dag_id": plan.dag_id,
            "recalc_dag_id": plan.recalc_dag_id,
            "events": recent,
            "windows": windows,
            "lag": await asyncio.to_thread(samples, stored),
            "recalculations": await asyncio.to_thread(_recalculations, stored),
            "progress": progress.read(stored.progress_path),
        })

    @app.post("/api/streams/{db}/{name}/recalculate")
    async def recalculate(db: str, name: str, body: RecalculateBody, request: Request, user: User) -> JSONResponse:
        from airflow_stream_provider.streams.lifecycle import create_recalculation

        db, name = _visible(user, db, name)
        _authorize(user, stream_dag_ids(db, name)[1], "POST", run=True)
        _store, stored = _stream(db, name)
        start, end = (t if t.tzinfo else t.replace(tzinfo=UTC) for t in (body.start, body.end))
        token = _token(request)
        api = AirflowApi(url=_api_url(), token=token)  # this api-server, as configured
        try:
            message = await asyncio.to_thread(create_recalculation, stored, start, end, api)
        except StreamError as err:
            raise HTTPException(409 if "still running" in str(err) else 400, str(err)) from None
        except AirflowApiError as err:
            raise HTTPException(502, str(err)) from None
        return JSONResponse({"message": message})

    @app.post("/api/streams/{db}/{name}/verify")
    async def verify(db: str, name: str, body: VerifyBody, request: Request, user: User) -> JSONResponse:
        """VERIFY STREAM, here: reading the stream's DAG is enough to verify it; a repair writes, and
        needs the right to run its recalculation DAG (or its own DAG, for a continuous query)."""
        from airflow_stream_provider.streams.verify import verify as verify_stream
        from airflow_stream_provider.warehouse import Warehouse

        db, name = _visible(user, db, name)
        main, recalc = stream_dag_ids(db, name)
        if body.repair:
            _authorize(user, main if db == CQ_NAMESPACE else recalc, "POST", run=True)
        _stream(db, name)
        start, end = (t if t is None or t.tzinfo else t.replace(tzinfo=UTC) for t in (body.start, body.end))
        try:
            api = AirflowApi(url=_api_url(), token=_token(request)) if body.repair else None
            report = await asyncio.to_thread(verify_stream, Warehouse(database=db), db, name, start, end,
                                             repair=body.repair, api=api)
        except StreamError as err:
            raise HTTPException(400, str(err)) from None
        return JSONResponse(report.to_json())

    return app


def _api_url() -> str:
    """This api-server's API, for calls made with the caller's token: the provider's configured URL,
    else Airflow's ``[api] base_url``, else ``[api] port`` on 127.0.0.1; never an address taken from
    the request, whose Host header the caller chooses."""
    from airflow.configuration import conf

    url = configured_url() or conf.get("api", "base_url", fallback=None)
    return (url or f"http://127.0.0.1:{conf.get('api', 'port', fallback='8080')}").rstrip("/")


def _token(request: Request) -> str:
    from airflow.api_fastapi.auth.managers.base_auth_manager import (
        COOKIE_NAME_JWT_TOKEN,
    )

    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:]
    return request.cookies.get(COOKIE_NAME_JWT_TOKEN, "")

