"""Build the local Spark session with Delta Lake, configured so that it downloads nothing."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, cast

from airflow_stream_provider import config, storage
from airflow_stream_provider.exceptions import StreamError
from airflow_stream_provider.files import make_dirs
from airflow_stream_provider.spark import endpoint, metastore

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")
#: Spark replaces ``${var}``, ``${system:...}`` and ``${env:...}`` in SQL text while this is on (its
#: default), data values pasted into the text included; every session the project opens turns it off
VARIABLE_SUBSTITUTE = "spark.sql.variable.substitute"


class DeltaJarsMissing(RuntimeError):
    """The Delta Lake jars are not where the session expects them."""


class ConnectRefused(StreamError):
    """The Spark Connect server refused this client's token (or its lack of one)."""


class ConnectionUnreadable(RuntimeError):
    """An Airflow connection names the Spark Connect server, and no resolver was registered to read it."""


def delta_jars(folder: Path | None = None) -> list[Path]:
    folder = folder or config.jars_dir()
    jars = sorted(folder.glob("*.jar"))
    if not any(p.name.startswith("delta-spark_") for p in jars):
        raise DeltaJarsMissing(
            f"no Delta Lake jars in {folder}: run dev/setup, or point AIRFLOW_STREAM_JARS at a folder "
            "holding delta-spark and delta-storage jars"
        )
    return jars


def spark_conf(home: Path | None = None) -> dict[str, str]:
    """Settings measured on small machines (DESIGN §9); every path points into the home folder."""
    home = home or config.home()
    scratch = home / "spark"
    return {
        "spark.jars": ",".join(str(p) for p in delta_jars()),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.databricks.delta.properties.defaults.enableChangeDataFeed": "true",
        "spark.databricks.delta.snapshotPartitions": "2",
        # one per core of local[2]: a live detector batch runs a task per state partition, and more
        # tasks than cores only queue (a checkpoint keeps the number it started with)
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.session.timeZone": "UTC",
        # the files Spark rewrites (DELETE) hold timestamps as the kernel writes them, UTC
        # microseconds, not Spark's legacy INT96, which other Parquet readers see as naive nanoseconds
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
        "spark.sql.warehouse.dir": str(scratch / "spark-warehouse"),
        "spark.sql.catalogImplementation": "in-memory",
        "spark.local.dir": str(scratch / "local"),
        "spark.driver.extraJavaOptions": (
            f"-Djava.io.tmpdir={scratch / 'tmp'} -Dderby.system.home={scratch} "
            f"-Dlog4j2.configurationFile={LOG4J_CONFIG}"
        ),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        # SQL text is never a template: `${...}` in a table name or a string literal stays as written
        VARIABLE_SUBSTITUTE: "false",
    } | _joined_classpaths(object_store_conf(), catalog_conf())


def catalog_conf() -> dict[str, str]:
    """Hive support against the shared metastore when ``[catalog]`` names one (:mod:`.metastore`),
    else nothing: the in-memory catalog, tables found by path."""
    found = metastore.configured()
    return {} if found is None else metastore.spark_settings(found)


#: settings that hold a class path, which two sources of settings may both extend
_CLASSPATHS = ("spark.driver.extraClassPath", "spark.executor.extraClassPath")


def _joined_classpaths(first: dict[str, str], second: dict[str, str]) -> dict[str, str]:
    joined = first | second
    for key in _CLASSPATHS:
        if key in first and key in second:
            joined[key] = f"{first[key]}:{second[key]}"
    return joined


def object_store_conf() -> dict[str, str]:
    """S3A's settings and jars when the warehouse is on an object store (:mod:`~airflow_stream_provider.storage`),
    or when, the warehouse being local, object store credentials are given and the S3A jars are there:
    a table attached by its ``s3://`` URL is read by Spark too."""
    jars = sorted(config.s3_jars_dir().glob("*.jar"))
    if storage.configured() is None and not (jars and storage.credentials_given()):
        return {}
    storage.export_credentials()
    return storage.spark_settings(jars)


