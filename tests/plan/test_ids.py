"""DAG ids are valid Airflow keys and injective in (database, stream).

Streams ``a__b.c`` and ``a.b__c`` must not both become ``stream__a__b__c`` (one DAG rendered,
silently), and ``a.`my stream``` must become a DAG too.
"""

from __future__ import annotations

import itertools

import pytest

from airflow_stream_provider.plan.ids import DAG_ID, stream_dag_ids
from airflow_stream_provider.plan.state import StreamState
from airflow_stream_provider.sql import parse
from airflow_stream_provider.streams.store import StreamStore

STATE = StreamState.from_json({"created": "2025-05-01T12:00:00+00:00"})


@pytest.mark.parametrize(("db", "name", "main"), [
    ("d", "s", "stream__d__s"),
    ("power", "avg1m", "stream__power__avg1m"),
    ("Power", "Avg_10s", "stream__power__avg_10s"),  # names are case-insensitive
    ("d", "s1", "stream__d__s1"),
])
def test_plain_names_keep_the_ids_deployments_have(db, name, main):
    assert stream_dag_ids(db, name) == (main, main + "__recalc")


NAMES = [("a__b", "c"), ("a", "b__c"), ("a", "my stream"), ("a", "my_stream"), ("a", "my.stream"),
         ("a_", "b"), ("a", "_b"), ("a", "b__recalc"), ("a", "b"), ("流", "🙂"), ("x", "流"), ("x", "x"),
         ("d" * 64, "s" * 192), ("d" * 64, "s" * 191 + "t"), ("a;drop", "x"), ("a", "q'x")]


def test_ids_are_valid_airflow_keys_and_distinct():
    seen: dict[str, tuple[str, str]] = {}
    for db, name in NAMES:
        for dag_id in stream_dag_ids(db, name):
            assert DAG_ID.fullmatch(dag_id), dag_id
            assert seen.setdefault(dag_id, (db, name)) == (db, name), f"{dag_id}: {seen[dag_id]} and {(db, name)}"


def test_no_two_short_names_share_an_id():
    """Every name of up to three characters over letters, '_', '.', ' ' and '/' in a few databases:
    every main and recalculation id differs, and each is a valid key."""
    alphabet = "ab_. /"
    names = ["".join(p) for n in (1, 2, 3) for p in itertools.product(alphabet, repeat=n)]
    seen: dict[str, tuple[str, str]] = {}
    for db in ("a", "a_b", "a__b", "b_", "_a"):
        for name in names:
            for dag_id in stream_dag_ids(db, name):
                assert DAG_ID.fullmatch(dag_id), dag_id
                assert seen.setdefault(dag_id, (db, name)) == (db, name), dag_id


def test_render_streams_renders_each_of_three_streams_with_awkward_names(tmp_path):
    from airflow_stream_provider.dag_factory import render_streams

    store = StreamStore(tmp_path)
    for db, name in [("a__b", "c"), ("a", "b__c"), ("a", "`my stream`")]:
        text = f"CREATE STREAM {db}.{name} PERIOD(10s) NOTIFY('ws://127.0.0.1:9/')"
        (stmt,) = parse(text)
        store.create(db, stmt, text, STATE)
    dags = render_streams(tmp_path)
    assert len(dags) == 3, sorted(dags)
    assert set(dags) == {stream_dag_ids("a__b", "c")[0], stream_dag_ids("a", "b__c")[0],
                         stream_dag_ids("a", "my stream")[0]}
    assert {tag for dag in dags.values() for tag in dag.tags if tag.startswith("stream:")} == {
        "stream:a__b.c", "stream:a.b__c", "stream:a.my stream"}


#: Airflow refuses a DAG tag longer than this (``airflow.sdk.definitions.dag``: "tag cannot be longer
#: than 100 characters")
AIRFLOW_TAG_LIMIT = 100


def test_a_stream_whose_names_fill_the_name_rule_still_becomes_a_dag(tmp_path):
    """Security review S13: a 64-byte database and a 190-character stream are legal names, so the
    stream renders (before, Airflow's tag limit stopped it), tags within Airflow's limit and distinct
    for two names that differ only at their end."""
    from airflow_stream_provider.dag_factory import render_streams

    store = StreamStore(tmp_path)
    pairs = [("d" * 64, "s" * 190), ("d" * 64, "s" * 189 + "t"), ("p", "流" * 64), ("p", "q" * 91)]
    for db, name in pairs:
        text = f"CREATE STREAM {db}.`{name}` PERIOD(10s) NOTIFY('ws://127.0.0.1:9/')"
        (stmt,) = parse(text)
        store.create(db, stmt, text, STATE)
    dags = render_streams(tmp_path)
    assert set(dags) == {stream_dag_ids(db, name)[0] for db, name in pairs}
    tags = [tag for dag in dags.values() for tag in dag.tags]
    assert all(len(tag) <= AIRFLOW_TAG_LIMIT for tag in tags), max(tags, key=len)
    stream_tags = [tag for tag in tags if tag.startswith("stream:")]
    assert len(set(stream_tags)) == len(pairs)
    assert "stream:p." + "q" * 91 in stream_tags  # 100 characters: kept whole
