"""IoTDB's REST API v2: ``GET /ping``, ``POST /rest/v2/insertTablet``, ``/rest/v2/insertRecords``,
``/rest/v2/query`` and ``/rest/v2/nonQuery``, with Basic authentication (``/ping`` needs none).

A tablet or a set of records is one commit per database (a MERGE by device and time: the same
request sent twice writes its points once); insert triggers fire on it as on an INSERT.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from airflow_stream_provider import statements
from airflow_stream_provider.exceptions import StreamDefinitionError, StreamError
from airflow_stream_provider.serve import iotdb_json as ij
from airflow_stream_provider.serve.auth import AuthError, Credentials, basic
from airflow_stream_provider.serve.exchange import Request, Response, json_response
from airflow_stream_provider.sql import parse
from airflow_stream_provider.warehouse import Warehouse
from airflow_stream_provider.warehouse.series import statements as series

log = logging.getLogger(__name__)

_QUERY_RESULTS = "a query or SHOW statement"


@dataclass
class IoTDBService:
    warehouse: Callable[[], Warehouse]
    credentials: Credentials

    def handle(self, request: Request) -> Response:
        path = request.path.rstrip("/") or "/"
        if path == "/ping":
            return json_response(200, ij.status())
        routes = {"/rest/v2/insertTablet": self.insert_tablet, "/rest/v2/insertRecords": self.insert_records,
                  "/rest/v2/query": self.query, "/rest/v2/nonQuery": self.non_query}
        route = routes.get(path)
        if route is None:
            return json_response(404, ij.status(404, f"{path} is not served"))
        if request.method != "POST":
            return json_response(405, ij.status(405, f"{request.method} {path}: use POST"))
        header = request.headers.get("authorization", "").strip()
        try:
            if not header.startswith("Basic "):
                raise AuthError("missing", "UNINITIALIZED_AUTH_ERROR")
            user, password = basic(header[6:])
            if not self.credentials.accepts(user, password):
                raise AuthError("wrong", "WRONG_LOGIN_PASSWORD_ERROR")
        except AuthError as err:
            code = ij.UNINITIALIZED_AUTH if err.kind == "missing" else ij.WRONG_LOGIN_PASSWORD
            return json_response(401, ij.status(code, "UNINITIALIZED_AUTH_ERROR" if err.kind == "missing"
                                                else "WRONG_LOGIN_PASSWORD_ERROR"))
        try:
            payload = ij.load(request.body)
        except ij.RequestError as err:
            return json_response(400, ij.status(err.code, str(err)))
        try:
            return route(payload)
        except ij.RequestError as err:
            return json_response(200, ij.status(err.code, str(err)))
        except StreamDefinitionError as err:
            return json_response(200, ij.status(ij.SQL_PARSE_ERROR, str(err)))
        except StreamError as err:
            return json_response(200, ij.status(ij.EXECUTE_STATEMENT_ERROR, str(err)))

    def _write(self, batches: list[ij.DeviceRows], aligned: bool) -> Response:
        store = series.store_of(self.warehouse())
        written = store.write_points([(b.device, b.times, b.columns) for b in batches], aligned=aligned)
        return json_response(200, ij.status(), f"{written} rows")

    def insert_tablet(self, payload: dict) -> Response:
        rows, aligned = ij.tablet(payload)
        return self._write([rows], aligned)

    def insert_records(self, payload: dict) -> Response:
        rows, aligned = ij.records(payload)
        return self._write(rows, aligned)

    def query(self, payload: dict) -> Response:
        text, limit = ij.sql_of(payload)
        (statement,) = _one(text)
        result = statements.execute(self.warehouse(), statement)
        if result.table is None:
            raise ij.RequestError(f"{statement.kind} is not {_QUERY_RESULTS}: send it to /rest/v2/nonQuery",
                                  ij.SEMANTIC_ERROR)
        return json_response(200, ij.query(result.table, limit))

    def non_query(self, payload: dict) -> Response:
        text, _ = ij.sql_of(payload)
        (statement,) = _one(text)
        result = statements.execute(self.warehouse(), statement)
        for notice in result.notices:
            log.warning("%s: %s", statement.kind, notice)
        return json_response(200, ij.status())


def _one(text: str) -> list:
    parsed = parse(text)
    if len(parsed) != 1:
        raise ij.RequestError(f"one statement a request, not {len(parsed)}")
    return parsed
