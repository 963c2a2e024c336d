"""The pure protocol modules of ``airflow-stream serve``, as tables of cases taken from the
originals' documentation: TDengine's schemaless writing page (its example line and the table it
makes, its type suffixes, its subtable naming rule), taosAdapter's REST answers, IoTDB's REST API v2
request shapes. No Spark, no server."""

from __future__ import annotations

import hashlib
import json

import pyarrow as pa
import pytest

from airflow_stream_provider.serve import auth, iotdb_json, lineproto, opentsdb, schemaless, tdengine_json
from airflow_stream_provider.serve.exchange import Request
from airflow_stream_provider.serve.lineproto import ProtocolError

#: TDengine's example line: st, tags t1 "3", t2 "4", t3 "t3" (NCHAR), c1 3 (BIGINT), c3 "passit"
#: (BINARY(6)), c2 false (BOOL), c4 4 (DOUBLE)
DOC_LINE = 'st,t1=3,t2=4,t3=t3 c1=3i64,c3="passit",c2=false,c4=4f64 1626006833639000000'


def one(text: str, precision: str = "ns", name_tag: str | None = None) -> schemaless.SupertableRows:
    (rows,) = schemaless.rows_of(lineproto.parse(text), precision, 0, name_tag)
    return rows


def test_the_documented_line_makes_the_documented_supertable():
    rows = one(DOC_LINE)
    assert rows.stable == "st"
    assert [(c.name, str(c.dtype), c.values.to_pylist()) for c in rows.metrics] == [
        ("c1", "BIGINT", [3]), ("c3", "VARCHAR(6)", ["passit"]), ("c2", "BOOL", [False]), ("c4", "DOUBLE", [4.0])]
    assert [(c.name, str(c.dtype), c.values.to_pylist()) for c in rows.tags] == [
        ("t1", "NCHAR(1)", ["3"]), ("t2", "NCHAR(1)", ["4"]), ("t3", "NCHAR(2)", ["t3"])]
    assert rows.times.to_pylist() == [1626006833639000]
    # the rule: "measurement,tag_key1=tag_value1,..." with the keys sorted, MD5, "t_" before it
    assert rows.tbnames.to_pylist() == ["t_" + hashlib.md5(b"st,t1=3,t2=4,t3=t3").hexdigest()]


@pytest.mark.parametrize(("value", "kind", "python"), [
    ("1", "DOUBLE", 1.0), ("1f64", "DOUBLE", 1.0), ("1.5f32", "FLOAT", 1.5), ("-3i8", "TINYINT", -3),
    ("3u8", "TINYINT UNSIGNED", 3), ("7i16", "SMALLINT", 7), ("7u16", "SMALLINT UNSIGNED", 7), ("9i32", "INT", 9),
    ("9u32", "INT UNSIGNED", 9), ("5i64", "BIGINT", 5), ("5i", "BIGINT", 5), ("5u64", "BIGINT UNSIGNED", 5),
    ("5u", "BIGINT UNSIGNED", 5), ("t", "BOOL", True), ("T", "BOOL", True), ("true", "BOOL", True),
    ("True", "BOOL", True), ("TRUE", "BOOL", True), ("f", "BOOL", False), ("False", "BOOL", False),
    ('"a b"', "VARCHAR", "a b"), ('L"ü"', "NCHAR", "ü"), ("1e3", "DOUBLE", 1000.0),
])
def test_field_types_by_suffix(value, kind, python):
    (column,) = one(f"m,t=1 c={value} 1").metrics
    assert (column.dtype.name, column.values.to_pylist()) == (kind, [python])


