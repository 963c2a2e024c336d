"""Where the warehouse's Delta tables live: a local folder, or a prefix of an S3-compatible object
store (``s3://bucket/prefix``).

The location is ``AIRFLOW_STREAM_WAREHOUSE``, else ``[warehouse] location`` of
``airflow-stream.toml``, else ``$AIRFLOW_STREAM_HOME/warehouse``. The catalog's records (databases,
subtables) stay in the home's ``warehouse/`` folder either way; the tables, their data files and their
Delta logs, are at ``<location>/<db>/<table>``.

Credentials and the endpoint come from the standard AWS variables (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``, ``AWS_ENDPOINT_URL`` for a store other than AWS), or from
an Airflow connection named by ``AIRFLOW_STREAM_STORAGE_CONN_ID`` (login: key id, password: secret,
extra ``endpoint_url`` and ``region_name``), never from SQL text. The Delta Lake Rust kernel makes
every commit there, with the object store's conditional writes (``If-None-Match``), so concurrent
writers cannot overwrite a commit. Spark reads through Hadoop's S3A and commits nothing to the tables
there: S3A writes a log entry with a plain PUT, which could replace a concurrent writer's (a DELETE's
keys are found by Spark and deleted by the kernel, see ``warehouse.tables._delete_by_key``).

The streams' event tables and detector checkpoints follow the tables: at ``<location>/.streams/<db>/<name>/``
on an object store (:func:`streams_root`), each written by one detector at a time.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from airflow_stream_provider import config, files

REMOTE = "s3://"
#: the variables the Delta kernel and pyarrow read, set from an Airflow connection when one is named
AWS_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_ENDPOINT_URL")


class StorageError(ValueError):
    """The warehouse location or its credentials are unusable; the message says how to fix it."""


#: a table's place: a local folder, or an ``s3://`` URL
Location = Path | str


def configured() -> str | None:
    """The warehouse location the environment or ``airflow-stream.toml`` names, if any."""
    value = os.environ.get("AIRFLOW_STREAM_WAREHOUSE") or config.settings().get("warehouse", {}).get("location")
    return str(value) if value else None


def is_remote(location: Location) -> bool:
    return isinstance(location, str) and location.startswith(REMOTE)


def check_location(value: str) -> str:
    """A remote location as ``s3://bucket[/prefix]`` without a trailing slash."""
    if not value.startswith(REMOTE):
        raise StorageError(f"warehouse location {value!r}: write s3://bucket/prefix for an S3-compatible object "
                           "store; a local warehouse is always $AIRFLOW_STREAM_HOME/warehouse")
    parts = urlsplit(value)
    if not parts.netloc or parts.query or parts.fragment:
        raise StorageError(f"warehouse location {value!r}: write s3://bucket/prefix")
    return value.rstrip("/")


#: reads an Airflow connection into AWS variables; the Airflow side registers one (hooks.bind)
ConnectionReader = Callable[[str], dict[str, str]]
_read_connection: ConnectionReader | None = None


def use_connection_reader(reader: ConnectionReader | None) -> None:
    global _read_connection
    _read_connection = reader


def credentials() -> dict[str, str]:
    """The AWS variables for the object store: the named Airflow connection's, else the environment's."""
    conn_id = os.environ.get("AIRFLOW_STREAM_STORAGE_CONN_ID")
    if conn_id:
        if _read_connection is None:
            raise StorageError(f"AIRFLOW_STREAM_STORAGE_CONN_ID={conn_id!r} names an Airflow connection, and this "
                               "process cannot read Airflow connections (airflow_stream_provider.hooks.bind())")
        return _read_connection(conn_id)
    return {k: os.environ[k] for k in AWS_VARIABLES if os.environ.get(k)}


def credentials_given() -> bool:
    """Whether object store credentials are given: an Airflow connection named for them, or the AWS
    variables of a key or an endpoint."""
    return any(os.environ.get(k) for k in ("AIRFLOW_STREAM_STORAGE_CONN_ID", "AWS_ACCESS_KEY_ID", "AWS_ENDPOINT_URL"))


def export_credentials() -> None:
    """Put the connection's credentials into this process's environment, where the Delta kernel,
    pyarrow and a Spark started from here read them."""
    conn_id = os.environ.get("AIRFLOW_STREAM_STORAGE_CONN_ID")
    if conn_id and os.environ.get("AIRFLOW_STREAM_STORAGE_EXPORTED") != conn_id:  # read once per process
        os.environ.update(credentials())
        os.environ["AIRFLOW_STREAM_STORAGE_EXPORTED"] = conn_id
    if os.environ.get("AWS_ENDPOINT_URL", "").startswith("http://"):
        os.environ.setdefault("AWS_ALLOW_HTTP", "true")


