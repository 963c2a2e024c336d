"""The shared catalog: Spark's Hive support with its metastore database in PostgreSQL, when
``[catalog]`` of ``airflow-stream.toml`` (or ``AIRFLOW_STREAM_CATALOG_URL``) names one.

Settings, each an environment variable first, else the key of ``[catalog]``:

- ``AIRFLOW_STREAM_CATALOG_URL`` / ``url``: the metastore database, ``jdbc:postgresql://host:port/db``;
- ``AIRFLOW_STREAM_CATALOG_USER`` / ``user``;
- ``AIRFLOW_STREAM_CATALOG_PASSWORD`` / ``password``: never in the URL, and never on a command line:
  it goes into the running session's JVM (:func:`use_password`), as the object store's keys do,
  since every setting given to Spark's builder ends up on the JVM's command line;
- ``AIRFLOW_STREAM_CATALOG_WAREHOUSE`` / ``warehouse``: the folder of managed tables
  (``spark.sql.warehouse.dir``), shared by every process of the catalog;
- ``AIRFLOW_STREAM_CATALOG_REGISTER_OUTPUTS`` / ``register_outputs``: register the streams' output
  tables there by name (``true``/``false``, default false).

With nothing set, sessions keep the in-memory catalog and tables are found by path (DESIGN §2).
The first session of a new metastore creates its schema (:func:`initialise`): DataNucleus' schema
tool over Hive's model, all tables at once, under a PostgreSQL advisory lock. Creating them lazily
(``datanucleus.schema.autoCreateAll`` alone) deadlocks on PostgreSQL: the first CREATE TABLE adds a
foreign key to ``TBLS`` from a second connection while the first holds ``TBLS`` locked.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from airflow_stream_provider import config
from airflow_stream_provider.exceptions import StreamError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DRIVER = "org.postgresql.Driver"
SCHEME = "jdbc:postgresql://"
PASSWORD_KEY = "javax.jdo.option.ConnectionPassword"
#: seconds to wait for the metastore database to accept a connection before calling it unreachable
CONNECT_TIMEOUT_S = 5.0
#: the PostgreSQL advisory lock the schema's creators take in turn ("airflow-stream metastore")
_SCHEMA_LOCK = 7_316_920_451


class MetastoreError(StreamError):
    """The catalog's settings are unusable, or its metastore cannot be reached; the message names
    the URL without its password."""


def _truthy(value: object) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("", "0", "false", "no", "off"):
        return False
    raise MetastoreError(f"[catalog] register_outputs = {value!r}: write true or false")


@dataclass(frozen=True)
class Metastore:
    """The shared metastore's settings (see the module's docstring)."""

    url: str
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    warehouse: str | None = None
    register_outputs: bool = False

    def __post_init__(self) -> None:
        if not self.url.startswith(SCHEME):
            raise MetastoreError(f"[catalog] url {self.shown_url!r}: write jdbc:postgresql://host:port/database")
        parts = urlsplit(self.url.removeprefix("jdbc:"))
        query = parts.query.lower()
        if parts.password is not None or "password=" in query:
            raise MetastoreError(
                f"[catalog] url {self.shown_url}: the password does not go into the URL, which is logged and shown; "
                "set it as [catalog] password or AIRFLOW_STREAM_CATALOG_PASSWORD")
        if not parts.hostname or not parts.path.strip("/"):
            raise MetastoreError(f"[catalog] url {self.shown_url!r}: write jdbc:postgresql://host:port/database")

    @property
    def shown_url(self) -> str:
        """The URL as messages show it: without a password, should one have been written into it."""
        parts = urlsplit(self.url.removeprefix("jdbc:"))
        netloc = parts.netloc.rsplit("@", 1)[-1]
        query = "&".join(p for p in parts.query.split("&") if p and not p.lower().startswith("password="))
        return f"jdbc:{parts.scheme}://{netloc}{parts.path}" + (f"?{query}" if query else "")

    @property
    def address(self) -> tuple[str, int]:
        parts = urlsplit(self.url.removeprefix("jdbc:"))
        return parts.hostname or "", parts.port or 5432


def configured() -> Metastore | None:
    """The metastore the environment or ``[catalog]`` of ``airflow-stream.toml`` names, if any."""
    section = config.settings().get("catalog", {})

    def value(name: str) -> object:
        return os.environ.get(f"AIRFLOW_STREAM_CATALOG_{name.upper()}") or section.get(name)

    url = value("url")
    if not url:
        return None
    user, password, warehouse = value("user"), value("password"), value("warehouse")
    return Metastore(url=str(url), user=str(user) if user else None, password=str(password) if password else None,
                     warehouse=str(warehouse) if warehouse else None,
                     register_outputs=_truthy(value("register_outputs") or False))


def register_outputs() -> bool:
    """Whether the streams' output tables are registered in the configured metastore."""
    found = configured()
    return found is not None and found.register_outputs