@pytest.mark.parametrize(("text", "line", "says"), [
    ("st,t1=3 c4=4 1\nst,t1=3 c4=4i 2", 2, "is DOUBLE (line 1) but BIGINT"),  # the page's schema-change error
    ("m,t=1 c=300i8 1", 1, "out of the TINYINT range"),
    ("m,t=1 c=-1u8 1", 1, "no value"),
    ("m,t=1 c=1 x", 1, "not an integer"),
    ("m,t=1 c=abc 1", 1, "no value"),
    ('m,t=1 c="open 1', 1, "no closing double quote"),
    ("m,t=1 1", 1, "not key=value"),
    ("m,t=1", 1, "expected"),
    ("m,t c=1 1", 1, "not key=value"),
    ("m c=1,c=2 1", 1, "appears twice"),
    ('m c=G"POINT(1 2)" 1', 1, "GEOMETRY"),
])
def test_malformed_lines_are_refused_with_their_line(text, line, says):
    with pytest.raises(ProtocolError) as refused:
        schemaless.rows_of(lineproto.parse(text), "ns", 0)
    assert refused.value.line == line and says in str(refused.value)


def test_escapes_names_precisions_and_the_name_tag():
    rows = one(r'my\ m,ta\,g=a\=b c\ 1="say \"hi\" \\ x" 5', "s")
    assert (rows.stable, rows.tags[0].name, rows.tags[0].values.to_pylist()) == ("my m", "ta,g", ["a=b"])
    assert (rows.metrics[0].name, rows.metrics[0].values.to_pylist()) == ("c 1", ['say "hi" \\ x'])
    assert rows.times.to_pylist() == [5_000_000]
    assert one("m,t=1 c=1 5", "ms").times.to_pylist() == [5000]
    assert one("m,t=1 c=1 5", "u").times.to_pylist() == [5]
    assert one("m,t=1 c=1").times.to_pylist() == [0]  # no timestamp: the request's time
    named = one("meters.x,tname=cpu.1,t1=4 c1=3 1", name_tag="tname")
    assert (named.stable, named.tbnames.to_pylist(), [t.name for t in named.tags]) == ("meters_x", ["cpu_1"], ["t1"])
    assert [t.name for t in one("m c=1 1").tags] == [schemaless.NULL_TAG]
    with pytest.raises(ProtocolError):
        one("m c=1 1", "q")


def test_opentsdb_telnet_and_json():
    now = 42
    telnet = opentsdb.parse_telnet("meters.current 1648432611249 10.3 location=California.SanFrancisco groupid=2\n"
                                   "put meters.current 1648432611 11.8 location=LA groupid=3", now)
    (rows,) = schemaless.rows_of(telnet, "u", now)
    assert rows.stable == "meters_current" and rows.times.to_pylist() == [1648432611249000, 1648432611000000]
    assert rows.metrics[0].values.to_pylist() == [10.3, 11.8]
    mixed = opentsdb.parse_telnet("m 1648432611 10.3 a=b\nm 1648432612 11i32 a=b", now)
    with pytest.raises(ProtocolError, match="a column has one type"):  # DOUBLE, then INT
        schemaless.rows_of(mixed, "u", now)
    body = json.dumps([{"metric": "meters.voltage", "timestamp": 1648432611249, "value": 219,
                        "tags": {"location": "California.LosAngeles", "groupid": 1}},
                       {"metric": "meters.voltage", "timestamp": 1648432611250,
                        "value": {"value": 221, "type": "double"},
                        "tags": {"location": "California.LosAngeles", "groupid": 1}}]).encode()
    (rows,) = schemaless.rows_of(opentsdb.parse_json(body, now), "u", now)
    assert rows.metrics[0].values.to_pylist() == [219.0, 221.0] and len(set(rows.tbnames.to_pylist())) == 1
    for bad in (b"{", b'{"metric": "m", "timestamp": 1, "value": 1}', b'{"metric": "m", "timestamp": "x", '
                b'"value": 1, "tags": {"a": "b"}}', b'{"metric": "m", "timestamp": 1648432611, "value": [1], '
                b'"tags": {"a": "b"}}'):
        with pytest.raises(ProtocolError):
            opentsdb.parse_json(bad, now)
    with pytest.raises(ProtocolError, match="digits"):
        opentsdb.parse_telnet("m 12345 1 a=b", now)


