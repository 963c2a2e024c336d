"""TDengine's HTTP interfaces as taosAdapter 3.x serves them: ``POST /rest/sql[/<db>]`` (one
statement a request, the answer of :mod:`.tdengine_json`), ``GET /rest/login/<user>/<password>``,
and the schemaless writes ``/influxdb/v1/write`` and ``/opentsdb/v1/put/{json,telnet}/<db>``.

Every request but the login is authenticated: Basic, ``Taosd <token>`` (or ``Bearer``, or
``?token=``) with a token of the login; the line protocol also takes ``u``/``p`` and InfluxDB
2's ``Token user:password``. Wrong credentials get HTTP 401.
"""

from __future__ import annotations

import logging
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from airflow_stream_provider import statements
from airflow_stream_provider.exceptions import StreamDefinitionError, StreamError
from airflow_stream_provider.serve import lineproto, opentsdb, schemaless
from airflow_stream_provider.serve import tdengine_json as tj
from airflow_stream_provider.serve.auth import AuthError, Credentials, Tokens, basic
from airflow_stream_provider.serve.exchange import Request, Response, json_response
from airflow_stream_provider.sql import parse
from airflow_stream_provider.warehouse import Warehouse
from airflow_stream_provider.warehouse import schemaless as writes

log = logging.getLogger(__name__)


