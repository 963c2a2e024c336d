"""IoTDB's session protocol (the ``IClientRPCService`` the ``apache-iotdb`` ``Session`` speaks): the
calls of one connection, answered from the warehouse.

Served: openSession (the credentials of the REST API; wrong ones: 801), closeSession,
requestStatementId, getTimeZone/setTimeZone, setStorageGroup, createTimeseries,
createAlignedTimeseries, createMultiTimeseries, insertRecord(s), insertStringRecord(s),
insertRecordsOfOneDevice, insertStringRecordsOfOneDevice, insertTablet(s), deleteData,
deleteTimeseries, executeStatement/executeQueryStatement/executeUpdateStatement and their V2
forms, fetchResults(V2) and closeOperation. Any other call is answered with IoTDB's
UNSUPPORTED_OPERATION (300) naming it.

A write is one :meth:`SeriesStore.write_points` call: one commit per database, all of its points or
none, insert triggers firing as on an INSERT; the same points sent again overwrite themselves.
Sessions and open queries belong to their connection, as IoTDB's do.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
from iotdb.thrift.common.ttypes import TSStatus
from iotdb.thrift.rpc import IClientRPCService as rpc
from iotdb.thrift.rpc import ttypes as tt
from thrift.Thrift import TApplicationException

from airflow_stream_provider import model as m
from airflow_stream_provider import statements
from airflow_stream_provider.exceptions import StreamDefinitionError, StreamError
from airflow_stream_provider.serve import iotdb_json as ij
from airflow_stream_provider.serve import iotdb_wire as wire
from airflow_stream_provider.serve.auth import Credentials
from airflow_stream_provider.sql import parse
from airflow_stream_provider.warehouse import Warehouse
from airflow_stream_provider.warehouse.series import statements as series

log = logging.getLogger(__name__)

_ENCODINGS = {0: "PLAIN", 1: "DICTIONARY", 2: "RLE", 3: "DIFF", 4: "TS_2DIFF", 5: "BITMAP", 6: "GORILLA_V1",
              7: "REGULAR", 8: "GORILLA", 9: "ZIGZAG", 11: "CHIMP", 12: "SPRINTZ", 13: "RLBE"}
_COMPRESSORS = {0: "UNCOMPRESSED", 1: "SNAPPY", 2: "GZIP", 3: "LZO", 4: "SDT", 5: "PAA", 6: "PLA", 7: "LZ4",
                8: "ZSTD", 9: "LZMA2"}
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
DEFAULT_FETCH_SIZE = 5000


def status(code: int = wire.SUCCESS, message: str = "Execute successfully") -> TSStatus:
    return TSStatus(code=code, message=message)


@dataclass
class SessionService:
    """What every connection shares: the warehouse, the credentials and the id counters."""

    warehouse: Callable[[], Warehouse]
    credentials: Credentials
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def next_id(self) -> int:
        with self._lock:
            return next(self._ids)

    def handler(self) -> SessionHandler:
        return SessionHandler(self)


@dataclass
class _Query:
    statement_id: int
    columns: wire.Columns
    sent: int = 0


class _Refused(Exception):
    def __init__(self, code: int, message: str) -> None:
        self.code = code
        super().__init__(message)


def _guarded(call: Callable[[], Any], answer: Callable[[TSStatus], Any]) -> Any:
    """Run ``call``; a refusal or a failed statement becomes ``answer`` of its status."""
    try:
        return call()
    except _Refused as err:
        return answer(status(err.code, str(err)))
    except (wire.WireError, ij.RequestError) as err:
        return answer(status(err.code, str(err)))
    except StreamDefinitionError as err:
        return answer(status(wire.SQL_PARSE_ERROR, str(err)))
    except StreamError as err:
        return answer(status(wire.EXECUTE_STATEMENT_ERROR, str(err)))


class SessionHandler:
    """The ``IClientRPCService`` calls of one connection."""

    def __init__(self, service: SessionService) -> None:
        self.service = service
        self.sessions: dict[int, str] = {}  # session id -> its time zone
        self.queries: dict[int, _Query] = {}

    def __getattr__(self, name: str) -> Callable[..., Any]:
        result = getattr(rpc, f"{name}_result", None)
        if name.startswith("_") or result is None:
            raise AttributeError(name)
        return lambda *_: _unsupported(name, result)

    # --- sessions --------------------------------------------------------------------------------

    def _session(self, session_id: int) -> None:
        if session_id not in self.sessions:
            raise _Refused(wire.NOT_LOGIN, "Log in failed. Either you are not authorized or the session has "
                                           "timed out.")

    def openSession(self, req: tt.TSOpenSessionReq) -> tt.TSOpenSessionResp:
        version = tt.TSProtocolVersion.IOTDB_SERVICE_PROTOCOL_V3
        if not self.service.credentials.accepts(req.username or "", req.password or ""):
            log.warning("session refused for user %r", req.username)
            return tt.TSOpenSessionResp(status(wire.WRONG_LOGIN_PASSWORD, "Authentication failed."), version)
        session_id = self.service.next_id()
        self.sessions[session_id] = req.zoneId or "UTC"
        return tt.TSOpenSessionResp(status(), version, session_id, {"timestamp_precision": "ms"})

    def closeSession(self, req: tt.TSCloseSessionReq) -> TSStatus:
        self.sessions.pop(req.sessionId, None)
        return status()

    def requestStatementId(self, sessionId: int) -> int:
        if sessionId not in self.sessions:
            raise TApplicationException(TApplicationException.INTERNAL_ERROR, "the session is not open")
        return self.service.next_id()

    def getTimeZone(self, sessionId: int) -> tt.TSGetTimeZoneResp:
        zone = self.sessions.get(sessionId)
        if zone is None:
            return tt.TSGetTimeZoneResp(status(wire.NOT_LOGIN, "the session is not open"), "")
        return tt.TSGetTimeZoneResp(status(), zone)

    def setTimeZone(self, req: tt.TSSetTimeZoneReq) -> TSStatus:
        def run() -> TSStatus:
            self._session(req.sessionId)
            self.sessions[req.sessionId] = req.timeZone
            return status()
        return _guarded(run, lambda s: s)

    # --- schema ----------------------------------------------------------------------------------

    def _store(self) -> Any:
        return series.store_of(self.service.warehouse())

    def setStorageGroup(self, sessionId: int, storageGroup: str) -> TSStatus:
        def run() -> TSStatus:
            self._session(sessionId)
            path = ij.device_path(storageGroup)
            store = self._store()
            if any(db.path == path for db in store.databases()):
                raise _Refused(wire.DATABASE_ALREADY_EXISTS, f"{path} has already been created as database")
            store.create_database(path)
            return status()
        return _guarded(run, lambda s: s)

    def _create(self, session_id: int, paths: list[str], types: list[int], encodings: list[int] | None,
                compressors: list[int] | None, aligned: bool, extras: dict[str, Any]) -> TSStatus:
        def run() -> TSStatus:
            self._session(session_id)
            given = [name for name, value in extras.items() if value and any(v for v in value if v)]
            if given:
                raise _Refused(wire.UNSUPPORTED_OPERATION, f"{', '.join(given)} of a timeseries are not stored here")
            if not len(paths) == len(types):
                raise _Refused(wire.ILLEGAL_PARAMETER, f"{len(paths)} paths but {len(types)} data types")
            definitions = []
            for i, (path, code) in enumerate(zip(paths, types, strict=True)):
                series_path = ij.device_path(path)
                if len(series_path.nodes) < 3:
                    raise _Refused(wire.ILLEGAL_PARAMETER, f"{path} is not a timeseries path root.db.device.x")
                encoding = _ENCODINGS.get(encodings[i]) if encodings else None
                compressor = _COMPRESSORS.get(compressors[i]) if compressors else None
                definitions.append(m.TimeseriesDefinition(series_path, m.SeriesType(wire.type_name(code)),
                                                          encoding, compressor))
            self._store().create_series(definitions, aligned)
            return status()
        return _guarded(run, lambda s: s)

    def createTimeseries(self, req: tt.TSCreateTimeseriesReq) -> TSStatus:
        return self._create(req.sessionId, [req.path], [req.dataType], [req.encoding], [req.compressor], False,
                            {"props": [req.props], "tags": [req.tags], "attributes": [req.attributes],
                             "alias": [req.measurementAlias]})

    def createMultiTimeseries(self, req: tt.TSCreateMultiTimeseriesReq) -> TSStatus:
        return self._create(req.sessionId, req.paths or [], req.dataTypes or [], req.encodings, req.compressors,
                            False, {"props": req.propsList, "tags": req.tagsList, "attributes": req.attributesList,
                                    "alias": req.measurementAliasList})

    def createAlignedTimeseries(self, req: tt.TSCreateAlignedTimeseriesReq) -> TSStatus:
        paths = [f"{req.prefixPath}.{name}" for name in req.measurements or []]
        return self._create(req.sessionId, paths, req.dataTypes or [], req.encodings, req.compressors, True,
                            {"tags": req.tagsList, "attributes": req.attributesList, "alias": req.measurementAlias})

    def deleteTimeseries(self, sessionId: int, path: list[str]) -> TSStatus:
        def run() -> TSStatus:
            self._session(sessionId)
            self._store().drop_series([ij.pattern_path(p) for p in path])
            return status()
        return _guarded(run, lambda s: s)

    def deleteData(self, req: tt.TSDeleteDataReq) -> TSStatus:
        def run() -> TSStatus:
            self._session(req.sessionId)
            store = self._store()
            found = store.expand([ij.pattern_path(p) for p in req.paths or []])
            start = None if req.startTime in (None, _LONG_MIN) else _instant(req.startTime)
            end = None if req.endTime in (None, _LONG_MAX) else _instant(req.endTime)
            if found:
                store.delete_points(found, start, end)
            return status()
        return _guarded(run, lambda s: s)

    # --- writes ----------------------------------------------------------------------------------

    def _write(self, session_id: int, batches: Callable[[], list[ij.DeviceRows]], aligned: bool | None) -> TSStatus:
        def run() -> TSStatus:
            self._session(session_id)
            rows = batches()  # decoded in full before anything is written
            written = self._store().write_points([(b.device, b.times, b.columns) for b in rows],
                                                 aligned=bool(aligned))
            log.info("session %s wrote %d rows", session_id, written)
            return status()
        return _guarded(run, lambda s: s)

    def insertTablet(self, req: tt.TSInsertTabletReq) -> TSStatus:
        return self._write(req.sessionId, lambda: [_tablet(req.prefixPath, req.measurements, req.values,
                                                           req.timestamps, req.types, req.size, req.writeToTable)],
                           req.isAligned)

    def insertTablets(self, req: tt.TSInsertTabletsReq) -> TSStatus:
        def batches() -> list[ij.DeviceRows]:
            parts = [req.prefixPaths, req.measurementsList, req.valuesList, req.timestampsList, req.typesList,
                     req.sizeList]
            if any(p is None or len(p) != len(req.prefixPaths) for p in parts):
                raise wire.WireError("the lists of an insertTablets request differ in length")
            return [_tablet(device, names, values, stamps, types, size, False)
                    for device, names, values, stamps, types, size in zip(*parts, strict=True)]
        return self._write(req.sessionId, batches, req.isAligned)

    def insertRecord(self, req: tt.TSInsertRecordReq) -> TSStatus:
        if req.isWriteToTable:
            return _table_model()
        return self._write(req.sessionId, lambda: _records([(req.prefixPath, req.timestamp, _typed(
            req.values, req.measurements))]), req.isAligned)

    def insertRecords(self, req: tt.TSInsertRecordsReq) -> TSStatus:
        def batches() -> list[ij.DeviceRows]:
            parts = [req.prefixPaths, req.timestamps, req.measurementsList, req.valuesList]
            _same_length(parts, "insertRecords")
            return _records([(d, t, _typed(v, ms)) for d, t, ms, v in zip(*parts, strict=True)])
        return self._write(req.sessionId, batches, req.isAligned)

    def insertRecordsOfOneDevice(self, req: tt.TSInsertRecordsOfOneDeviceReq) -> TSStatus:
        def batches() -> list[ij.DeviceRows]:
            parts = [req.timestamps, req.measurementsList, req.valuesList]
            _same_length(parts, "insertRecordsOfOneDevice")
            return _records([(req.prefixPath, t, _typed(v, ms)) for t, ms, v in zip(*parts, strict=True)])
        return self._write(req.sessionId, batches, req.isAligned)

    def _strings(self, records: list[tuple[str, int, list[str], list[str]]]) -> list[ij.DeviceRows]:
        known = {str(s.path): s.type.value for s in self._store().expand(
            [ij.device_path(d).child(name) for d, _, names, _ in records for name in names])}
        out = []
        for device, time, names, values in records:
            if len(names) != len(values):
                raise wire.WireError(f"{device}: {len(names)} measurements but {len(values)} values")
            path = str(ij.device_path(device))
            out.append((device, time, {n: wire.infer(v, known.get(f"{path}.{n}")) for n, v in zip(names, values)}))
        return _records(out)

    def insertStringRecord(self, req: tt.TSInsertStringRecordReq) -> TSStatus:
        return self._write(req.sessionId, lambda: self._strings(
            [(req.prefixPath, req.timestamp, req.measurements or [], req.values or [])]), req.isAligned)

    def insertStringRecords(self, req: tt.TSInsertStringRecordsReq) -> TSStatus:
        def batches() -> list[ij.DeviceRows]:
            parts = [req.prefixPaths, req.timestamps, req.measurementsList, req.valuesList]
            _same_length(parts, "insertStringRecords")
            return self._strings(list(zip(*parts, strict=True)))
        return self._write(req.sessionId, batches, req.isAligned)

    def insertStringRecordsOfOneDevice(self, req: tt.TSInsertStringRecordsOfOneDeviceReq) -> TSStatus:
        def batches() -> list[ij.DeviceRows]:
            parts = [req.timestamps, req.measurementsList, req.valuesList]
            _same_length(parts, "insertStringRecordsOfOneDevice")
            return self._strings([(req.prefixPath, t, ms, v) for t, ms, v in zip(*parts, strict=True)])
        return self._write(req.sessionId, batches, req.isAligned)

    # --- statements ------------------------------------------------------------------------------

    def _execute(self, req: tt.TSExecuteStatementReq, v2: bool) -> tt.TSExecuteStatementResp:
        def run() -> tt.TSExecuteStatementResp:
            self._session(req.sessionId)
            parsed = parse(req.statement or "")
            if len(parsed) != 1:
                raise _Refused(wire.SQL_PARSE_ERROR, f"one statement a call, not {len(parsed)}")
            result = statements.execute(self.service.warehouse(), parsed[0])
            for notice in result.notices:
                log.warning("%s: %s", parsed[0].kind, notice)
            if result.table is None:
                return tt.TSExecuteStatementResp(status(), queryId=-1)
            columns = wire.columns_of(result.table)
            query_id = self.service.next_id()
            query = _Query(req.statementId or 0, columns)
            self.queries[query_id] = query
            resp = tt.TSExecuteStatementResp(
                status(), queryId=query_id, columns=columns.names, operationType="QUERY",
                ignoreTimeStamp=columns.ignore_time, dataTypeList=columns.types, columnNameIndexMap=columns.index)
            _page(resp, query, req.fetchSize, v2)
            return resp
        return _guarded(run, lambda s: tt.TSExecuteStatementResp(s))

    def executeStatement(self, req: tt.TSExecuteStatementReq) -> tt.TSExecuteStatementResp:
        return self._execute(req, v2=False)

    executeQueryStatement = executeUpdateStatement = executeStatement

    def executeStatementV2(self, req: tt.TSExecuteStatementReq) -> tt.TSExecuteStatementResp:
        return self._execute(req, v2=True)

    executeQueryStatementV2 = executeUpdateStatementV2 = executeStatementV2

    def _fetch(self, req: tt.TSFetchResultsReq, v2: bool) -> tt.TSFetchResultsResp:
        if req.sessionId not in self.sessions:
            return tt.TSFetchResultsResp(status(wire.NOT_LOGIN, "the session is not open"), False, True)
        query = self.queries.get(req.queryId)
        if query is None:
            return tt.TSFetchResultsResp(status(714, f"no query {req.queryId} is open"), False, True)
        resp = tt.TSFetchResultsResp(status(), isAlign=True)
        _page(resp, query, req.fetchSize, v2)
        resp.hasResultSet = bool(resp.queryResult) if v2 else resp.queryDataSet is not None
        return resp

    def fetchResults(self, req: tt.TSFetchResultsReq) -> tt.TSFetchResultsResp:
        return self._fetch(req, v2=False)

    def fetchResultsV2(self, req: tt.TSFetchResultsReq) -> tt.TSFetchResultsResp:
        return self._fetch(req, v2=True)

    def closeOperation(self, req: tt.TSCloseOperationReq) -> TSStatus:
        if req.queryId is None or req.queryId == -1:
            for query_id in [q for q, query in self.queries.items() if query.statement_id == req.statementId]:
                del self.queries[query_id]
        else:
            self.queries.pop(req.queryId, None)
        return status()


def _page(resp: Any, query: _Query, fetch_size: int | None, v2: bool) -> None:
    """Put the next rows of ``query`` (at most ``fetch_size``) on ``resp``."""
    size = fetch_size if fetch_size and fetch_size > 0 else DEFAULT_FETCH_SIZE
    part = query.columns.slice(query.sent, query.sent + size)
    query.sent += part.rows
    resp.moreData = query.sent < query.columns.rows
    if v2:
        resp.queryResult = [wire.ts_block(part)] if part.rows else []
    elif part.rows:
        resp.queryDataSet = tt.TSQueryDataSet(*wire.query_data_set(part))


def _unsupported(name: str, result: Any) -> Any:
    message = f"{name} is not served by airflow-stream's IoTDB session protocol"
    spec = result.thrift_spec[0]
    kind = spec[3][0] if spec and isinstance(spec[3], list) else None
    if kind is TSStatus:
        return status(wire.UNSUPPORTED_OPERATION, message)
    if kind is not None and any(f and f[2] == "status" for f in kind.thrift_spec):
        return kind(status=status(wire.UNSUPPORTED_OPERATION, message))
    raise TApplicationException(TApplicationException.UNKNOWN_METHOD, message)


def _table_model() -> TSStatus:
    return status(wire.UNSUPPORTED_OPERATION, "IoTDB's table model is not served: write to the tree model")


def _instant(millis: int) -> datetime:
    return datetime.fromtimestamp(millis / 1000, UTC)


def _same_length(parts: list, call: str) -> None:
    if any(p is None for p in parts) or len({len(p) for p in parts}) != 1:
        raise wire.WireError(f"the lists of an {call} request differ in length")


def _tablet(device: str, measurements: list[str], values: bytes, timestamps: bytes, types: list[int],
            size: int, to_table: bool | None) -> ij.DeviceRows:
    if to_table:
        raise _Refused(wire.UNSUPPORTED_OPERATION, "IoTDB's table model is not served: write to the tree model")
    if len(set(measurements or [])) != len(measurements or []):
        raise wire.WireError("a measurement is given twice")
    columns = wire.tablet_columns(values or b"", list(types or []), size, list(measurements or []))
    return ij.DeviceRows(ij.device_path(device), wire.times(timestamps or b"", size), columns)


def _typed(values: bytes, measurements: list[str]) -> dict[str, tuple[str, object]]:
    return wire.record_values(values or b"", list(measurements or []))


def _records(records: list[tuple[str, int, dict[str, tuple[str, object]]]]) -> list[ij.DeviceRows]:
    """Records (device, time, {measurement: (type, value)}) as the rows of each device."""
    by_device: dict[str, list[int]] = {}
    for i, (device, _, _) in enumerate(records):
        by_device.setdefault(device, []).append(i)
    out = []
    for device, indices in by_device.items():
        kinds: dict[str, str] = {}
        cells: dict[str, list] = {}
        for position, i in enumerate(indices):
            for name, (kind, value) in records[i][2].items():
                if kinds.setdefault(name, kind) != kind:
                    raise wire.WireError(f"{device}.{name} is given as {kinds[name]} and {kind}", 614)
                cells.setdefault(name, [None] * len(indices))[position] = value
        times = pa.array([records[i][1] for i in indices], pa.int64()).cast(pa.timestamp("ms", tz="UTC"))
        out.append(ij.DeviceRows(ij.device_path(device), times,
                                 {n: pa.array(v, ij.TYPES[kinds[n]]) for n, v in cells.items()}))
    return out