def test_tdengine_answers():
    assert tdengine_json.affected(3) == {"code": 0, "column_meta": [["affected_rows", "INT", 4]], "data": [[3]],
                                         "rows": 1}
    table = pa.table({"ts": pa.array([0], pa.timestamp("us", tz="UTC")), "v": pa.array([1.5]),
                      "name": pa.array(["abc"]), "n": pa.array([2], pa.int64())})
    assert tdengine_json.query(table) == {
        "code": 0, "column_meta": [["ts", "TIMESTAMP", 8], ["v", "DOUBLE", 8], ["name", "VARCHAR", 3],
                                   ["n", "BIGINT", 8]],
        "data": [["1970-01-01T00:00:00.000Z", 1.5, "abc", 2]], "rows": 1}
    declared = pa.schema([pa.field("loc", pa.string(), metadata={"tdengine.type": "VARCHAR(64)"})])
    assert tdengine_json.query(pa.table({"loc": ["x"]}, schema=declared))["column_meta"] == [["loc", "VARCHAR", 64]]
    assert tdengine_json.error(tdengine_json.NO_AUTH_INFO) == {"code": 0x1105, "desc": "no auth info input"}


def test_iotdb_requests_are_checked():
    doc = {"timestamps": [1635232143960, 1635232153960], "measurements": ["s3", "s4"],
           "data_types": ["INT32", "BOOLEAN"], "values": [[11, None], [False, True]], "is_aligned": False,
           "device": "root.sg27"}
    rows, aligned = iotdb_json.tablet(doc)
    assert (str(rows.device), aligned, rows.columns["s3"].type, rows.columns["s4"].to_pylist()) == (
        "root.sg27", False, pa.int32(), [False, True])
    for change in ({"device": "sg27"}, {"device": "root.*"}, {"values": [[11], [False, True]]},
                   {"data_types": ["INT32", "BLOB"]}, {"values": [[1.5, None], [False, True]]},
                   {"measurements": ["s3", "s3"]}, {"timestamps": ["x", 1]}, {"values": [[2 ** 40, 1], [True, True]]}):
        with pytest.raises(iotdb_json.RequestError):
            iotdb_json.tablet({**doc, **change})
    with pytest.raises(iotdb_json.RequestError):
        iotdb_json.load(b"[1")
    assert iotdb_json.query(pa.table({"Time": [1], "root.a.b": [2]}), 10) == {
        "expressions": ["root.a.b"], "column_names": None, "timestamps": [1], "values": [[2]]}
    with pytest.raises(iotdb_json.RequestError) as limited:
        iotdb_json.query(pa.table({"devices": ["a", "b"]}), 1)
    assert limited.value.code == iotdb_json.QUERY_ROW_LIMIT
    assert iotdb_json.device_path("root.`a.b`.c").nodes == ("root", "a.b", "c")


def test_credentials_default_only_on_loopback():
    assert auth.credentials("tdengine", {}, "127.0.0.1") == auth.Credentials("root", "taosdata")
    assert auth.credentials("iotdb", {}, "::1") == auth.Credentials("root", "root")
    with pytest.raises(ValueError, match="needs credentials"):
        auth.credentials("iotdb", {}, "0.0.0.0")
    with pytest.raises(ValueError, match="without"):
        auth.credentials("iotdb", {"user": "u"}, "127.0.0.1")
    assert auth.credentials("tdengine", {"user": "u", "password": "p"}, "0.0.0.0").accepts("u", "p")
    tokens = auth.Tokens()
    issued = tokens.issue(auth.Credentials("root", "taosdata"))
    assert tokens.valid(issued, auth.Credentials("root", "taosdata"))
    assert not auth.Tokens().valid(issued, auth.Credentials("root", "taosdata"))
    assert auth.basic("cm9vdDpyb290") == ("root", "root")
    for bad in ("!!", "cm9vdA=="):
        with pytest.raises(auth.AuthError):
            auth.basic(bad)


def test_requests_keep_their_last_query_value():
    request = Request.of("POST", "/influxdb/v1/write?db=a&precision=ms&db=b", {"Authorization": "x"}, b"")
    assert (request.path, request.query, request.headers) == ("/influxdb/v1/write", {"db": "b", "precision": "ms"},
                                                              {"authorization": "x"})
