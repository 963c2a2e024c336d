"""The ``apache-iotdb`` Python ``Session``, unchanged, pointed at ``airflow-stream serve
--iotdb-session-port 6667`` (user ``root``, password ``root`` on loopback)."""

from __future__ import annotations


def write_and_query(host: str = "127.0.0.1", port: int = 6667) -> list[tuple]:
    # [START iotdb-session]
    from iotdb.Session import Session
    from iotdb.utils.IoTDBConstants import TSDataType
    from iotdb.utils.Tablet import Tablet

    session = Session(host, port, "root", "root")
    session.open(False)  # or open(True): the compact protocol
    session.set_storage_group("root.plant")
    tablet = Tablet("root.plant.boiler", ["temperature", "running"], [TSDataType.DOUBLE, TSDataType.BOOLEAN],
                    [[71.5, True], [None, False]], [1000, 2000])  # None: no point
    session.insert_tablet(tablet)
    session.insert_record("root.plant.boiler", 3000, ["temperature"], [TSDataType.DOUBLE], [72.0])
    rows = []
    with session.execute_query_statement("select temperature, running from root.plant.boiler") as found:
        while found.has_next():
            record = found.next()
            rows.append((record.get_timestamp(), *(f.get_object_value(f.get_data_type())
                                                   for f in record.get_fields())))
    session.close()
    # rows == [(1000, 71.5, True), (2000, None, False), (3000, 72.0, None)]
    # [END iotdb-session]
    return rows
