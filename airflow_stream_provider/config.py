"""Where the project keeps its files, and the settings read from the environment."""

from __future__ import annotations

import os
import tomllib
from datetime import timedelta, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def home() -> Path:
    """``$AIRFLOW_STREAM_HOME``, default ``~/airflow-stream``."""
    return Path(os.environ.get("AIRFLOW_STREAM_HOME") or Path.home() / "airflow-stream").expanduser()


def warehouse() -> Path:
    """Root of the Delta tables: ``$AIRFLOW_STREAM_HOME/warehouse``."""
    return home() / "warehouse"


def timezone_name() -> str:
    return os.environ.get("AIRFLOW_STREAM_TIMEZONE") or "UTC"


def timezone() -> tzinfo:
    """Zone in which naive timestamp strings are read (``AIRFLOW_STREAM_TIMEZONE``, default UTC)."""
    name = timezone_name()
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as err:
        raise ValueError(f"AIRFLOW_STREAM_TIMEZONE={name!r} is not a known IANA time zone") from err


def jars_dir() -> Path:
    """Folder holding the Delta Lake jars fetched by ``dev/setup`` (``AIRFLOW_STREAM_JARS``)."""
    return Path(os.environ.get("AIRFLOW_STREAM_JARS") or PROJECT_ROOT / "jars" / "lib")


def s3_jars_dir() -> Path:
    """Folder holding hadoop-aws and the AWS SDK, fetched by ``dev/setup`` (``AIRFLOW_STREAM_S3_JARS``):
    Spark loads them when the warehouse is on an object store."""
    return Path(os.environ.get("AIRFLOW_STREAM_S3_JARS") or PROJECT_ROOT / "jars" / "s3")


def conn_id() -> str:
    """Airflow connection of the stream node (``AIRFLOW_STREAM_CONN_ID``, default ``spark_connect``)."""
    return os.environ.get("AIRFLOW_STREAM_CONN_ID") or "spark_connect"


def settings() -> dict:
    """``$AIRFLOW_STREAM_HOME/airflow-stream.toml``, or an empty dict when there is none."""
    path = home() / "airflow-stream.toml"
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"{path}: {err}") from None


def cq_min_every_micros() -> int:
    """The smallest EVERY of a continuous query, in microseconds (``AIRFLOW_STREAM_CQ_MIN_EVERY``
    in milliseconds, IoTDB's ``continuous_query_min_every_interval_in_ms``; default 1000)."""
    raw = os.environ.get("AIRFLOW_STREAM_CQ_MIN_EVERY", "1000")
    try:
        millis = int(raw)
    except ValueError:
        raise ValueError(f"AIRFLOW_STREAM_CQ_MIN_EVERY={raw!r} is not a whole number of milliseconds") from None
    if millis < 1:
        raise ValueError(f"AIRFLOW_STREAM_CQ_MIN_EVERY={raw!r} must be at least 1 millisecond")
    return millis * 1000


def _seconds(env: str, key: str) -> timedelta | None:
    raw = os.environ.get(env)
    if raw is None:
        raw = settings().get("verify", {}).get(key)
    if raw in (None, "", 0, "0"):
        return None
    try:
        seconds = float(raw)
    except (TypeError, ValueError):
        raise ValueError(f"{env} ([verify] {key}) = {raw!r} is not a number of seconds") from None
    if seconds <= 0:
        raise ValueError(f"{env} ([verify] {key}) = {raw!r} must be positive")
    return timedelta(seconds=seconds)


def verify_every() -> timedelta | None:
    """How often each stream's DAGs verify it (``AIRFLOW_STREAM_VERIFY_EVERY`` or ``[verify] every``,
    in seconds; default: never, and no verification DAG is rendered)."""
    return _seconds("AIRFLOW_STREAM_VERIFY_EVERY", "every")


def verify_lookback() -> timedelta | None:
    """How far before a stream's progress a periodic verification reaches (``AIRFLOW_STREAM_VERIFY_LOOKBACK``
    or ``[verify] lookback``, in seconds; default: the whole history)."""
    return _seconds("AIRFLOW_STREAM_VERIFY_LOOKBACK", "lookback")


#: how long VERIFY ... REPAIR waits for the recalculation DAG's run of its windows, by default
VERIFY_REPAIR_TIMEOUT = timedelta(minutes=10)


