"""The local Spark session loads Delta from the project's jars and leaves nothing in the working dir."""

from __future__ import annotations

import os

import pytest

from airflow_stream_provider.spark import session as spark_session

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


def test_child_processes_do_not_inherit_the_connect_mode_this_process_switched_to(monkeypatch):
    from airflow_stream_provider.spark import session

    monkeypatch.setenv(session.CONNECT_MODE, "1")
    monkeypatch.setattr(session, "_connect_mode_set", True)  # as spark_session() leaves it in a task
    assert session.CONNECT_MODE not in session.child_environ()
    monkeypatch.setattr(session, "_connect_mode_set", False)  # set by the user: theirs to pass on
    assert session.child_environ()[session.CONNECT_MODE] == "1"
