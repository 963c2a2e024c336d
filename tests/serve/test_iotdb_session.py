"""IoTDB's session protocol driven by the official ``apache-iotdb`` ``Session``, unchanged and only
pointed at ``airflow-stream serve``: tablets, records and string records written, read back by a
query through the session (in pages of two rows), and checked by what they fired: a stream's output
row, a continuous query's target series, an insert trigger's fire count. Raw Thrift calls (the
compact protocol, as ``enable_rpc_compression`` sends it) check the V2 query's TsBlock, a
malformed tablet and a call that is not served.

Expected values are worked out by hand from the points written; the TsBlock bytes follow the layout
of IoTDB's client (``tsfile/utils/tsblock_serde.py``); status codes are IoTDB 2.0's TSStatusCode.
"""

from __future__ import annotations

import struct
from datetime import UTC, datetime

import pytest
from deltalake import DeltaTable
from iotdb.Session import Session
from iotdb.thrift.rpc import ttypes as tt
from iotdb.thrift.rpc.IClientRPCService import Client
from iotdb.utils.IoTDBConnectionException import IoTDBConnectionException
from iotdb.utils.IoTDBConstants import TSDataType
from iotdb.utils.Tablet import Tablet
from thrift.protocol import TCompactProtocol
from thrift.transport import TSocket, TTransport

from airflow_stream_provider.processes import free_port
from airflow_stream_provider.serve.server import Settings, start, warehouses
from airflow_stream_provider.streams.run import run
from airflow_stream_provider.streams.run_request import RunRequest
from airflow_stream_provider.streams.store import StreamStore
from airflow_stream_provider.warehouse import Warehouse
from tests.conftest import sql
from tests.iotdb.test_triggers import FILES, rows_seen
from tests.serve.examples import client_example

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def served(spark, tmp_path_factory):
    home = tmp_path_factory.mktemp("session")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AIRFLOW_STREAM_HOME", str(home))
        running = start(Settings(tdengine_port=0, iotdb_port=0, iotdb_session_port=free_port()),
                        warehouses(spark=lambda: spark, root=home / "warehouse"))
        try:
            host, port = running.urls["iotdb-session"].rsplit(":", 1)
            yield host, int(port), Warehouse(home / "warehouse", spark=spark), home
        finally:
            running.stop()


def _rows(session, text: str) -> list[tuple]:
    out = []
    with session.execute_query_statement(text) as found:
        while found.has_next():
            record = found.next()
            out.append((record.get_timestamp(), *(f.get_object_value(f.get_data_type()) for f in record.get_fields())))
    return out


def test_session_writes_fire_a_trigger_a_stream_and_a_cq_and_read_back(served):
    host, port, wh, home = served
    session = Session(host, port, "root", "root", fetch_size=2)
    session.open(False)
    session.execute_non_query_statement(
        f"CREATE STATELESS TRIGGER sess AFTER INSERT ON root.sg52.** AS 'counters.Recorder' USING URI "
        f"'{FILES / 'counters.py'}' WITH (\"dir\" = \"{home}\", \"name\" = \"sess\")")
    session.set_storage_group("root.sg52")
    session.create_time_series("root.sg52.d1.s1", TSDataType.INT32, 0, 0)
    # a tablet with empty cells: its bitmaps say which
    session.insert_tablet(Tablet("root.sg52.d1", ["s1", "s2"], [TSDataType.INT32, TSDataType.DOUBLE],
                                 [[1, 1.5], [None, 2.5], [3, None]], [1000, 2000, 3000]))
    session.insert_records(["root.sg52.d1", "root.sg52.d2"], [4000, 1000], [["s1"], ["s3"]],
                           [[TSDataType.INT32], [TSDataType.TEXT]], [[4], ["x"]])
    session.insert_record("root.sg52.d2", 2000, ["s3"], [TSDataType.TEXT], ["y"])
    session.insert_str_record("root.sg52.d1", 5000, ["s1", "s2"], ["5", "0.5"])  # s1 is INT32: 5
    sql(wh, "CREATE STREAM sg52.w INTERVAL(10s) SLIDING(10s) FROM sg52.devices PARTITION BY tbname INTO sg52.wout "
            "AS SELECT _twstart, count(*) AS n, sum(s1) AS total FROM %%tbname WHERE _c0 >= _twstart AND _c0 < _twend")
    session.insert_records_of_one_device("root.sg52.d1", [12000], [["s1"]], [[TSDataType.INT32]], [[12]])
    assert rows_seen("sess") == 3 + 2 + 1 + 1 + 1  # each write fires the trigger with its rows
    session.insert_tablet(Tablet("root.sg52.d1", ["s1"], [TSDataType.INT32], [[3]], [3000]))  # retried: no copy
    assert _rows(session, "select s1, s2 from root.sg52.d1") == [
        (1000, 1, 1.5), (2000, None, 2.5), (3000, 3, None), (4000, 4, None), (5000, 5, 0.5), (12000, 12, None)]
    assert _rows(session, "select s3 from root.sg52.d2") == [(1000, b"x"), (2000, b"y")]
    # the stream: d1's closed window [0, 10 s) has 5 rows, s1 summing 1 + 3 + 4 + 5
    run(wh, "sg52", "w", RunRequest.everything())
    (out,) = sql(wh, "SELECT tag_tbname, n, total FROM sg52.wout")
    assert out.table.to_pylist() == [{"tag_tbname": "root.sg52.d1", "n": 5, "total": 13}]
    # the CQ, created at 00:00:10, runs at 00:00:10 over [0, 10 s) (4 points of s1) and at 00:00:20
    # over [10 s, 20 s) (the point at 12 s)
    session.execute_non_query_statement("CREATE CONTINUOUS QUERY cq52 RESAMPLE EVERY 10s BEGIN SELECT count(s1) "
                                        "INTO root.cq52.d(s1_count) FROM root.sg52.d1 GROUP BY(10s) END")
    with StreamStore().updating("root", "cq52") as saving:
        saving.state = saving.state.replace(created=datetime(1970, 1, 1, 0, 0, 10, tzinfo=UTC))
    run(wh, "root", "cq52", RunRequest(now=datetime(1970, 1, 1, 0, 0, 20, tzinfo=UTC)))
    assert _rows(session, "select s1_count from root.cq52.d") == [(0, 4), (10000, 1)]
    session.delete_data(["root.sg52.d1.s2"], 2000)
    assert _rows(session, "select s2 from root.sg52.d1") == [(5000, 0.5)]
    session.close()
    with pytest.raises(IoTDBConnectionException, match="801"):
        Session(host, port, "root", "wrong").open(False)