def verify_repair_timeout() -> timedelta:
    """How long VERIFY ... REPAIR waits for the run of the recalculation DAG that recalculates its
    windows (``AIRFLOW_STREAM_VERIFY_REPAIR_TIMEOUT`` or ``[verify] repair_timeout``, in seconds;
    default 600)."""
    return _seconds("AIRFLOW_STREAM_VERIFY_REPAIR_TIMEOUT", "repair_timeout") or VERIFY_REPAIR_TIMEOUT


#: the TDengine versions whose stream behaviour a stream can follow where they differ (PERIOD of a
#: day or more): 3.3.7 counts from the creation day's midnight, 3.4 from the epoch's whole periods
TDENGINE_SEMANTICS = ("3.3.7", "3.4")


def tdengine_semantics() -> str:
    """Which TDengine version's semantics a new stream follows when it names none:
    ``AIRFLOW_STREAM_TDENGINE_SEMANTICS``, else ``[tdengine] semantics`` of ``airflow-stream.toml``;
    default ``3.3.7``."""
    value = os.environ.get("AIRFLOW_STREAM_TDENGINE_SEMANTICS") or settings().get("tdengine", {}).get("semantics")
    semantics = str(value).strip() if value else "3.3.7"
    if semantics not in TDENGINE_SEMANTICS:
        raise ValueError(f"TDengine semantics {value!r} (AIRFLOW_STREAM_TDENGINE_SEMANTICS or [tdengine] semantics): "
                         f"expected one of {', '.join(TDENGINE_SEMANTICS)}")
    return semantics


#: the detector engines a stream or a node can name
DETECTOR_ENGINES = ("in-process", "spark", "auto")


def detector_engine() -> str:
    """The node's detector engine for the window streams that name none:
    ``AIRFLOW_STREAM_DETECTOR_ENGINE``, else ``[node] detector_engine`` of ``airflow-stream.toml``;
    ``in-process`` (the default), ``spark`` or ``auto`` (spark when the node drives a cluster)."""
    value = os.environ.get("AIRFLOW_STREAM_DETECTOR_ENGINE") or settings().get("node", {}).get("detector_engine")
    engine = str(value).strip().lower() if value else "in-process"
    if engine not in DETECTOR_ENGINES:
        raise ValueError(f"detector engine {value!r} (AIRFLOW_STREAM_DETECTOR_ENGINE or [node] detector_engine): "
                         f"expected one of {', '.join(DETECTOR_ENGINES)}")
    return engine


def node_workers() -> int | None:
    """The stream node's worker processes as configured: ``AIRFLOW_STREAM_NODE_WORKERS``, else
    ``[node] workers`` of ``airflow-stream.toml`` (None: one per usable core)."""
    value = os.environ.get("AIRFLOW_STREAM_NODE_WORKERS")
    if value is None or not value.strip():
        value = settings().get("node", {}).get("workers")
    if value is None or not str(value).strip():
        return None
    try:
        return max(0, int(str(value).strip()))
    except ValueError:
        raise ValueError(f"node workers {value!r} (AIRFLOW_STREAM_NODE_WORKERS or [node] workers): "
                         "expected a number of processes") from None


def node_master() -> str:
    """The Spark master of this home's stream node: ``AIRFLOW_STREAM_NODE_MASTER`` (which the node
    sets for itself and its workers), else what the running node's ``status.json`` reports, else
    ``local[*]`` (no node reported one)."""
    value = os.environ.get("AIRFLOW_STREAM_NODE_MASTER", "").strip()
    if value:
        return value
    try:
        import json

        status = json.loads((home() / "node" / "status.json").read_text(encoding="utf-8"))
        return str(status.get("master") or "local[*]")
    except (OSError, ValueError):
        return "local[*]"


def resolve_engine(named: str, master: str) -> str:
    """The engine that runs a stream naming ``named`` on a node whose Spark master is ``master``:
    ``auto`` is ``spark`` on a standalone cluster (``spark://...``) and ``in-process`` on ``local[*]``."""
    if named == "auto":
        return "spark" if master.startswith("spark://") else "in-process"
    return named


def stream_settings(db: str, name: str) -> dict:
    """The ``[streams.<db>.<name>]`` table of ``airflow-stream.toml`` (names as the stream's, in lower
    case), or an empty dict; a stream whose name is not a bare TOML key is written
    ``[streams.<db>."<name>"]``."""
    databases = settings().get("streams", {})
    found = {str(k).lower(): v for k, v in databases.items()}.get(db.lower(), {})
    table = {str(k).lower(): v for k, v in found.items()}.get(name.lower(), {}) if isinstance(found, dict) else {}
    return dict(table) if isinstance(table, dict) else {}
