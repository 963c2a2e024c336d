"""A team's own Spark job, sharing the catalog with the stream provider: it imports pyspark only,
and reaches the metastore through ``$SPARK_CONF_DIR/spark-defaults.conf`` as docs/catalog.md shows.

``write``: create the Delta table ``iot.readings`` and a Parquet table ``iot.plain``, and write rows;
``read NAME``: print the rows of ``spark.table(NAME)`` as JSON lines, ordered.
"""

from __future__ import annotations

import json
import sys

from pyspark.sql import SparkSession


def main(argv: list[str]) -> int:
    spark = SparkSession.builder.master("local[1]").appName("team-job").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if argv[0] == "write":
        spark.sql("CREATE DATABASE IF NOT EXISTS iot")
        spark.sql("CREATE TABLE IF NOT EXISTS iot.readings (event_time TIMESTAMP, device_id STRING, site STRING, "
                  "voltage INT, current DOUBLE) USING DELTA TBLPROPERTIES (delta.enableChangeDataFeed = true)")
        spark.sql("INSERT INTO iot.readings VALUES (timestamp'2025-01-01 00:00:01', 'd1', 'north', 220, 1.5), "
                  "(timestamp'2025-01-01 00:00:02', 'd2', 'south', 230, 2.5)")
        spark.sql("CREATE TABLE IF NOT EXISTS iot.plain (a INT) USING parquet")
    else:
        frame = spark.table(argv[1])
        for row in frame.orderBy(*frame.columns).collect():
            print(json.dumps(row.asDict(), default=str))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