def spark_settings(jars: list[Path]) -> dict[str, str]:
    """Spark's settings for a remote warehouse: ``s3://`` through S3A, with the endpoint of
    :func:`credentials` (the keys are :func:`hadoop_secrets`)."""
    if not jars:
        raise StorageError("the warehouse is on an object store, and the S3A jars (hadoop-aws and the AWS SDK) are "
                           "missing: run dev/setup, which fetches them into jars/s3")
    values = credentials()
    classpath = ":".join(str(p) for p in jars)
    settings = {
        "spark.driver.extraClassPath": classpath,
        # the workers of a cluster hold the same installation (and so these jars) at the same path
        "spark.executor.extraClassPath": classpath,
        "spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        # Structured Streaming writes its checkpoints through Hadoop's FileContext, which needs this binding
        "spark.hadoop.fs.AbstractFileSystem.s3.impl": "org.apache.hadoop.fs.s3a.S3A",
        "spark.hadoop.fs.s3a.path.style.access": "true",
    }
    endpoint = values.get("AWS_ENDPOINT_URL")
    if endpoint:
        settings["spark.hadoop.fs.s3a.endpoint"] = endpoint
        settings["spark.hadoop.fs.s3a.connection.ssl.enabled"] = str(endpoint.startswith("https://")).lower()
    if values.get("AWS_REGION"):
        settings["spark.hadoop.fs.s3a.endpoint.region"] = values["AWS_REGION"]
    return settings


def hadoop_secrets() -> dict[str, str]:
    """The keys as S3A's settings. They go into the running session's Hadoop configuration (see
    ``spark.session``), which Spark ships to the executors with each job: never onto a command line."""
    values = credentials()
    keys = {"fs.s3a.access.key": values.get("AWS_ACCESS_KEY_ID"),
            "fs.s3a.secret.key": values.get("AWS_SECRET_ACCESS_KEY"),
            "fs.s3a.session.token": values.get("AWS_SESSION_TOKEN")}
    return {key: value for key, value in keys.items() if value}


def _filesystem():
    # the credentials as this process exported them: a connection is read once, not on every poll
    export_credentials()
    values = tuple(sorted((k, os.environ[k]) for k in AWS_VARIABLES if os.environ.get(k)))
    return _s3_filesystem(values)


@functools.lru_cache(maxsize=4)
def _s3_filesystem(values: tuple[tuple[str, str], ...]):
    """One client per set of credentials: the triggerer polls small objects every half second."""
    from pyarrow import fs

    found = dict(values)
    endpoint = found.get("AWS_ENDPOINT_URL")
    kwargs: dict = {"access_key": found.get("AWS_ACCESS_KEY_ID"), "secret_key": found.get("AWS_SECRET_ACCESS_KEY"),
                    "session_token": found.get("AWS_SESSION_TOKEN"), "region": found.get("AWS_REGION") or "us-east-1"}
    if endpoint:
        parts = urlsplit(endpoint)
        kwargs |= {"endpoint_override": parts.netloc, "scheme": parts.scheme or "https"}
    return fs.S3FileSystem(**kwargs)


def join(location: Location, *names: str) -> Location:
    """``<location>/<name>/...`` for a folder or an ``s3://`` prefix; the names are checked by the
    caller (the name rule)."""
    if is_remote(location):
        return "/".join([str(location), *names])
    return Path(location).joinpath(*names)


def read_text(location: Location) -> str:
    """A small file's text, local or on the object store; FileNotFoundError when there is none."""
    if not is_remote(location):
        return Path(location).read_text(encoding="utf-8")
    with _filesystem().open_input_stream(str(location).removeprefix(REMOTE)) as handle:
        return handle.read().decode("utf-8")


def write_text(location: Location, text: str) -> None:
    """Replace a small file, local or on the object store, in one step: a reader sees the old text or
    the new, never a part (a local file is renamed into place, an object is one PUT). A local file's
    folder is made when missing."""
    if not is_remote(location):
        path = Path(location)
        files.write_text(files.make_dirs(path.parent) / path.name, text)
        return
    with _filesystem().open_output_stream(str(location).removeprefix(REMOTE)) as handle:
        handle.write(text.encode("utf-8"))


def delete(location: Location) -> None:
    """Delete one file or object; nothing when there is none."""
    if not is_remote(location):
        Path(location).unlink(missing_ok=True)
        return
    from pyarrow import fs

    filesystem = _filesystem()
    key = str(location).removeprefix(REMOTE)
    if filesystem.get_file_info(key).type == fs.FileType.File:
        filesystem.delete_file(key)


def exists(location: Location) -> bool:
    """Whether a file or object is there."""
    if not is_remote(location):
        return Path(location).exists()
    from pyarrow import fs

    return _filesystem().get_file_info(str(location).removeprefix(REMOTE)).type != fs.FileType.NotFound


def names(location: Location) -> list[str]:
    """The names in a folder or directly under a prefix; FileNotFoundError when there is nothing."""
    if not is_remote(location):
        return [p.name for p in Path(location).iterdir()]
    from pyarrow import fs

    selector = fs.FileSelector(str(location).removeprefix(REMOTE), allow_not_found=False, recursive=False)
    return [info.base_name for info in _filesystem().get_file_info(selector)]


