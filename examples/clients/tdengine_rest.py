"""TDengine's REST API through taospy's REST connector (``pip install taospy``), pointed at
``airflow-stream serve``: the application's code is TDengine's, only the URL is ours."""

from __future__ import annotations

URL = "http://127.0.0.1:6041"


def write_and_read(url: str = URL) -> list[list]:
    # [START tdengine-rest]
    import taosrest

    conn = taosrest.connect(url=url, user="root", password="taosdata")
    cursor = conn.cursor()
    cursor.execute("CREATE DATABASE IF NOT EXISTS power PRECISION 'ms'")
    cursor.execute("CREATE STABLE IF NOT EXISTS power.meters (ts TIMESTAMP, current FLOAT, voltage INT) "
                   "TAGS (location VARCHAR(16))")
    cursor.execute("CREATE STREAM power.s1 INTERVAL(10s) SLIDING(10s) FROM power.meters PARTITION BY tbname "
                   "INTO power.out AS SELECT _twstart, avg(voltage) AS v, count(*) AS n FROM %%tbname "
                   "WHERE _c0 >= _twstart AND _c0 < _twend")
    written = cursor.execute(
        "INSERT INTO power.d1 USING power.meters TAGS ('north') VALUES (1000, 1.5, 220) (4000, 2.5, 224) "
        "(12000, 1.0, 230) power.d2 USING power.meters TAGS ('south') VALUES (3000, 0.5, 110) "
        "(15000, 0.25, 120) (27000, 1.0, 100)")
    print(f"{written} rows written")
    cursor.execute("SELECT tbname, ts, voltage FROM power.meters WHERE voltage > 200 ORDER BY ts")
    rows = cursor.fetchall()

    client = taosrest.RestClient(url, database="power", user="root", password="taosdata")
    print(client.sql("SELECT count(*) FROM meters")["data"])  # [[6]]
    # [END tdengine-rest]
    return rows


def stream_output(url: str = URL) -> list[list]:
    # [START tdengine-rest-output]
    import taosrest

    cursor = taosrest.connect(url=url).cursor()
    cursor.execute("SELECT tag_tbname, _twstart, v, n FROM power.out ORDER BY tag_tbname, _twstart")
    windows = cursor.fetchall()
    # [END tdengine-rest-output]
    return windows