def _raw(host: str, port: int) -> tuple[Client, TTransport.TTransportBase, int]:
    transport = TTransport.TFramedTransport(TSocket.TSocket(host, port))
    transport.open()
    client = Client(TCompactProtocol.TCompactProtocol(transport))
    opened = client.openSession(tt.TSOpenSessionReq(2, "UTC", "root", "root"))
    assert opened.status.code == 200
    return client, transport, opened.sessionId


def test_raw_calls_v2_tsblock_malformed_tablet_and_unsupported(served):
    host, port, wh, _ = served
    client, transport, session_id = _raw(host, port)
    try:
        texts = b"\x00\x00\x00\x01x" + b"\x00\x00\x00\x01y"  # TEXT values: an int32 length and the bytes
        assert client.insertTablet(tt.TSInsertTabletReq(session_id, "root.sg53.d", ["t"], texts,
                                                        struct.pack(">2q", 1000, 2000), [5], 2)).code == 200
        # a tablet of 2 INT32 rows with the bytes of one: refused (ILLEGAL_PARAMETER), nothing written
        bad = client.insertTablet(tt.TSInsertTabletReq(session_id, "root.sg53.d", ["s"], struct.pack(">i", 7),
                                                       struct.pack(">2q", 3000, 4000), [1], 2))
        assert bad.code == 303
        written = DeltaTable(str(wh.catalog.table_path("sg53", "devices"))).to_pyarrow_table()
        assert (written.num_rows, "s" in written.column_names) == (2, False)
        statement = client.requestStatementId(session_id)
        resp = client.executeQueryStatementV2(tt.TSExecuteStatementReq(session_id, "select t from root.sg53.d",
                                                                       statement, 100))
        assert (resp.status.code, resp.columns, resp.dataTypeList, resp.moreData) == (
            200, ["root.sg53.d.t"], ["TEXT"], False)
        # one TEXT column, 2 rows; encodings int64 array (time) and binary array; no nulls
        assert resp.queryResult == [b"\x00\x00\x00\x01" + b"\x05" + b"\x00\x00\x00\x02" + b"\x02\x03" +
                                    b"\x00" + struct.pack(">2q", 1000, 2000) +
                                    b"\x00" + b"\x00\x00\x00\x01x" + b"\x00\x00\x00\x01y"]
        assert client.closeOperation(tt.TSCloseOperationReq(session_id, resp.queryId, statement)).code == 200
        assert client.testConnectionEmptyRPC().code == 300
        assert client.executeRawDataQuery(tt.TSRawDataQueryReq(session_id, ["root.sg53.d.t"], 100, 0, 10,
                                                               statement)).status.code == 300
        assert client.insertTablet(tt.TSInsertTabletReq(session_id + 99, "root.sg53.d", ["s"], b"", b"", [1],
                                                        0)).code == 802
    finally:
        transport.close()


def test_the_documented_example(served):
    host, port, _, _ = served
    example = client_example("iotdb_session")
    assert example.write_and_query(host, port) == [(1000, 71.5, True), (2000, None, False), (3000, 72.0, None)]