def jars() -> list[Path]:
    """The JDBC driver ``dev/setup`` fetches (``AIRFLOW_STREAM_METASTORE_JARS``, default jars/metastore)."""
    folder = Path(os.environ.get("AIRFLOW_STREAM_METASTORE_JARS") or config.PROJECT_ROOT / "jars" / "metastore")
    found = sorted(folder.glob("*.jar"))
    if not any(p.name.startswith("postgresql-") for p in found):
        raise MetastoreError(f"a metastore is configured, and the PostgreSQL JDBC driver is not in {folder}: run "
                             "dev/setup, which fetches it, or point AIRFLOW_STREAM_METASTORE_JARS at a folder "
                             "holding it")
    return found


def spark_settings(metastore: Metastore) -> dict[str, str]:
    """Spark's settings for Hive support against ``metastore``, all but the password. The driver goes
    on the driver's (and executors') class path: DataNucleus loads it through the system class loader."""
    classpath = ":".join(str(p) for p in jars())
    settings = {
        "spark.sql.catalogImplementation": "hive",
        "spark.driver.extraClassPath": classpath,
        "spark.executor.extraClassPath": classpath,
        "spark.hadoop.javax.jdo.option.ConnectionURL": metastore.url,
        "spark.hadoop.javax.jdo.option.ConnectionDriverName": DRIVER,
        # the schema exists before the first client uses it (initialise): nothing to create lazily
        "spark.hadoop.datanucleus.schema.autoCreateAll": "false",
        "spark.hadoop.hive.metastore.schema.verification": "false",
    }
    if metastore.user:
        settings["spark.hadoop.javax.jdo.option.ConnectionUserName"] = metastore.user
    if metastore.warehouse:
        settings["spark.sql.warehouse.dir"] = metastore.warehouse
    return settings


def hadoop_secrets(metastore: Metastore) -> dict[str, str]:
    """The password as Hive's setting, for the session's Hadoop configuration; the Hive client reads
    it when it first connects, after the session started."""
    return {PASSWORD_KEY: metastore.password} if metastore.password else {}


def use_password(session: SparkSession, metastore: Metastore) -> None:
    """Give the session's Hive client the password, before it first connects: in the Hadoop
    configuration, and as the JVM's system property, which every ``HiveConf`` starts from (Spark
    copies the Hadoop configuration for its catalog once, maybe before this call)."""
    jsc = session.sparkContext._jsc
    jvm = session.sparkContext._jvm
    assert jsc is not None and jvm is not None
    for key, value in hadoop_secrets(metastore).items():
        jsc.hadoopConfiguration().set(key, value)
        jvm.java.lang.System.setProperty(key, value)


