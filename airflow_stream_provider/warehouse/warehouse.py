"""The warehouse: the TDengine databases under ``$AIRFLOW_STREAM_HOME/warehouse``, the current
database, and the Spark session that queries them, with the session's temporary views and time zone.

The table statements are :mod:`.tables`'s, the name resolution and translation of queries
:mod:`.resolve`'s; the warehouse offers the latter as methods, since most of the project's queries
start from one.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
from sqlglot import exp

from airflow_stream_provider import config
from airflow_stream_provider import model as m
from airflow_stream_provider.spark.session import setting, spark_session
from airflow_stream_provider.warehouse import resolve
from airflow_stream_provider.warehouse.catalog import Catalog, TableInfo

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from typing_extensions import TypeIs


#: computes a table of ``information_schema`` from the warehouse
SystemView = Callable[["Warehouse"], pa.Table]


def _is_session(spark: object) -> TypeIs[SparkSession]:
    """A session rather than a function returning one: a session has ``sql`` (and may itself be
    callable, as a test double is)."""
    return hasattr(spark, "sql")


class Warehouse:
    """The TDengine databases under ``$AIRFLOW_STREAM_HOME/warehouse``.

    :param spark: a session for SELECT and DELETE, or a callable returning one; by default the
        stream node's session when it runs, else an in-process local session (created on first use).
    """

    def __init__(
        self,
        root: Path | None = None,
        *,
        spark: SparkSession | Callable[[], SparkSession] | None = None,
        database: str | None = None,
    ) -> None:
        self.catalog = Catalog(root or config.warehouse())
        self.database = database.lower() if database else None
        self._spark = spark
        #: per thread (the node's streams compute on their queries' threads), the temporary views
        #: made by :meth:`temp_view`, dropped when their :meth:`scratch` ends
        self._local = threading.local()

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            self._spark = spark_session()
        elif callable(self._spark) and not _is_session(self._spark):
            self._spark = self._spark()
        return self._spark

    def database_of(self, name: m.TableName) -> str:
        """The database of ``name``: its own, or the current one."""
        return resolve.database_of(self.catalog, self.database, name)

    # --- queries (:mod:`.resolve`) ---------------------------------------------------------------

    def spark_sql(self, query: m.SqlExpression) -> str:
        """The Spark SQL of a TDengine query, its tables resolved to the Delta tables they live in."""
        translate, _, _ = self.translator(query.tree)
        return translate(query.tree)

    def translator(self, tree: exp.Expr, *, also: tuple[TableInfo, ...] = (),
                   views: Mapping[str, SystemView] | None = None) -> tuple[resolve.Translate, str | None, str]:
        """(TDengine tree -> Spark SQL, timestamp column, precision) for trees over the tables
        ``tree`` reads (:func:`.resolve.translator`); ``views`` computes the tables of
        ``information_schema`` that the caller offers."""
        offered = {name: functools.partial(view, self) for name, view in (views or {}).items()}
        return resolve.translator(self.catalog, self.database, tree, also=also,
                                  system_tables=lambda name: resolve.system_view(self._session, name, offered))

    def _session(self) -> SparkSession:
        return self.spark

    def frame(self, query: m.SqlExpression | exp.Expr, *, bindings: dict | None = None,
              also: tuple[TableInfo, ...] = (), views: Mapping[str, SystemView] | None = None) -> DataFrame:
        """A TDengine query without a window clause as a Spark DataFrame (window clauses are run by
        :func:`airflow_stream_provider.windows.select.frame`).

        :param bindings: placeholder values (see :func:`~airflow_stream_provider.sql.to_spark`).
        :param also: tables the query reads through views or Delta paths (for ``_c0``).
        """
        tree = query.tree if isinstance(query, m.SqlExpression) else query
        translate, _, _ = self.translator(tree, also=also, views=views)
        return self.spark.sql(translate(tree, bindings))

    def check_path_tables(self, tree: exp.Expr) -> None:
        """Refuse the path tables of a query text that read files (:func:`.resolve.check_path_tables`)."""
        resolve.check_path_tables(self.catalog.store, tree)

    # --- the session -----------------------------------------------------------------------------

    def temp_view(self, df: DataFrame, prefix: str) -> str:
        """Register ``df`` as a temporary view with a new name starting with ``prefix``; the
        innermost :meth:`scratch` around the call drops it."""
        name = f"{prefix}{uuid.uuid4().hex[:12]}"
        df.createOrReplaceTempView(name)
        self._temp_views().append(name)
        return name

    def _temp_views(self) -> list[str]:
        views: list[str] | None = getattr(self._local, "views", None)
        if views is None:
            views = self._local.views = []
        return views

    @contextlib.contextmanager
    def scratch(self) -> Iterator[None]:
        """Drop the temporary views made inside when leaving (after the queries reading them ran).

        A session lives long (the stream node's, for days): each view keeps its plan, and with
        local data its rows, so views left behind fill the driver's memory run by run."""
        views = self._temp_views()
        mark = len(views)
        try:
            yield
        finally:
            made, views[mark:] = views[mark:], []
            for name in made:
                with contextlib.suppress(Exception):  # the session is gone: so are its views
                    self.spark.catalog.dropTempView(name)

    @contextlib.contextmanager
    def local_time(self) -> Iterator[None]:
        """Read timestamp strings in the statement in ``AIRFLOW_STREAM_TIMEZONE``, as INSERT does."""
        spark = self.spark
        zone = config.timezone_name()
        previous = setting(spark, "spark.sql.session.timeZone")
        if previous == zone:
            yield
            return
        spark.conf.set("spark.sql.session.timeZone", zone)
        try:
            yield
        finally:
            spark.conf.set("spark.sql.session.timeZone", previous)
