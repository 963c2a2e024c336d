"""TDengine SQL to Spark SQL: translation tables, and the translated functions run on real Spark."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.sql import to_spark
from airflow_stream_provider.sql.tdengine.dialect import TDengine, parse_fragment

BINDINGS = {
    "_twstart": datetime(2025, 1, 1, tzinfo=UTC),
    "_twend": datetime(2025, 1, 1, 0, 1, tzinfo=UTC),
    "_tlocaltime": 1735689600123456789,
    "%%1": "it's",
    "%%tbname": "d1' OR '1'='1",
    "%%trows": "stream_trows_7",
}


def spark_sql(tdengine: str, **kwargs) -> str:
    tree = parse_fragment(tdengine, clause="AS", query=True)
    return to_spark(tree, bindings=BINDINGS, timestamp_column="ts", **kwargs)


ROUND_TRIPS = [
    ("SELECT avg(col1) FROM tb2 WHERE _c0 >= _twend - 5m",
     "SELECT AVG(col1) FROM tb2 WHERE `ts` >= TIMESTAMP_MICROS(1735689660000000) - INTERVAL 5 MINUTE"),
    ("SELECT _twstart + 0s AS o FROM t", "SELECT TIMESTAMP_MICROS(1735689600000000) + INTERVAL 0 SECOND AS o FROM t"),
    ("SELECT _rowts FROM t WHERE ts > now - 2w + 10a",
     "SELECT `ts` FROM t WHERE ts > CURRENT_TIMESTAMP() - INTERVAL 14 DAY + INTERVAL 10 MILLISECOND"),
    ("SELECT `select`, `my col` FROM `power`.`Meters`", "SELECT `select`, `my col` FROM `power`.`Meters`"),
    ("SELECT spread(v), last_row(v) FROM db.t", "SELECT MAX(v) - MIN(v), MAX_BY(v, `ts`) FROM db.t"),
    ("SELECT first(v), last(v) FROM t",
     "SELECT MIN_BY(v, IF(v IS NULL, NULL, `ts`)), MAX_BY(v, IF(v IS NULL, NULL, `ts`)) FROM t"),
    ("SELECT apercentile(v, 90), percentile(v, 50), stddev(v) FROM t",
     "SELECT PERCENTILE_APPROX(v, 90 / 100.0), PERCENTILE(v, 50 / 100.0), STDDEV_POP(v) FROM t"),
    ("SELECT log(v, 2), log(v), pow(v, 2), length(s), char_length(s) FROM t",
     "SELECT LOG(2, v), LN(v), POWER(v, 2), OCTET_LENGTH(s), CHAR_LENGTH(s) FROM t"),
    ("SELECT cast(_tlocaltime / 1000000 AS TIMESTAMP) FROM t",
     "SELECT TIMESTAMP_MILLIS(CAST(1735689600123456789 / 1000000 AS BIGINT)) FROM t"),
    ("SELECT cast(v AS VARCHAR(10)), cast(v AS NCHAR(4)), cast(v AS INT UNSIGNED), cast(v AS BOOL) FROM t",
     "SELECT CAST(v AS STRING), CAST(v AS STRING), CAST(v AS BIGINT), CAST(v AS BOOLEAN) FROM t"),
    ("SELECT concat_ws('-', tbname, location) FROM meters WHERE location = %%1",
     "SELECT CONCAT_WS('-', tbname, location) FROM meters WHERE location = 'it\\'s'"),
    ("SELECT count(*) FROM %%trows", "SELECT COUNT(*) FROM stream_trows_7"),
    ("SELECT count(DISTINCT v), ifnull(v, 0) FROM t", "SELECT COUNT(DISTINCT v), COALESCE(v, 0) FROM t"),
    ("SELECT _twstart, count(*) FROM t WHERE tbname = %%tbname",
     "SELECT TIMESTAMP_MICROS(1735689600000000), COUNT(*) FROM t WHERE tbname = 'd1\\' OR \\'1\\'=\\'1'"),
]


@pytest.mark.parametrize("tdengine, spark", ROUND_TRIPS)
def test_translation(tdengine, spark):
    assert spark_sql(tdengine) == spark


@pytest.mark.parametrize(
    "tdengine",
    [
        "SELECT _wstart, count(*) FROM t INTERVAL(1m) SLIDING(30s) FILL(PREV)",
        "SELECT count(*) FROM t PARTITION BY tbname STATE_WINDOW(s) TRUE_FOR(5s)",
        "SELECT count(*) FROM t EVENT_WINDOW START WITH v > 1 END WITH v < 0",
        "SELECT count(*) FROM t SESSION(ts, 10s)",
        "SELECT count(*) FROM t COUNT_WINDOW(10, 5)",
    ],
)
def test_window_clauses_parse_and_print_back(tdengine):
    tree = parse_fragment(tdengine, clause="SELECT", query=True)
    assert tree.sql(dialect=TDengine).replace("COUNT(*)", "count(*)").replace("PREV", "PREV") == tdengine
    with pytest.raises(StreamDefinitionError, match="window clause"):
        to_spark(tree)


@pytest.mark.parametrize(
    "tdengine, words",
    [
        ("SELECT %%1 FROM t", "placeholder %%1 is not bound"),
        ("SELECT interp(v) FROM t", "INTERP is not supported"),
        ("SELECT unknown_fn(v) FROM t", "unknown function UNKNOWN_FN"),
        ("SELECT avg(v, 2) FROM t", "AVG takes 1 argument(s), found 2"),
        ("SELECT _c0 FROM t", "timestamp column"),
    ],
)
def test_untranslatable_queries_are_refused(tdengine, words):
    tree = parse_fragment(tdengine, clause="SELECT", query=True)
    with pytest.raises(StreamDefinitionError) as info:
        to_spark(tree, bindings={})
    assert words in str(info.value)


def test_quoted_values_cannot_change_the_query():
    """A bound string holding SQL stays one literal: the query keeps its single WHERE conjunct."""
    import sqlglot
    from sqlglot import exp

    sql = spark_sql("SELECT count(*) FROM t WHERE tbname = %%tbname")
    where = sqlglot.parse_one(sql, read="spark").args["where"].this
    assert isinstance(where, exp.EQ)
    assert where.expression.this == "d1' OR '1'='1"


@pytest.mark.spark
def test_translated_functions_on_spark_match_hand_calculation(spark):
    from pyspark.sql.types import DoubleType, StringType, StructField, StructType, TimestampType

    def at(s):
        return datetime(2025, 1, 1, 0, 0, s, tzinfo=UTC)

    rows = [(at(0), 1.0, "a"), (at(10), 3.0, "b"), (at(20), None, "c"), (at(30), 5.0, "d"), (at(40), None, "e")]
    schema = StructType([StructField("ts", TimestampType()), StructField("v", DoubleType()),
                         StructField("s", StringType())])
    spark.createDataFrame(rows, schema).createOrReplaceTempView("oracle_t")
    query = spark_sql(
        "SELECT spread(v) AS spread, first(v) AS f, last(v) AS l, last_row(v) AS lr, twa(v) AS twa, "
        "elapsed(ts, 1s) AS el, apercentile(v, 50) AS ap, percentile(v, 50) AS p, count(v) AS c, "
        "stddev(v) AS sd FROM oracle_t"
    )
    got = spark.sql(query).collect()[0].asDict()
    # Hand calculation over the non-NULL points (0s, 1), (10s, 3), (30s, 5):
    # TWA = ((1+3)/2*10 + (3+5)/2*20) / 30 = 100/30; population stddev of 1, 3, 5 = sqrt(8/3).
    assert got["spread"] == 4.0 and got["f"] == 1.0 and got["l"] == 5.0 and got["lr"] is None
    assert got["twa"] == pytest.approx(100 / 30)
    assert got["el"] == 40.0 and got["ap"] == 3.0 and got["p"] == 3.0 and got["c"] == 3
    assert got["sd"] == pytest.approx((8 / 3) ** 0.5)

    scalars = spark.sql(spark_sql(
        "SELECT timetruncate('2025-01-01 00:17:31', 15m) AS tt, cast(1735689600123 AS TIMESTAMP) AS ct, "
        "to_iso8601(cast(1735689600000 AS TIMESTAMP)) AS iso, weekday('2025-01-01 10:00:00') AS wd, "
        "timediff('2025-01-01 00:10:00', '2025-01-01 00:00:00', 1m) AS td, _twend - 5m AS back, "
        "twa(v) AS single FROM oracle_t WHERE s = 'a'"
    )).collect()[0].asDict()
    assert scalars["tt"].replace(tzinfo=None) == datetime(2025, 1, 1, 0, 15)
    assert scalars["ct"].replace(tzinfo=None) == datetime(2025, 1, 1, 0, 0, 0, 123000)
    assert scalars["iso"] == "2025-01-01T00:00:00.000+00:00"
    assert scalars["wd"] == 2  # 2025-01-01 is a Wednesday; TDengine counts Monday as 0
    assert scalars["td"] == 10
    assert scalars["back"].replace(tzinfo=None) == datetime(2024, 12, 31, 23, 56)
    assert scalars["single"] == 1.0
