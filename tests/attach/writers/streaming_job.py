"""A team's own Spark Structured Streaming job, the bronze pattern: it imports pyspark only, and
appends to the Delta table at argv[1] once a second (a busy machine: as fast as it can) until it has
made argv[2] commits, then stops. Its rows come
from Spark's ``rate`` source: the n-th row is a reading of device ``d<n % 3>`` at 2025-03-01 plus n
seconds. It prints ``started`` once its first commit is in the table's log."""

import sys
import tempfile
import time
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F


def main() -> None:
    path, commits = sys.argv[1], int(sys.argv[2])
    jars = sorted((Path(__file__).resolve().parents[3] / "jars" / "lib").glob("*.jar"))
    scratch = tempfile.mkdtemp(prefix="team-streaming-job-")
    spark = (SparkSession.builder.master("local[1]").appName("team-bronze-job")
             .config("spark.jars", ",".join(map(str, jars)))
             .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
             .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
             .config("spark.sql.catalogImplementation", "in-memory")
             .config("spark.sql.shuffle.partitions", "1").config("spark.ui.enabled", "false")
             .config("spark.sql.session.timeZone", "UTC").config("spark.local.dir", scratch)
             .config("spark.driver.extraJavaOptions", f"-Djava.io.tmpdir={scratch}")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.sql(f"CREATE TABLE delta.`{path}` (event_time TIMESTAMP, device_id STRING, site STRING, voltage INT, "
              "current DOUBLE) USING delta TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    n = F.col("value")
    rows = (spark.readStream.format("rate").option("rowsPerSecond", 3).load()
            .select((F.lit("2025-03-01 00:00:00").cast("timestamp") + F.make_interval(secs=n)).alias("event_time"),
                    F.concat(F.lit("d"), (n % 3).cast("string")).alias("device_id"),
                    F.lit("north").alias("site"), (200 + n % 50).cast("int").alias("voltage"),
                    (n / 10).cast("double").alias("current")))
    query = (rows.writeStream.format("delta").outputMode("append").trigger(processingTime="1 second")
             .option("checkpointLocation", str(Path(scratch) / "checkpoint")).start(path))
    log = Path(path) / "_delta_log"
    while len(list(log.glob("*.json"))) < 2:  # the CREATE and a first append
        time.sleep(0.2)
    print("started", flush=True)
    while len(list(log.glob("*.json"))) < 1 + commits:
        time.sleep(0.2)
    query.stop()
    spark.stop()


if __name__ == "__main__":
    main()
