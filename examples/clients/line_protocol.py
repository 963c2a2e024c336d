"""Schemaless writes to ``airflow-stream serve``: InfluxDB line protocol with influxdb-client's
write API (``pip install influxdb-client``) and as Telegraf sends it, and OpenTSDB's telnet and
JSON puts, each into a TDengine database (made first, as TDengine's schemaless writing needs)."""

from __future__ import annotations

import gzip

import requests

URL = "http://127.0.0.1:6041"


def with_influxdb_client(url: str = URL) -> None:
    # [START influxdb-client]
    from influxdb_client import InfluxDBClient, Point, WritePrecision
    from influxdb_client.client.write_api import SYNCHRONOUS

    # InfluxDB 1.8's compatibility: the token is user:password, the bucket the database
    client = InfluxDBClient(url=f"{url}/influxdb/v1", token="root:taosdata", org="-")
    writer = client.write_api(write_options=SYNCHRONOUS)
    points = [Point("weather").tag("location", "north").field("temperature", t).field("humidity", h)
              .time(second, WritePrecision.S) for second, t, h in [(2, 21.5, 61), (12, 25.0, 50), (25, 30.0, 40)]]
    writer.write(bucket="farm", record=points, write_precision=WritePrecision.S)
    # [END influxdb-client]


def as_telegraf(url: str = URL) -> requests.Response:
    # [START telegraf]
    lines = "weather,location=north temperature=20.5,humidity=60i 1000\n"
    answer = requests.post(f"{url}/influxdb/v1/write?db=farm&precision=ms", data=gzip.compress(lines.encode()),
                           headers={"Content-Encoding": "gzip", "Content-Type": "text/plain; charset=utf-8"},
                           auth=("root", "taosdata"))
    assert answer.status_code == 204, answer.text
    # [END telegraf]
    return answer


def opentsdb(url: str = URL) -> None:
    # [START opentsdb]
    telnet = "meters.current 1648432611249 10.3 location=California.SanFrancisco groupid=2\n"
    requests.post(f"{url}/opentsdb/v1/put/telnet/farm", data=telnet, auth=("root", "taosdata")).raise_for_status()
    points = [{"metric": "meters.voltage", "timestamp": 1648432611249, "value": 219,
               "tags": {"location": "California.LosAngeles", "groupid": 1}}]
    requests.post(f"{url}/opentsdb/v1/put/json/farm", json=points, auth=("root", "taosdata")).raise_for_status()
    # [END opentsdb]