def check_reachable(metastore: Metastore, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Refuse quickly a metastore whose database does not accept connections; Hive's client would
    retry for minutes before failing."""
    host, port = metastore.address
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return
    except OSError as err:
        reason = err.strerror or err
        raise MetastoreError(f"the catalog's metastore at {metastore.shown_url} cannot be reached: {reason} "
                             "(is PostgreSQL running there? see [catalog] in airflow-stream.toml)") from None


#: (session's JVM context, URL) pairs whose schema this process has seen in place
_initialised: set[tuple[int, str]] = set()


def initialise(session: SparkSession, metastore: Metastore) -> None:
    """Create the Hive schema in the metastore database when it has none, through the session's JVM
    (once per session and metastore)."""
    key = (id(session.sparkContext), metastore.url)
    if key in _initialised:
        return
    check_reachable(metastore)
    _create_missing_schema(session, metastore)
    _initialised.add(key)


def _create_missing_schema(session: SparkSession, metastore: Metastore) -> None:
    jvm = session.sparkContext._jvm
    assert jvm is not None
    try:
        connection = jvm.java.sql.DriverManager.getConnection(metastore.url, metastore.user or "",
                                                              metastore.password or "")
    except Exception as err:
        raise MetastoreError(f"the catalog's metastore at {metastore.shown_url} refused the connection: "
                             f"{_java_message(err)}") from None
    try:
        if _has_schema(connection):
            return
        statement = connection.createStatement()
        statement.execute(f"SELECT pg_advisory_lock({_SCHEMA_LOCK})")
        try:
            if not _has_schema(connection):  # another process may have made it while this one waited
                _create_schema(session, metastore)
        finally:
            statement.execute(f"SELECT pg_advisory_unlock({_SCHEMA_LOCK})")
    finally:
        connection.close()


def _has_schema(connection) -> bool:
    # TBL_PRIVS is among the last tables a partial, lazily made schema lacks
    found = connection.getMetaData().getTables(None, None, "TBL_PRIVS", None)
    try:
        return bool(found.next())
    finally:
        found.close()


def _create_schema(session: SparkSession, metastore: Metastore) -> None:
    """DataNucleus' schema tool over Hive's model (``package.jdo`` of hive-metastore), all at once."""
    gateway = session.sparkContext._gateway
    assert gateway is not None
    jvm = gateway.jvm
    tools = jvm.org.datanucleus.store.schema
    props = jvm.java.util.HashMap()
    for key, value in {"javax.jdo.option.ConnectionURL": metastore.url, "javax.jdo.option.ConnectionDriverName": DRIVER,
                       "javax.jdo.option.ConnectionUserName": metastore.user or "",
                       PASSWORD_KEY: metastore.password or "", "datanucleus.schema.autoCreateAll": "true",
                       # the naming Hive's own ObjectStore uses, so that the tables it reads are these
                       "datanucleus.identifierFactory": "datanucleus1",
                       "datanucleus.rdbms.useLegacyNativeValueStrategy": "true"}.items():
        props.put(key, value)
    mode = getattr(tools, "SchemaTool$Mode").CREATE
    context = tools.SchemaTool.getNucleusContextForMode(mode, "JDO", props, None, None, False)
    try:
        resolver = context.getClassLoaderResolver(None)
        names = jvm.java.util.HashSet()
        for metadata in context.getMetaDataManager().loadFiles(_string_array(gateway, ["package.jdo"]), resolver):
            for i in range(metadata.getNoOfPackages()):
                package = metadata.getPackage(i)
                for j in range(package.getNoOfClasses()):
                    names.add(package.getClass(j).getFullClassName())
        tools.SchemaTool().createSchemaForClasses(context.getStoreManager(), names)
    finally:
        context.close()


def _string_array(gateway, values: list[str]):
    array = gateway.new_array(gateway.jvm.java.lang.String, len(values))
    for i, value in enumerate(values):
        array[i] = value
    return array


def _java_message(err: Exception) -> str:
    java = getattr(err, "java_exception", None)
    return str(java.getMessage()) if java is not None else str(err).splitlines()[0]
