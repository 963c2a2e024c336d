"""IoTDB's REST API v2 requests as IoTDB's documentation shows them, sent to ``airflow-stream
serve`` (default port 18080, Basic authentication ``root``/``root``)."""

from __future__ import annotations

import requests

URL = "http://127.0.0.1:18080"


def write_and_query(url: str = URL) -> dict:
    # [START iotdb-rest]
    auth = ("root", "root")
    assert requests.get(f"{url}/ping").json() == {"code": 200, "message": "SUCCESS_STATUS"}
    requests.post(f"{url}/rest/v2/nonQuery", json={"sql": "CREATE DATABASE root.sg27"}, auth=auth)
    tablet = {"timestamps": [1635232143960, 1635232153960], "measurements": ["s3", "s4"],
              "data_types": ["INT32", "BOOLEAN"], "values": [[11, None], [False, True]], "is_aligned": False,
              "device": "root.sg27"}
    answer = requests.post(f"{url}/rest/v2/insertTablet", json=tablet, auth=auth).json()
    assert answer == {"code": 200, "message": "SUCCESS_STATUS"}, answer
    records = {"timestamps": [1635232113960, 1635232151960, 1635232143960, 1635232143960],
               "measurements_list": [["s33", "s44"], ["s55", "s66"], ["s77", "s88"], ["s771", "s881"]],
               "data_types_list": [["INT32", "INT64"], ["FLOAT", "DOUBLE"], ["FLOAT", "DOUBLE"], ["BOOLEAN", "TEXT"]],
               "values_list": [[1, 11], [2.1, 2], [4, 6], [False, "cccccc"]], "is_aligned": False,
               "devices": ["root.s1", "root.s1", "root.s1", "root.s3"]}
    requests.post(f"{url}/rest/v2/insertRecords", json=records, auth=auth).raise_for_status()
    rows = requests.post(f"{url}/rest/v2/query", json={"sql": "select s3, s4 from root.sg27"}, auth=auth).json()
    # {"expressions": ["root.sg27.s3", "root.sg27.s4"], "column_names": None,
    #  "timestamps": [1635232143960, 1635232153960], "values": [[11, None], [False, True]]}
    # [END iotdb-rest]
    return rows
