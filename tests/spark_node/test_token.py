"""The stream node's Spark Connect token: where it is kept, and how clients' URLs carry it (no JVM)."""

from __future__ import annotations

import json
import os
import stat

import pytest

from airflow_stream_provider.spark import endpoint, session


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(tmp_path))
    monkeypatch.delenv(endpoint.TOKEN_ENV, raising=False)
    return tmp_path


def test_a_new_token_is_random_and_readable_by_its_owner_only(home):
    old_umask = os.umask(0)  # even a permissive umask leaves it private
    try:
        first = endpoint.new_token()
        mode = stat.S_IMODE(endpoint.token_path().stat().st_mode)
    finally:
        os.umask(old_umask)
    assert mode == 0o600 and endpoint.token_path() == home / "node" / "token"
    assert len(first) >= 32 and endpoint.token() == first
    assert endpoint.new_token() != first
    assert endpoint.serving_token() == endpoint.token()  # a node started by hand keeps the file's token


def test_a_deployment_token_from_the_environment_is_served_and_kept(home, monkeypatch):
    endpoint.new_token()
    monkeypatch.setenv(endpoint.TOKEN_ENV, "shared-by-compose")
    assert endpoint.serving_token() == "shared-by-compose" == endpoint.token()


@pytest.mark.parametrize(("url", "expected"), [
    ("sc://127.0.0.1:15002", "sc://127.0.0.1:15002/;token=t%2Fk%3Be"),
    ("sc://h:1/", "sc://h:1/;token=t%2Fk%3Be"),
    ("sc://h:1/;use_ssl=true", "sc://h:1/;use_ssl=true;token=t%2Fk%3Be"),
    ("sc://h:1/;token=mine", "sc://h:1/;token=mine"),
])
def test_with_token(url, expected):
    assert endpoint.with_token(url, "t/k;e") == expected
    assert endpoint.with_token(url, None) == url


def test_no_running_node_no_url(home):
    endpoint.new_token()
    assert endpoint.running_connect_url() is None
    assert session.remote_url() is None


def test_spark_connect_connection_passes_its_token(home, monkeypatch):
    monkeypatch.delenv("AIRFLOW_STREAM_SPARK_REMOTE", raising=False)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CONNECT", json.dumps(
        {"conn_type": "spark_connect", "host": "node", "port": 15002, "password": "pw"}))
    assert session.remote_url() == "sc://node:15002/;token=pw"
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CONNECT", json.dumps(
        {"conn_type": "spark_connect", "host": "node", "port": 15002, "extra": {"token": "ex"}}))
    assert session.remote_url() == "sc://node:15002/;token=ex"


def test_the_token_goes_as_a_bearer_header_unless_tls_carries_it():
    from airflow_stream_provider.spark.channel import TokenChannelBuilder

    plain = TokenChannelBuilder("sc://127.0.0.1:1/;token=abc")
    assert list(plain.metadata()) == [("authorization", "Bearer abc")]
    tls = TokenChannelBuilder("sc://h:1/;use_ssl=true;token=abc")
    assert list(tls.metadata()) == []  # pyspark's TLS channel sends it as call credentials
    assert list(TokenChannelBuilder("sc://h:1").metadata()) == []
