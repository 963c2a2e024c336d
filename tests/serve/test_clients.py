"""``airflow-stream serve`` driven by clients nobody here wrote: taospy's REST connector
(``taosrest``), influxdb-client's write API and raw line protocol as Telegraf sends it, and IoTDB's
REST v2 requests as IoTDB's documentation shows them. Each write is checked by what it fired: a
stream's output row, a continuous query's target series, an insert trigger's fire count.

The expected windows are worked out by hand from the rows written; the IoTDB answers are the ones
printed by IoTDB's REST API v2 page for the same requests."""

from __future__ import annotations

import gzip
import hashlib
from datetime import UTC, datetime
from pathlib import Path

import pytest
import requests

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

taosrest = pytest.importorskip("taosrest")
influxdb_client = pytest.importorskip("influxdb_client")

STREAM = """CREATE STREAM power.s1 INTERVAL(10s) SLIDING(10s) FROM power.meters PARTITION BY tbname INTO power.out
            AS SELECT _twstart, avg(voltage) AS v, count(*) AS n FROM %%tbname WHERE _c0 >= _twstart AND _c0 < _twend"""
INSERT = ("INSERT INTO power.d1 USING power.meters TAGS ('north') VALUES (1000, 1.5, 220) (4000, 2.5, 224) "
          "(12000, 1.0, 230) power.d2 USING power.meters TAGS ('south') VALUES (3000, 0.5, 110) (15000, 0.25, 120) "
          "(27000, 1.0, 100)")


@pytest.fixture(scope="module")
def served(spark, tmp_path_factory):
    home = tmp_path_factory.mktemp("serve")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AIRFLOW_STREAM_HOME", str(home))
        running = start(Settings(tdengine_port=free_port(), iotdb_port=free_port()),
                        warehouses(spark=lambda: spark, root=home / "warehouse"))
        try:
            yield running.urls, Warehouse(home / "warehouse", spark=spark), home
        finally:
            running.stop()


def _trigger(home: Path, name: str, pattern: str) -> str:
    return (f"CREATE STATELESS TRIGGER {name} AFTER INSERT ON {pattern} AS 'counters.Recorder' "
            f"USING URI '{FILES / 'counters.py'}' WITH (\"dir\" = \"{home}\", \"name\" = \"{name}\")")


def test_taosrest_runs_ddl_inserts_queries_and_streams(served):
    urls, wh, home = served
    example = client_example("tdengine_rest")
    epoch = datetime(1970, 1, 1)
    second = datetime(1970, 1, 1, 0, 0, 1)
    assert example.write_and_read(urls["tdengine"]) == [
        ["d1", second, 220], ["d1", second.replace(second=4), 224], ["d1", second.replace(second=12), 230]]
    cursor = taosrest.connect(url=urls["tdengine"]).cursor()
    assert cursor.execute(INSERT) == 6  # a client retrying after a timeout: the same keys overwrite
    client = taosrest.RestClient(urls["tdengine"], database="power")
    assert client.sql("SELECT count(*) FROM meters")["data"] == [[6]]
    run(wh, "power", "s1", RunRequest.everything())
    # closed windows only: d1's [0, 10) (220, 224); d2's [0, 10) (110) and [10, 20) (120)
    assert example.stream_output(urls["tdengine"]) == [["d1", epoch, 222.0, 2], ["d2", epoch, 110.0, 1],
                                                       ["d2", datetime(1970, 1, 1, 0, 0, 10), 120.0, 1]]
    cursor.execute("SELECT tag_tbname, _twstart, v, n FROM power.out")
    assert [m[:2] for m in cursor.description] == [["tag_tbname", "VARCHAR"], ["_twstart", "TIMESTAMP"],
                                                   ["v", "DOUBLE"], ["n", "BIGINT"]]
    assert any("s1" in row for row in client.sql("SHOW STREAMS")["data"])
    shanghai = requests.post(f"{urls['tdengine']}/rest/sql/power?tz=Asia/Shanghai&req_id=7",
                             data="SELECT ts, voltage FROM d1 WHERE voltage = 220", auth=("root", "taosdata")).json()
    assert shanghai == {"code": 0, "column_meta": [["ts", "TIMESTAMP", 8], ["voltage", "INT", 4]],
                        "data": [["1970-01-01T08:00:01.000+08:00", 220]], "rows": 1}
    # wrong credentials: 401; two statements in one body (an injection): TDengine's syntax error, nothing run
    with pytest.raises(taosrest.HTTPError):
        taosrest.RestClient(urls["tdengine"], password="wrong").sql("SHOW DATABASES")
    with pytest.raises(taosrest.ConnectError) as refused:
        client.sql("INSERT INTO d1 VALUES (5000, 1.0, 1); DROP DATABASE power")
    assert refused.value.errno == 0x2600
    token = requests.get(f"{urls['tdengine']}/rest/login/root/taosdata").json()["desc"]
    counted = requests.post(f"{urls['tdengine']}/rest/sql", data="SELECT count(*) FROM power.meters",
                            headers={"Authorization": f"Taosd {token}"}).json()
    assert counted["data"] == [[6]]


