"""The local Spark session loads Delta from the project's jars and leaves nothing in the working dir."""

from __future__ import annotations

import os

import pytest

from airflow_stream_provider.engine import session as spark_session

pytestmark = pytest.mark.spark


def test_delta_round_trip_and_no_litter(spark, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert spark_session.delta_round_trip() == 8
    spark.sql("SELECT 1").collect()
    assert sorted(os.listdir(tmp_path)) == []


def test_session_loads_no_remote_packages(spark):
    conf = spark.sparkContext.getConf()
    assert not conf.get("spark.jars.packages", "")
    jars = conf.get("spark.jars").split(",")
    assert any("delta-spark_" in j for j in jars) and all(os.path.isfile(j) for j in jars)


def test_missing_jars_are_reported_clearly(tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW_STREAM_JARS", str(tmp_path))
    with pytest.raises(spark_session.DeltaJarsMissing, match="run dev/setup"):
        spark_session.spark_conf()
