"""A team's own Spark Structured Streaming job for ``bench/external.py``: it imports pyspark only.

    python bench/external_writer.py PATH SECONDS METERS [--features]

It creates the Delta table at PATH (change data feed on; with ``--features`` also deletion vectors
and column mapping in name mode), prints ``created`` and waits for a line on stdin; then it appends
once a second from Spark's ``rate`` source at METERS rows a second: the n-th row is a reading of
meter ``d<n % METERS>`` at 2025-01-01 plus ``n // METERS`` seconds. It stops after SECONDS commits
of rows and prints ``done``."""

import sys
import tempfile
import time
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F


def main() -> None:
    path, seconds, meters = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    features = "--features" in sys.argv[4:]
    jars = sorted((Path(__file__).resolve().parents[1] / "jars" / "lib").glob("*.jar"))
    scratch = tempfile.mkdtemp(prefix="team-bronze-bench-")
    spark = (SparkSession.builder.master("local[1]").appName("team-bronze-job")
             .config("spark.jars", ",".join(map(str, jars)))
             .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
             .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
             .config("spark.sql.catalogImplementation", "in-memory")
             .config("spark.sql.shuffle.partitions", "1").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").config("spark.databricks.delta.snapshotPartitions", "1")
             .config("spark.sql.session.timeZone", "UTC").config("spark.local.dir", scratch)
             .config("spark.driver.extraJavaOptions", f"-Djava.io.tmpdir={scratch}")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    properties = "delta.enableChangeDataFeed = true"
    if features:
        properties += ", delta.enableDeletionVectors = true, delta.columnMapping.mode = 'name'"
    spark.sql(f"CREATE TABLE delta.`{path}` (event_time TIMESTAMP, device_id STRING, site STRING, v DOUBLE) "
              f"USING delta TBLPROPERTIES ({properties})")
    print("created", flush=True)
    sys.stdin.readline()
    n = F.col("value")
    rows = (spark.readStream.format("rate").option("rowsPerSecond", meters).load()
            .select((F.lit("2025-01-01 00:00:00").cast("timestamp")
                     + F.make_interval(secs=(n / meters).cast("int"))).alias("event_time"),
                    F.concat(F.lit("d"), (n % meters).cast("string")).alias("device_id"),
                    F.lit("north").alias("site"), (n % 50).cast("double").alias("v")))
    log = Path(path) / "_delta_log"
    before = len(list(log.glob("*.json")))
    query = (rows.writeStream.format("delta").outputMode("append").trigger(processingTime="1 second")
             .option("checkpointLocation", str(Path(scratch) / "checkpoint")).start(path))
    while len(list(log.glob("*.json"))) < before + seconds:
        time.sleep(0.2)
    query.stop()
    print("done", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