def local_session(
    app_name: str = "airflow-stream", master: str = "local[2]", extra: dict[str, str | None] | None = None
) -> SparkSession:
    """The in-process session used when no stream node runs; one per process. A None in ``extra``
    leaves that setting out."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    conf = {key: value for key, value in (spark_conf() | (extra or {})).items() if value is not None}
    home = config.home()
    for sub in ("spark/local", "spark/tmp"):
        make_dirs(home / sub)
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    if "spark.hadoop.fs.s3.impl" in conf:  # S3A's keys, never on a command line
        hadoop = session.sparkContext._jsc.hadoopConfiguration()
        for key, value in storage.hadoop_secrets().items():
            hadoop.set(key, value)
    shared = metastore.configured()
    if shared is not None:
        metastore.use_password(session, shared)
        metastore.initialise(session, shared)
    return session


def arrow_frame(session: SparkSession, table: pa.Table, schema: StructType | None = None) -> DataFrame:
    """``session.createDataFrame(table)``, every row of it.

    Spark reads the Arrow batches it is given up to the first one without rows, and silently drops
    the batches after it. Such batches are common: a filtered dataset scan yields one per file whose
    rows all fail the filter, and ``DataFrame.toArrow()`` one per empty partition. So the table goes
    over as one batch."""
    table = table.combine_chunks()
    return session.createDataFrame(table) if schema is None else session.createDataFrame(table, schema=schema)


def setting(session: SparkSession, key: str) -> str:
    """The value of a Spark setting that has a built-in default, such as
    ``spark.sql.shuffle.partitions``: ``conf.get`` without a default returns it (and raises for a
    key without one), never None."""
    value = session.conf.get(key)
    assert value is not None, key
    return value


def delta_round_trip() -> int:
    """Create, write, MERGE into and read back a Delta table with its change feed; return rows read.

    Raises ``RuntimeError`` when anything differs from what was written.
    """
    import shutil
    import tempfile

    from delta.tables import DeltaTable

    session = local_session("airflow-stream-selfcheck")
    root = config.home() / "spark"
    make_dirs(root)
    path = Path(tempfile.mkdtemp(prefix="selfcheck-", dir=root)) / "table"
    try:
        session.sql("SELECT id, id * 10 AS value FROM range(5)").write.format("delta").save(str(path))
        updates = session.sql("SELECT id, id * 100 AS value FROM range(3, 8)")
        (
            DeltaTable.forPath(session, str(path)).alias("t")
            .merge(updates.alias("s"), "t.id = s.id")
            .whenMatchedUpdateAll()
            .whenNotMatchedInsertAll()
            .execute()
        )
        rows = {r.id: r.value for r in session.read.format("delta").load(str(path)).collect()}
        expected = {i: i * 10 for i in range(3)} | {i: i * 100 for i in range(3, 8)}
        if rows != expected:
            raise RuntimeError(f"Delta round trip read {rows}, expected {expected}")
        changes = (
            session.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 0)
            .load(str(path)).groupBy("_change_type").count().collect()
        )
        counts = {r["_change_type"]: r["count"] for r in changes}
        if counts.get("insert") != 8 or counts.get("update_postimage") != 2:
            raise RuntimeError(f"Delta change data feed shows {counts}, expected 8 inserts and 2 updates")
        return len(rows)
    finally:
        shutil.rmtree(path.parent, ignore_errors=True)


#: the variable that puts pyspark.sql in Spark Connect mode, and whether this process set it
CONNECT_MODE = "SPARK_CONNECT_MODE_ENABLED"
_connect_mode_set = False


def spark_session() -> SparkSession:
    """The session SQL runs on: the stream node over Spark Connect when one is configured or running,
    else the in-process local session (see :func:`remote_url`)."""
    url = remote_url()
    if url is None:
        return local_session()
    # The Connect builder itself, not pyspark.sql's dispatcher: that one refuses a remote session in a
    # process that also holds a local one, and switches later local builders to Connect mode.
    from pyspark import SparkContext
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    global _connect_mode_set
    if SparkContext._active_spark_context is None and CONNECT_MODE not in os.environ:
        # pyspark.sql.functions build Connect columns only in Connect mode; a process without a
        # local session (a task, the CLI) is in it from here on
        os.environ[CONNECT_MODE] = "1"
        _connect_mode_set = True
    from airflow_stream_provider.spark.channel import TokenChannelBuilder

    url = _node_token(url)
    remote = RemoteSparkSession.builder.channelBuilder(TokenChannelBuilder(url)).getOrCreate()
    try:
        remote.conf.set(VARIABLE_SUBSTITUTE, "false")  # the server's default may differ from ours
    except Exception as err:
        if "UNAUTHENTICATED" not in str(err):
            raise
        remote.stop()  # so that the next call connects afresh
        address = url.split(";", 1)[0]
        raise ConnectRefused(
            f"the Spark Connect server at {address} refused this client's token: a local node's token is in "
            f"{endpoint.token_path()} (readable by the node's user only); a remote server's goes into the URL "
            "as ;token=..., the spark_connect connection's password, or SPARK_CONNECT_AUTHENTICATE_TOKEN") from None
    # the Connect session serves SparkSession's API without subclassing it; pyspark's own
    # dispatcher casts it the same way
    return cast("SparkSession", remote)


def _node_token(url: str) -> str:
    """``url`` with this home's node token when it names the running node on this host without one
    (``AIRFLOW_STREAM_SPARK_REMOTE`` or ``[spark] remote`` set to ``sc://127.0.0.1:<port>``)."""
    info = endpoint.running()
    if info is None or ";token=" in url:
        return url
    address = url.split(";", 1)[0].rstrip("/")
    if address in {f"sc://{host}:{info.port}" for host in ("127.0.0.1", "localhost")}:
        return endpoint.with_token(url, endpoint.token())
    return url


def child_environ() -> dict[str, str]:
    """This process's environment for a child process: without the Connect mode
    :func:`spark_session` switched this process to, which a child starting its own local Spark
    (the stream node, Airflow's tasks) must not inherit."""
    env = dict(os.environ)
    if _connect_mode_set:
        env.pop(CONNECT_MODE, None)
    return env


def remote_url() -> str | None:
    """The Spark Connect URL to use, first found of:

    1. ``AIRFLOW_STREAM_SPARK_REMOTE`` (``sc://host:port``);
    2. the Airflow connection ``AIRFLOW_STREAM_CONN_ID`` (default ``spark_connect``), when Airflow
       defines it in the environment (``AIRFLOW_CONN_SPARK_CONNECT``) or the caller runs in a task,
       read by the resolver registered with :func:`use_connection_url`;
    3. ``[spark] remote`` in ``$AIRFLOW_STREAM_HOME/airflow-stream.toml``;
    4. the stream node of this home, when it runs (with its token).
    """
    explicit = os.environ.get("AIRFLOW_STREAM_SPARK_REMOTE")
    if explicit:
        return explicit
    conn_id = config.conn_id()
    if os.environ.get(f"AIRFLOW_CONN_{conn_id.upper()}"):
        return airflow_connection_url(conn_id)
    configured = config.settings().get("spark", {}).get("remote")
    if configured:
        return str(configured)
    return endpoint.running_connect_url()


#: turns the id of an Airflow ``spark_connect`` connection into its Spark Connect URL
ConnectionUrl = Callable[[str], str]

_connection_url: ConnectionUrl | None = None


def use_connection_url(resolve: ConnectionUrl | None) -> None:
    """Make ``resolve`` the process's way to read a ``spark_connect`` connection (None forgets it).
    The Airflow side registers one (``airflow_stream_provider.hooks.bind``)."""
    global _connection_url
    _connection_url = resolve


def airflow_connection_url(conn_id: str) -> str:
    """The Spark Connect URL of an Airflow ``spark_connect`` connection, through the registered resolver."""
    if _connection_url is None:
        raise ConnectionUnreadable(
            f"the Airflow connection {conn_id!r} names the Spark Connect server, but this process registered no "
            "way to read it (airflow_stream_provider.hooks.bind() registers Airflow's)")
    return _connection_url(conn_id)
