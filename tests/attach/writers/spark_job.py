"""A team's own Spark batch job, as it would be written without this project: it imports pyspark and
delta only. It changes the Delta table at argv[1] by the steps of the JSON list in argv[2]:
``{"create": true}`` (with the change data feed on),
``{"append": [[seconds, device, site, voltage, current], ...]}``, ``{"merge": [...rows]}`` (update
the rows of the same (device, time), insert the others) and ``{"delete": "<Spark SQL condition>"}``.
Without argv[2], as a job that stays up between runs, it reads one such list a line from standard
input, applies it and prints ``done``, until standard input ends."""

import json
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

T0 = datetime(2025, 3, 1, tzinfo=UTC)
SCHEMA = "event_time TIMESTAMP, device_id STRING, site STRING, voltage INT, current DOUBLE"


def session() -> SparkSession:
    jars = sorted((Path(__file__).resolve().parents[3] / "jars" / "lib").glob("*.jar"))
    scratch = tempfile.mkdtemp(prefix="team-spark-job-")
    return (SparkSession.builder.master("local[1]").appName("team-batch-job")
            .config("spark.jars", ",".join(map(str, jars)))
            .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
            .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
            .config("spark.sql.catalogImplementation", "in-memory")
            .config("spark.sql.shuffle.partitions", "2").config("spark.ui.enabled", "false")
            .config("spark.sql.session.timeZone", "UTC").config("spark.local.dir", scratch)
            .config("spark.driver.extraJavaOptions", f"-Djava.io.tmpdir={scratch}")
            .getOrCreate())


def frame(spark, rows):
    return spark.createDataFrame(
        [(T0 + timedelta(seconds=s), d, site, v, c) for s, d, site, v, c in rows], SCHEMA)


def apply(spark: SparkSession, path: str, steps: list) -> None:
    for step in steps:
        if "create" in step:
            spark.sql(f"CREATE TABLE delta.`{path}` ({SCHEMA}) USING delta "
                      "TBLPROPERTIES (delta.enableChangeDataFeed = true)")
        elif "append" in step:
            frame(spark, step["append"]).write.format("delta").mode("append").save(path)
        elif "merge" in step:
            (DeltaTable.forPath(spark, path).alias("t")
             .merge(frame(spark, step["merge"]).alias("s"), "t.device_id = s.device_id AND t.event_time = s.event_time")
             .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
        elif "delete" in step:
            DeltaTable.forPath(spark, path).delete(step["delete"])
        else:
            raise SystemExit(f"unknown step {step}")


def main() -> None:
    path = sys.argv[1]
    spark = session()
    if len(sys.argv) > 2:
        apply(spark, path, json.loads(sys.argv[2]))
    else:
        for line in sys.stdin:
            apply(spark, path, json.loads(line))
            print("done", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
