"""Generated output subtable names never block a stream.

With a tag ``EU/Paris`` in ``OUTPUT_SUBTABLE(concat(location, '_', tbname))``, a name taken as it is
would fail every run for every group ("cannot be used as a folder name"). A generated name the name
rule refuses is now encoded: offending characters become ``_`` and a hash of the whole name is
appended, so distinct names stay distinct subtables.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_stream_provider.model import names
from airflow_stream_provider.streams.output import MAX_NAME, subtable_name
from tests.conftest import sql

T0 = datetime(2025, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize("name", ["o_d1", "eu_paris_q'x", "my subtable", "流🙂", "a;b", "x" * 192])
def test_a_name_the_rule_accepts_is_kept_in_lower_case(name):
    assert subtable_name(name.upper() if name.isascii() else name) == name.lower()


@pytest.mark.parametrize(("name", "start"), [
    ("EU/Paris_q'x", "eu_paris_q'x_"),
    ("a\\b", "a_b_"),
    ("a\x00b", "a_b_"),
    ("tab\there", "tab_here_"),
    ("..", "___"),
    ("EU.Paris", "eu_paris_"),
    (".hidden", "_hidden_"),
    ("TBNAME", "tbname_"),
    ("x" * 300, "x" * (MAX_NAME - 9) + "_"),
    ("流" * 100, "流" * 61 + "_"),  # cut on a character boundary: 183 bytes and the hash
])
def test_a_name_the_rule_refuses_is_encoded_into_a_legal_one(name, start):
    encoded = subtable_name(name)
    assert encoded.startswith(start) and len(encoded) == len(start) + 8, encoded
    assert names.name_problem(encoded, names.TABLE) is None
    assert len(encoded.encode()) <= MAX_NAME


def test_encoding_keeps_distinct_names_apart():
    originals = ["eu/paris", "eu\\paris", "eu\x01paris", "eu.paris", "eu_paris/", "x" * 300, "x" * 301, "..", "./",
                 "/."]
    encoded = {subtable_name(n) for n in originals} | {"eu_paris"}
    assert len(encoded) == len(originals) + 1
    assert subtable_name("EU/Paris") == subtable_name("eu/paris")  # names are case-insensitive


@pytest.mark.spark
def test_output_subtable_with_a_slash_in_a_tag_writes_its_rows(wh):
    from airflow_stream_provider.streams.run import run

    sql(wh, """CREATE DATABASE power; USE power;
               CREATE STABLE meters (ts TIMESTAMP, current FLOAT) TAGS (groupid INT, location VARCHAR(24));
               INSERT INTO `q'x` USING meters TAGS (4, 'EU/Paris')
                 VALUES ('2025-01-01 00:00:00', 1) ('2025-01-01 00:00:10', 1) ('2025-01-01 00:00:20', 1);
               INSERT INTO d2 USING meters TAGS (5, 'Asia/Tokyo') VALUES ('2025-01-01 00:00:05', 2)
                 ('2025-01-01 00:00:25', 2);
               INSERT INTO d3 USING meters TAGS (6, 'plain') VALUES ('2025-01-01 00:00:05', 3)
                 ('2025-01-01 00:00:25', 3)""")
    sql(wh, """CREATE STREAM bytag INTERVAL(10s) SLIDING(10s) FROM meters PARTITION BY tbname, location
               STREAM_OPTIONS(FILL_HISTORY_FIRST) INTO bytag_out OUTPUT_SUBTABLE(concat(location, '_', tbname))
               AS SELECT _twstart, count(*) AS n FROM %%trows""")
    report = run(wh, "power", "bytag")
    # the windows [00:00, 00:10) and [00:10, 00:20) of each group closed ([00:20, 00:30) is open);
    # d2 and d3 have no row in the second, so it counts 0
    assert report.written == 6, report
    paris, tokyo = subtable_name("EU/Paris_q'x"), subtable_name("Asia/Tokyo_d2")
    assert paris.startswith("eu_paris_q'x_") and tokyo.startswith("asia_tokyo_d2_")
    table = sql(wh, "SELECT * FROM bytag_out")[-1].table
    start = table.column_names[0]
    got = {(r["tbname"], r[start].astimezone(UTC) - T0, r["n"]) for r in table.to_pylist()}
    ten = timedelta(seconds=10)
    assert got == {(paris, timedelta(0), 1), (paris, ten, 1), (tokyo, timedelta(0), 1), (tokyo, ten, 0),
                   ("plain_d3", timedelta(0), 1), ("plain_d3", ten, 0)}
    assert run(wh, "power", "bytag").written == 0  # the next run is not blocked either: nothing new closed
