"""Hostile input, systematically: statements of the three languages mutated token by token through
`airflow-stream sql`, and damaged CSV and Parquet files through `airflow-stream load`.

Whatever the input, the command ends with exit status 0 (the mutation is still a valid statement,
or the file still a valid one) or 2 with an ``error:`` message, never with an exception (a Python
traceback) or a Java stack in its output. A statement refused with 2 names its line and column and
has written nothing, and so has a refused load: the home's files are the same before and after,
Spark's scratch space aside.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from airflow_stream_provider.cli import main

pytestmark = pytest.mark.spark

SCHEMA = """
CREATE DATABASE power; USE power;
CREATE STABLE meters (ts TIMESTAMP, current FLOAT, voltage INT, phase FLOAT) TAGS (location VARCHAR(24), groupid INT);
INSERT INTO d1001 USING meters TAGS ('California.SanFrancisco', 2)
  VALUES ('2018-10-03 14:38:05.000', 10.3, 219, 0.31) ('2018-10-03 14:38:15.000', 12.6, 218, 0.33);
CREATE DATABASE root.ln;
INSERT INTO root.ln.wf01.wt01(time, temperature, status) VALUES (1000, 20.5, true), (2000, 21.5, false);
"""

# one statement each: a refused statement must leave everything as it was
SEEDS = [
    # TDengine 3.3.7
    "INSERT INTO power.d1001 VALUES ('2018-10-03 14:39:05.000', 10.5, 220, 0.3)",
    "INSERT INTO power.d1002 USING power.meters TAGS ('California.LosAngeles', 3) VALUES (1538548685000, 1, 2, 3)",
    "SELECT tbname, _wstart, avg(current), max(voltage) FROM power.meters WHERE ts >= '2018-10-03' "
    "PARTITION BY tbname INTERVAL(10s) FILL(NULL)",
    "DELETE FROM power.meters WHERE ts < '2000-01-01' AND voltage > 1000",
    "CREATE STREAM power.s1 INTERVAL(10s) SLIDING(10s) FROM power.meters PARTITION BY tbname "
    "STREAM_OPTIONS(WATERMARK(1s) | PRE_FILTER(voltage > 100)) NOTIFY('ws://127.0.0.1:9/') ON (WINDOW_CLOSE) "
    "INTO power.s1_out OUTPUT_SUBTABLE(concat('o_', tbname)) TAGS (loc VARCHAR(24) AS tbname) "
    "AS SELECT _twstart, avg(current), count(*) FROM %%trows",
    "CREATE STREAM power.p1 PERIOD(1m, 5s) INTO power.p1_out AS SELECT cast(_tlocaltime / 1000 AS timestamp) ts, "
    "count(*) c FROM power.meters",
    "CREATE STABLE power.st (ts TIMESTAMP, v DOUBLE, s VARCHAR(16)) TAGS (loc NCHAR(8), n BIGINT)",
    "DROP STREAM IF EXISTS power.s9",
    "RECALCULATE STREAM power.s1 FROM '2018-10-03 14:38:00' TO '2018-10-03 14:40:00'",
    # TDengine 3.0 to 3.3.6
    "CREATE STREAM IF NOT EXISTS power.l1 TRIGGER AT_ONCE IGNORE EXPIRED 0 INTO power.l1_out "
    "AS SELECT _wstart, count(*), avg(current) FROM power.meters PARTITION BY tbname INTERVAL(10s) SLIDING(5s)",
    "PAUSE STREAM power.l1",
    # Apache IoTDB
    "INSERT INTO root.ln.wf01.wt01(time, temperature) VALUES (3000, 22.5)",
    "SELECT max_value(temperature), count(status) FROM root.ln.** GROUP BY ([0, 10000), 2s) ALIGN BY DEVICE",
    "CREATE TIMESERIES root.ln.wf01.wt02.hardware WITH DATATYPE=TEXT, ENCODING=PLAIN",
    "CREATE CQ cq1 RESAMPLE EVERY 10s BEGIN SELECT max_value(temperature) INTO root.ln.wf01.wt01(t_max) "
    "FROM root.ln.wf01.wt01 GROUP BY(10s) END",
    "DELETE FROM root.ln.wf01.wt01.temperature WHERE time <= 1500",
]

TOKEN = re.compile(r"'(?:[^']|'')*'|`[^`]*`|\"[^\"]*\"|%%\w+|\*\*|\w+|\S")
VOCABULARY = [
    "SELECT", "FROM", "INTO", "AS", "WHERE", "INTERVAL", "SLIDING", "PARTITION", "BY", "TAGS", "USING", "VALUES",
    "STREAM", "CREATE", "DROP", "DELETE", "TRIGGER", "CQ", "BEGIN", "END", "ON", "NOTIFY", "PERIOD", "COUNT_WINDOW",
    "FILL", "NULL", "GROUP", "ALIGN", "EVERY", "(", ")", ",", ";", ".", "*", "**", "'", "`", "|", "-", "0", "-1",
    "1e309", "99999999999999999999", "2147483648", "'x'", "'${system:user.name}'", "`${system:user.name}`",
    "'../../x'", "`..`", "`a/b`", "''", "``", "'\x00'", "10s", "0s", "999999999999999999999d", "now", "%%trows",
    "%%tbname", "_twstart", "tbname", "root.**", "'ws://h:1/'", "csv.`/etc/passwd`", "delta.`/tmp`", "x" * 300,
]

#: values put in place of a literal or a quoted name
VALUES = ["''", "'${system:user.name}'", "`${system:user.name}`", "'../../x'", "`..`", "`a/b`", "``", "`.`",
          "'\x00'", "`a\x00b`", "'2018-13-45 99:99:99'", "99999999999999999999", "-9223372036854775809",
          "1e309", "0", "-1", "'nan'", "'" + "y" * 70000 + "'", "`" + "z" * 300 + "`", "'\\'", "'it''s'",
          "`tbname`", "`%%trows`", "'ws://user:pw@h:1/'", "'csv.`/etc/passwd`'"]


@st.composite
def mutated(draw) -> str:
    text = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(1, 2))):
        spans = [m.span() for m in TOKEN.finditer(text)]
        i = draw(st.integers(0, len(spans) - 1))
        start, end = spans[i]
        action = draw(st.sampled_from(["delete", "duplicate", "swap", "replace", "insert"] + ["value"] * 5))
        word = draw(st.sampled_from(VOCABULARY))
        literals = [span for span in spans if text[span[0]] in "'`" or text[span[0]].isdigit()]
        if action == "value" and literals:  # the statement keeps its shape: reaches execution more often
            start, end = draw(st.sampled_from(literals))
            kind = "'" if text[start] == "'" else "`" if text[start] == "`" else "0"
            text = text[:start] + draw(st.sampled_from([v for v in VALUES if v[0] == kind or
                                                        (kind == "0" and v[0] in "-0123456789")])) + text[end:]
        elif action == "delete":
            text = text[:start] + text[end:]
        elif action == "duplicate":
            text = text[:end] + " " + text[start:end] + text[end:]
        elif action == "swap" and i + 1 < len(spans):
            (s2, e2) = spans[i + 1]
            text = text[:start] + text[s2:e2] + text[end:s2] + text[start:end] + text[e2:]
        elif action == "replace":
            text = text[:start] + word + text[end:]
        else:
            text = text[:start] + word + " " + text[start:]
    return text


def snapshot(home: Path) -> dict[str, tuple[int, int]]:
    """Every file of the home with its size and modification time, Spark's scratch space aside."""
    out = {}
    for path in home.rglob("*"):
        rel = path.relative_to(home)
        if rel.parts[0] == "spark" or not path.is_file():
            continue
        stat = path.stat()
        out[str(rel)] = (stat.st_size, stat.st_mtime_ns)
    return out