@dataclass
class TDengineService:
    warehouse: Callable[[str | None], Warehouse]  # a warehouse whose current database is the one given
    credentials: Credentials
    tokens: Tokens
    #: the tag whose value names a row's subtable (TDengine's smlChildTableName), or None
    name_tag: str | None = None
    max_body: int = 64 * 1024 * 1024

    def handle(self, request: Request) -> Response:
        path = request.path.rstrip("/")
        parts = path.split("/")
        if request.method == "GET" and len(parts) == 5 and parts[1:3] == ["rest", "login"]:
            return self.login(parts[3], parts[4])
        if request.method != "POST":
            return json_response(405, tj.error(tj.UNSUPPORTED_URL, f"{request.method} {path} is not served"))
        if path == "/rest/sql" or (len(parts) == 4 and parts[1:3] == ["rest", "sql"]):
            return self.sql(request, parts[3] if len(parts) == 4 else None)
        if path == "/influxdb/v1/write" or path == "/influxdb/v1/api/v2/write":
            return self.influxdb(request)
        if len(parts) == 6 and parts[1:4] in (["opentsdb", "v1", "put"],) and parts[4] in ("json", "telnet"):
            return self.opentsdb(request, parts[4], parts[5])
        return json_response(404, tj.error(tj.UNSUPPORTED_URL, f"{path} is not served"))

    # --- authentication --------------------------------------------------------------------------

    def _authenticate(self, request: Request, *, influx: bool = False) -> None:
        header = request.headers.get("authorization", "").strip()
        token = request.query.get("token")
        if not header and influx and "u" in request.query:
            user, password = request.query.get("u", ""), request.query.get("p", "")
        elif not header and token:
            return self._token(token)
        elif not header:
            raise AuthError("missing", tj.DESCRIPTIONS[tj.NO_AUTH_INFO])
        elif header.startswith("Basic "):
            user, password = basic(header[6:])
        elif header.startswith(("Taosd ", "Bearer ")):
            return self._token(header.split(" ", 1)[1].strip())
        elif influx and header.startswith("Token "):
            user, _, password = header[6:].strip().partition(":")
        else:
            raise AuthError("type", tj.DESCRIPTIONS[tj.INVALID_AUTH_TYPE])
        if not self.credentials.accepts(user, password):
            raise AuthError("wrong", tj.DESCRIPTIONS[tj.RPC_AUTH_FAILURE])

    def _token(self, token: str) -> None:
        if not self.tokens.valid(token, self.credentials):
            raise AuthError("token", tj.DESCRIPTIONS[tj.RPC_AUTH_FAILURE])

    def login(self, user: str, password: str) -> Response:
        if not user or len(user) > 24 or not password:
            return json_response(400, tj.error(tj.GEN_TAOSD_TOKEN_ERR))
        if not self.credentials.accepts(user, password):
            return json_response(401, tj.error(tj.RPC_AUTH_FAILURE))
        return json_response(200, {"code": 0, "desc": self.tokens.issue(self.credentials)})

    # --- SQL -------------------------------------------------------------------------------------

    def sql(self, request: Request, db: str | None) -> Response:
        try:
            self._authenticate(request)
        except AuthError as err:
            code = {"missing": tj.NO_AUTH_INFO, "type": tj.INVALID_AUTH_TYPE, "basic": tj.INVALID_BASIC_AUTH,
                    "token": tj.RPC_AUTH_FAILURE}.get(err.kind, tj.RPC_AUTH_FAILURE)
            return json_response(401, tj.error(code, str(err)))
        req_id = request.query.get("req_id", "")
        if req_id and not req_id.lstrip("-").isdigit():
            return json_response(400, tj.error(tj.COMMON_ERROR, f"illegal param, req_id must be numeric {req_id!r}"))
        note = f"req_id={req_id}" if req_id else ""
        zone: tzinfo | None = None
        zone_name = request.query.get("conn_tz") or request.query.get("tz")
        if zone_name:
            try:
                zone = ZoneInfo(zone_name)
            except (ZoneInfoNotFoundError, ValueError):
                return json_response(400, tj.error(tj.COMMON_ERROR, f"unknown time zone {zone_name}"))
        if not request.body:
            return json_response(400, tj.error(tj.NO_MSG_INPUT))
        try:
            text = request.body.decode("utf-8").strip()
        except UnicodeDecodeError:
            return json_response(400, tj.error(tj.COMMON_ERROR, "the statement is not UTF-8 text"))
        if not text:
            return json_response(400, tj.error(tj.NO_SQL_INPUT))
        return json_response(200, self._run(text, db, zone, request.query.get("row_with_meta") == "true"), note)

    def _run(self, text: str, db: str | None, zone: tzinfo | None, objects: bool) -> dict:
        try:
            parsed = parse(text)
        except StreamDefinitionError as err:
            return tj.error(tj.SYNTAX_ERROR, f"syntax error: {err}")
        if len(parsed) != 1:
            return tj.error(tj.SYNTAX_ERROR, f"syntax error: one statement a request, not {len(parsed)}")
        try:
            result = statements.execute(self.warehouse(db), parsed[0])
        except StreamError as err:
            return tj.error(_code_of(err), str(err))
        except Exception as err:
            if not _is_spark_error(err):
                raise
            return tj.error(tj.COMMON_ERROR, str(err).strip().splitlines()[0])
        for notice in result.notices:
            log.warning("%s: %s", parsed[0].kind, notice)
        if result.table is None:
            return tj.affected(result.rows)
        answer = tj.query(result.table, zone)
        if objects:
            names = [c[0] for c in answer["column_meta"]]
            answer["data"] = [dict(zip(names, row)) for row in answer["data"]]
        return answer

    # --- schemaless ------------------------------------------------------------------------------

    def influxdb(self, request: Request) -> Response:
        try:
            self._authenticate(request, influx=True)
        except AuthError as err:
            return json_response(401, {"code": "forbidden", "message": str(err)})
        db = request.query.get("db") or request.query.get("bucket", "").split("/")[0]
        if not db:
            return json_response(400, _influx_bad("db required", "get db query"))
        precision = request.query.get("precision") or "ns"
        try:
            body = decoded(request, self.max_body)
            found = lineproto.parse(body.decode("utf-8"))
            rows = schemaless.rows_of(found, precision, _now_us(), self.name_tag)
        except UnicodeDecodeError:
            return json_response(400, _influx_bad("the body is not UTF-8 text", "read line"))
        except (lineproto.ProtocolError, OSError, EOFError, zlib.error) as err:
            line = err.line if isinstance(err, lineproto.ProtocolError) else 0
            return json_response(400, _influx_bad(f"unable to parse: {err}", "parse line", line))
        return self._write(db, rows, lambda message: json_response(500, {"code": "internal error",
                                                                          "message": message}))

    def opentsdb(self, request: Request, kind: str, db: str) -> Response:
        try:
            self._authenticate(request)
        except AuthError as err:
            return json_response(401, {"code": 401, "message": str(err)})
        try:
            body = decoded(request, self.max_body)
            now = _now_us()
            found = opentsdb.parse_json(body, now) if kind == "json" else opentsdb.parse_telnet(body.decode(), now)
            rows = schemaless.rows_of(found, "u", now, self.name_tag)
        except (lineproto.ProtocolError, UnicodeDecodeError, OSError, EOFError, zlib.error) as err:
            return json_response(400, {"code": 400, "message": str(err)})
        return self._write(db, rows, lambda message: json_response(500, {"code": 500, "message": message}))

    def _write(self, db: str, rows: list[schemaless.SupertableRows], failed: Callable[[str], Response]) -> Response:
        try:
            written = writes.write(self.warehouse(db), db, rows)
        except StreamError as err:
            return failed(str(err))
        return Response(204, note=f"{written} rows")


def _influx_bad(message: str, op: str, line: int = 0) -> dict:
    return {"code": "invalid", "message": message, "op": op, "err": message, "line": line}


def decoded(request: Request, limit: int) -> bytes:
    """The body, inflated when it is gzip (as Telegraf sends it), at most ``limit`` bytes."""
    if request.headers.get("content-encoding", "").lower() != "gzip":
        return request.body
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = inflate.decompress(request.body, limit + 1)
    if len(out) > limit or inflate.unconsumed_tail:
        raise lineproto.ProtocolError(f"the inflated body is larger than {limit} bytes")
    return out


def _now_us() -> int:
    return time.time_ns() // 1000


def _code_of(err: StreamError) -> int:
    text = str(err).lower()
    if isinstance(err, StreamDefinitionError) and getattr(err, "line", None) is not None:
        return tj.SYNTAX_ERROR
    if "does not exist" in text:
        return tj.DB_NOT_EXIST if text.startswith("database") or "database " in text.split("does not")[0] \
            else tj.TABLE_NOT_EXIST
    return tj.COMMON_ERROR


def _is_spark_error(err: Exception) -> bool:
    try:
        from pyspark.errors import PySparkException
    except ImportError:
        return False
    return isinstance(err, PySparkException)

