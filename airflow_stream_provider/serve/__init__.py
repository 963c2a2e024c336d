"""``airflow-stream serve``: TDengine's REST API and schemaless writes, and IoTDB's REST API v2 and
session protocol, over the warehouse, so that clients written for TDengine or IoTDB work by
changing only their URL.

The protocols are parsed and encoded by pure modules (:mod:`.lineproto`, :mod:`.opentsdb`,
:mod:`.schemaless`, :mod:`.tdengine_json`, :mod:`.iotdb_json`, :mod:`.auth`); :mod:`.tdengine` and
:mod:`.iotdb` answer the requests; :mod:`.server` runs the HTTP servers. IoTDB's session
protocol: :mod:`.iotdb_wire` (its binary values), :mod:`.iotdb_session` (the calls),
:mod:`.iotdb_rpc_server` (Thrift over TCP).
"""