def remove(location: Location) -> None:
    """Delete a folder or everything under a prefix; nothing when there is nothing."""
    if not is_remote(location):
        shutil.rmtree(location, ignore_errors=True)
        return
    assert isinstance(location, str)
    from pyarrow import fs

    filesystem = _filesystem()
    key = location.removeprefix(REMOTE)
    if filesystem.get_file_info(key).type != fs.FileType.NotFound:
        filesystem.delete_dir(key)


@dataclass(frozen=True)
class TableStore:
    """The tables' root: a local folder or an ``s3://`` prefix."""

    root: Location

    @property
    def remote(self) -> bool:
        return is_remote(self.root)

    def join(self, *names: str) -> Location:
        """``<root>/<name>/...``; the names are checked by the caller (the catalog's name rule)."""
        return join(self.root, *names)

    def is_table(self, location: Location) -> bool:
        if isinstance(location, Path):
            return (location / "_delta_log").is_dir()
        from deltalake import DeltaTable

        return bool(DeltaTable.is_deltatable(location))

    def tables(self, db: str) -> list[str]:
        """The names of the Delta tables of ``db``."""
        folder = self.join(db)
        if isinstance(folder, Path):
            return [p.name for p in folder.iterdir() if (p / "_delta_log").is_dir()] if folder.is_dir() else []
        from pyarrow import fs

        selector = fs.FileSelector(folder.removeprefix(REMOTE), allow_not_found=True, recursive=False)
        found = [info.base_name for info in _filesystem().get_file_info(selector) if info.type == fs.FileType.Directory]
        return [name for name in found if self.is_table(self.join(db, name))]

    def remove(self, location: Location) -> None:
        """Delete a table or a database's tables, files and log."""
        if isinstance(location, Path):
            shutil.rmtree(location)
            return
        remove(location)

    def contains(self, location: str) -> bool:
        """``location`` lies inside the root."""
        if isinstance(self.root, str):
            return location.startswith(self.root + "/") and ".." not in location.split("/")
        path = Path(location).resolve()
        return self.root.resolve() in path.parents


def named_store(catalog_root: Path) -> TableStore:
    """Where the tables of the catalog at ``catalog_root`` would live, without claiming an object
    store prefix (:func:`table_store`): for checks that write nothing."""
    value = configured()
    return TableStore(check_location(value) if value else catalog_root)


def table_store(catalog_root: Path) -> TableStore:
    """Where the tables of the catalog at ``catalog_root`` live: the configured object store prefix,
    else next to the catalog's records. A prefix serves one catalog: see :func:`claim`."""
    value = configured()
    if not value:
        return TableStore(catalog_root)
    export_credentials()
    location = check_location(value)
    claim(location, catalog_root)
    return TableStore(location)


#: the object under a remote warehouse naming the catalog its tables belong to
OWNER = ".catalog.json"
#: the catalog's identity, kept with its records (one file for every machine sharing the home)
CATALOG_ID = ".catalog-id"


def catalog_id(catalog_root: Path) -> str:
    """The identity of the catalog at ``catalog_root``, made on first use."""
    path = catalog_root / CATALOG_ID
    try:
        return path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        catalog_root.mkdir(parents=True, exist_ok=True)
        made = uuid.uuid4().hex
        try:
            with path.open("x", encoding="utf-8") as handle:  # another process may make it first
                handle.write(made + "\n")
        except FileExistsError:
            return path.read_text(encoding="utf-8").strip()
        return made


def claim(location: str, catalog_root: Path) -> None:
    """Record that the tables under ``location`` belong to the catalog at ``catalog_root``, or refuse
    when they belong to another one: two homes on one prefix would each keep records of tables the
    other drops and replaces, and write into each other's stream data."""
    mine = catalog_id(catalog_root)
    if _claimed.get(location) == mine:
        return
    owner = join(location, OWNER)
    assert isinstance(owner, str)
    try:
        found = json.loads(read_text(owner)).get("catalog")
    except FileNotFoundError:
        with _filesystem().open_output_stream(owner.removeprefix(REMOTE)) as handle:
            handle.write(json.dumps({"catalog": mine, "home": str(catalog_root.parent)}).encode())
        found = json.loads(read_text(owner)).get("catalog")  # two first claims at once: the last write wins
    if found != mine:
        raise StorageError(f"warehouse location {location} holds the tables of another stream home (catalog {found}, "
                           f"named in {owner}); this home's catalog is {mine} ({catalog_root / CATALOG_ID}). Give "
                           "each home a prefix of its own; machines sharing one home share its catalog file")
    _claimed[location] = mine


_claimed: dict[str, str] = {}


#: the folder of a remote warehouse holding the streams' event tables and detector checkpoints; a
#: database name cannot start with "." (the name rule), so it never meets a database's tables
STREAMS_FOLDER = ".streams"


def streams_root(local: Path) -> Location:
    """Where the streams' event tables and detector checkpoints live: ``<location>/.streams`` when the
    warehouse is on an object store, else ``local`` (the home's ``state/``, next to their progress)."""
    value = configured()
    return join(check_location(value), STREAMS_FOLDER) if value else local