def cli(*argv: str) -> tuple[int, str]:
    """Run the CLI in this process; its exit status and what it printed. An exception escapes."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(argv))
    return status, out.getvalue() + err.getvalue()


def clean(output: str) -> None:
    assert "Traceback" not in output and "\tat org." not in output and "py4j" not in output.lower(), output


@pytest.fixture(scope="module")
def home(tmp_path_factory, spark):
    path = tmp_path_factory.mktemp("hostile") / "home"
    before = os.environ.get("AIRFLOW_STREAM_HOME")
    os.environ["AIRFLOW_STREAM_HOME"] = str(path)
    try:
        status, output = cli("sql", SCHEMA)
        assert status == 0, output
        yield path
    finally:
        if before is None:
            os.environ.pop("AIRFLOW_STREAM_HOME", None)
        else:
            os.environ["AIRFLOW_STREAM_HOME"] = before


def test_every_seed_is_a_valid_statement(home):
    for text in SEEDS:
        status, output = cli("sql", text)
        assert status == 0, (text, output)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(text=mutated())
def test_mutated_statements_are_refused_with_a_position_and_write_nothing(home, text):
    before = snapshot(home)
    status, output = cli("sql", text)
    event(f"exit {status}" + (", refused while running" if status == 2 and "statement 1" in output else ""))
    clean(output)
    assert status in (0, 2), (text, status, output)
    if status == 2:
        assert output.startswith("error:") or "\nerror:" in output, output
        assert re.search(r"line \d+, col \d+", output) or "no statement found" in output, output
        assert snapshot(home) == before, (text, output)


CSV = ("tbname,ts,current,voltage,phase,location,groupid\n"
       "d2001,2018-10-03 14:38:05.000,10.3,219,0.31,California.SanJose,4\n"
       "d2001,2018-10-03 14:38:15.000,12.6,218,0.33,California.SanJose,4\n"
       "d2002,1538548696650,10.3,218,0.25,California.Fresno,5\n")


def parquet_bytes(tmp: Path) -> bytes:
    table = pa.table({"tbname": ["d3001", "d3001"], "ts": pa.array([1538548685000, 1538548695000], pa.int64()),
                      "current": [1.5, 2.5], "voltage": pa.array([220, 221], pa.int32()), "phase": [0.1, 0.2],
                      "location": ["Texas.Austin", "Texas.Austin"], "groupid": pa.array([7, 7], pa.int32())})
    pq.write_table(table, tmp)
    return tmp.read_bytes()


CELLS = ["", "abc", "1e309", "-2147483649", "2147483648", "2018-13-45 00:00:00", "99999999999999999999",
         "${system:user.name}", "../../evil", "a/b", "..", '"', "'", "NULL", "nan", "\x00", "tbname", "x" * 300,
         "-9223372036854775809", "1538548685000000000000"]


@st.composite
def damaged_cells(draw) -> bytes:
    """The CSV with a few cells replaced: the file stays a CSV, so the values are what is checked."""
    rows = [line.split(",") for line in CSV.strip().split("\n")]
    for _ in range(draw(st.integers(1, 3))):
        r = draw(st.integers(0, len(rows) - 1))
        c = draw(st.integers(0, len(rows[r]) - 1))
        rows[r][c] = draw(st.sampled_from(CELLS))
    return ("\n".join(",".join(row) for row in rows) + "\n").encode()


@st.composite
def parquet_variant(draw, folder: Path) -> bytes:
    """The Parquet file with columns dropped, retyped, emptied or added."""
    columns = {"tbname": pa.array(["d3001", "d3002"]), "ts": pa.array([1538548685000, 1538548695000], pa.int64()),
               "current": pa.array([1.5, 2.5]), "voltage": pa.array([220, 221], pa.int32()),
               "phase": pa.array([0.1, 0.2]), "location": pa.array(["Texas.Austin", "Texas.Dallas"]),
               "groupid": pa.array([7, 8], pa.int32())}
    for name in list(columns):
        change = draw(st.sampled_from(["keep", "keep", "drop", "string", "null", "huge"]))
        if change == "drop":
            del columns[name]
        elif change == "string":
            columns[name] = pa.array([draw(st.sampled_from(CELLS)), "1"])
        elif change == "null":
            columns[name] = pa.nulls(2, columns[name].type)
        elif change == "huge":
            columns[name] = pa.array([2**63 - 1, -(2**63)], pa.int64())
    if draw(st.booleans()):
        columns["extra"] = pa.array([1, 2])
    if not columns:
        columns["tbname"] = pa.array(["d3001", "d3001"])
    path = folder / "variant.parquet"
    pq.write_table(pa.table(columns), path)
    return path.read_bytes()


@st.composite
def damaged(draw, original: bytes) -> bytes:
    data = bytearray(original)
    for _ in range(draw(st.integers(1, 3))):
        action = draw(st.sampled_from(["truncate", "flip", "insert", "delete_line", "duplicate_line", "garbage"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        if action == "truncate":
            data = data[:at]
        elif action == "flip" and data:
            data[at] ^= draw(st.integers(1, 255))
        elif action == "insert":
            data[at:at] = draw(st.sampled_from([b",", b"\n", b'"', b"\xff\xfe", b"99999999999999999999", b"-",
                                                b"${system:user.name}", b"../../evil", b"\x00", b"nan", b"tbname"]))
        elif action in ("delete_line", "duplicate_line"):
            lines = bytes(data).split(b"\n")
            i = draw(st.integers(0, len(lines) - 1))
            lines[i:i + 1] = [] if action == "delete_line" else [lines[i], lines[i]]
            data = bytearray(b"\n".join(lines))
        else:
            data += draw(st.binary(min_size=1, max_size=40))
    return bytes(data)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_damaged_files_are_refused_clearly_and_load_nothing(home, tmp_path_factory, data):
    folder = tmp_path_factory.mktemp("files")
    how = data.draw(st.sampled_from(["csv bytes", "csv cells", "parquet bytes", "parquet columns"]))
    kind = how.split()[0]
    path = folder / f"meters.{kind}"
    if how == "csv cells":
        content = data.draw(damaged_cells())
    elif how == "parquet columns":
        content = data.draw(parquet_variant(folder))
    else:
        content = data.draw(damaged(CSV.encode() if kind == "csv" else parquet_bytes(folder / "seed.parquet")))
    path.write_bytes(content)
    before = snapshot(home)
    status, output = cli("load", str(path), "INTO", "power.meters")
    event(f"{how}: exit {status}")
    clean(output)
    assert status in (0, 2), (status, output)
    if status == 2:
        assert output.startswith("error:") or "\nerror:" in output, output
        assert snapshot(home) == before, output