def test_line_protocol_creates_tables_by_tdengine_rules_and_fires_streams_and_triggers(served):
    urls, wh, home = served
    base = urls["tdengine"]
    example = client_example("line_protocol")
    requests.post(f"{base}/rest/sql", data="CREATE DATABASE farm PRECISION 'ms'", auth=("root", "taosdata"))
    example.as_telegraf(base)  # 20.5 at 1 s
    sql(wh, "CREATE STREAM farm.w INTERVAL(10s) SLIDING(10s) FROM farm.weather PARTITION BY tbname INTO farm.wout "
            "AS SELECT _twstart, avg(temperature) AS t, count(*) AS n FROM %%tbname WHERE _c0 >= _twstart AND "
            "_c0 < _twend")
    sql(wh, _trigger(home, "lp", "root.farm.**"))
    example.with_influxdb_client(base)  # 21.5 at 2 s, 25.0 at 12 s, 30.0 at 25 s
    example.with_influxdb_client(base)  # retried: no duplicates
    assert rows_seen("lp") == 6  # each write of 3 rows fires the trigger once with its 3 rows
    # Telegraf's form: raw lines, gzip, Basic authentication; one bad line refuses the whole body
    lines = "weather,location=south temperature=10,humidity=5i 3000\nweather,location=south temperature=\n"
    refused = requests.post(f"{base}/influxdb/v1/write?db=farm&precision=ms", data=gzip.compress(lines.encode()),
                            headers={"Content-Encoding": "gzip"}, auth=("root", "taosdata"))
    assert refused.status_code == 400 and refused.json()["line"] == 2
    assert requests.post(f"{base}/influxdb/v1/write?db=farm&precision=ms", data="weather x=1",
                         auth=("root", "nope")).status_code == 401
    described = requests.post(f"{base}/rest/sql", data="DESCRIBE farm.weather", auth=("root", "taosdata")).json()
    assert [row[:2] for row in described["data"]] == [["_ts", "TIMESTAMP"], ["temperature", "DOUBLE"],
                                                      ["humidity", "BIGINT"], ["tbname", "VARCHAR(192)"],
                                                      ["location", "NCHAR(5)"]]
    example.opentsdb(base)
    for metric, value, where in (("meters_current", 10.3, "California.SanFrancisco"),
                                 ("meters_voltage", 219.0, "California.LosAngeles")):
        (found,) = sql(wh, f"SELECT _value, location, groupid FROM farm.{metric}")
        assert [tuple(r.values()) for r in found.table.to_pylist()] == [(value, where, "2" if value == 10.3 else "1")]
    (counted,) = sql(wh, "SELECT tbname, count(*) AS n FROM farm.weather GROUP BY tbname")
    north = "t_" + hashlib.md5(b"weather,location=north").hexdigest()
    assert counted.table.to_pylist() == [{"tbname": north, "n": 4}]
    run(wh, "farm", "w", RunRequest.everything())
    (out,) = sql(wh, "SELECT _twstart, t, n FROM farm.wout ORDER BY _twstart")
    assert [(r["t"], r["n"]) for r in out.table.to_pylist()] == [(21.0, 2), (25.0, 1)]


def test_iotdb_rest_v2_documented_requests_fire_triggers_and_cqs(served):
    urls, wh, home = served
    base = urls["iotdb"]

    def post(path: str, payload: dict, auth=("root", "root")) -> dict:
        return requests.post(f"{base}/rest/v2/{path}", json=payload, auth=auth).json()

    assert post("nonQuery", {"sql": _trigger(home, "tablet", "root.sg27.**")})["code"] == 200
    assert client_example("iotdb_rest").write_and_query(base) == {
        "expressions": ["root.sg27.s3", "root.sg27.s4"], "column_names": None,
        "timestamps": [1635232143960, 1635232153960], "values": [[11, None], [False, True]]}
    tablet = {"timestamps": [1635232143960, 1635232153960], "measurements": ["s3", "s4"],
              "data_types": ["INT32", "BOOLEAN"], "values": [[11, None], [False, True]], "is_aligned": False,
              "device": "root.sg27"}
    assert post("insertTablet", tablet)["code"] == 200  # retried: the same points
    assert rows_seen("tablet") == 4
    assert post("query", {"sql": "select s771, s881 from root.s3"})["values"] == [[False], ["cccccc"]]
    assert requests.post(f"{base}/rest/v2/query", json={"sql": "show devices"}).status_code == 401
    assert post("query", {"sql": "show devices"}, auth=("root", "bad")) == {"code": 600,
                                                                            "message": "WRONG_LOGIN_PASSWORD_ERROR"}
    bad = dict(tablet, values=[[11, "x"], [False, True]])  # a TEXT value in an INT32 column: nothing written
    assert post("insertTablet", dict(bad, timestamps=[1, 2]))["code"] != 200
    assert post("query", {"sql": "select count(s3) from root.sg27"})["values"] == [[1]]  # s3's one point
    assert post("query", {"sql": "select s3 from root.sg27"})["timestamps"] == [1635232143960]
    # a CQ over the written points: every 10 s, the count of s3 in the last 10 s; created at 07:09:00, it
    # runs at 07:09:00 ([07:08:50, 07:09:00): no point, count 0) and at 07:09:10 ([07:09:00, 07:09:10): 11)
    assert post("nonQuery", {"sql": "CREATE CONTINUOUS QUERY cq_rest RESAMPLE EVERY 10s BEGIN SELECT count(s3) "
                                    "INTO root.cq27.d(s3_count) FROM root.sg27 GROUP BY(10s) END"})["code"] == 200
    with StreamStore().updating("root", "cq_rest") as saving:
        saving.state = saving.state.replace(created=datetime(2021, 10, 26, 7, 9, tzinfo=UTC))
    run(wh, "root", "cq_rest", RunRequest(now=datetime(2021, 10, 26, 7, 9, 10, tzinfo=UTC)))
    assert post("query", {"sql": "select s3_count from root.cq27.d"}) == {
        "expressions": ["root.cq27.d.s3_count"], "column_names": None, "timestamps": [1635232130000, 1635232140000],
        "values": [[0, 1]]}
