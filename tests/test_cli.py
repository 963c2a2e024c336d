"""`airflow-stream check` through the installed console script."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(sys.executable).with_name("airflow-stream")


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), *args], input=stdin, capture_output=True, text=True, timeout=60,
                          env=os.environ.copy())


def test_check_prints_one_ok_line_per_statement(tmp_path):
    path = tmp_path / "streams.sql"
    path.write_text(
        "CREATE DATABASE power;\n"
        "CREATE STABLE power.meters (ts TIMESTAMP, current FLOAT) TAGS (location VARCHAR(24));\n"
        "CREATE STREAM power.avg_current INTERVAL(1m) SLIDING(1m) FROM power.meters PARTITION BY tbname\n"
        "  INTO power.avg_out AS SELECT _twstart, avg(current) FROM %%tbname;\n"
        "SHOW power.STREAMS;\n"
    )
    result = run("check", "-f", str(path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "ok: CREATE DATABASE power",
        "ok: CREATE STABLE power.meters",
        "ok: CREATE STREAM power.avg_current",
        "ok: SHOW STREAMS power",
    ]


def test_check_reports_position_with_the_line_and_a_caret():
    statement = ("CREATE STREAM s INTERVAL(1m) SLIDING(1m) FROM t\nSTREAM_OPTIONS(MAX_DELAY(1s))\n"
                 "NOTIFY('ws://h:1') ON (WINDOW_CLOSE)")
    result = run("check", statement)
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert lines[0] == "error: line 2, col 16: MAX_DELAY(1s) is below the minimum of 3s"
    assert lines[1] == "  STREAM_OPTIONS(MAX_DELAY(1s))"
    assert lines[2] == "  " + " " * 15 + "^"


def test_an_echoed_statement_shows_control_characters_and_keeps_the_caret_in_its_column():
    # an escape sequence that would colour the terminal red, a tab and a right-to-left override
    statement = "CREATE STREAM s\tINTERVAL(1m) \x1b[31m\u202e SLIDING(1m) FROM t\nSTREAM_OPTIONS(MAX_DELAY(1s))"
    result = run("check", statement)
    assert result.returncode == 2
    assert "\x1b" not in result.stderr and "\u202e" not in result.stderr and "\t" not in result.stderr
    statement = "CREATE STREAM s INTERVAL(1m) SLIDING(1m) FROM t STREAM_OPTIONS(\tMAX_DELAY(1s)) -- \x1b[2J"
    lines = run("check", statement).stderr.splitlines()
    # MAX_DELAY starts at character 65: 64 characters before it, the tab counted as one
    assert lines[0].startswith("error: line 1, col 65: MAX_DELAY(1s)")
    assert lines[1] == "  CREATE STREAM s INTERVAL(1m) SLIDING(1m) FROM t STREAM_OPTIONS( MAX_DELAY(1s)) -- \u241b[2J"
    assert lines[2] == "  " + " " * 64 + "^"
    assert lines[1][2 + 64:].startswith("MAX_DELAY")


def test_check_reads_standard_input_and_rejects_empty_input():
    assert run("check", stdin="DROP STREAM IF EXISTS s;").stdout == "ok: DROP STREAM s\n"
    empty = run("check", stdin="  ;  ")
    assert empty.returncode == 2 and "no statement" in empty.stderr


@pytest.mark.parametrize("flag", [["-f", "/nonexistent/file.sql"]])
def test_check_missing_file_fails(flag):
    result = run("check", *flag)
    assert result.returncode != 0


def test_readme_example_file_checks():
    example = Path(__file__).resolve().parent.parent / "examples" / "tdengine" / "power.sql"
    result = run("check", "-f", str(example))
    assert result.returncode == 0, result.stderr
    assert sum(line.startswith("ok: CREATE STREAM") for line in result.stdout.splitlines()) == 5


@pytest.mark.parametrize(("content", "words"), [
    (None, "cannot be read: No such file or directory"),
    (b"CREATE DATABASE d; SELECT '\xff\xfe';", "is not UTF-8 text (byte 27: invalid start byte)"),
])
def test_a_file_that_cannot_be_read_is_a_clear_error(tmp_path, content, words):
    path = tmp_path / "statements.sql"
    if content is not None:
        path.write_bytes(content)
    for command in ("check", "sql"):
        result = run(command, "-f", str(path))
        assert result.returncode == 2, result.stderr
        assert result.stderr == f"error: {path} {words}\n  nothing was executed\n"


@pytest.mark.parametrize(("query", "words"), [
    ("SELECT * FROM csv.`/etc/passwd`", "csv.`/etc/passwd`: queries read tables by name"),
    ("SELECT * FROM parquet.`/etc`", "files are not read through other data sources"),
    ("SELECT * FROM delta.`/tmp`", "a Delta path must lie inside the warehouse"),
])
def test_check_refuses_the_path_tables_sql_refuses(tmp_path, query, words):
    """Security review S10: ``check`` applies the rule ``sql`` applies (tests/warehouse/test_path_tables.py)."""
    env = os.environ | {"AIRFLOW_STREAM_HOME": str(tmp_path)}
    for command in ("check", "sql"):
        result = subprocess.run([str(SCRIPT), command, query], capture_output=True, text=True, timeout=120, env=env)
        assert result.returncode == 2, (command, result.stdout, result.stderr)
        assert words in result.stderr, (command, result.stderr)
        assert "ok:" not in result.stdout


@pytest.mark.parametrize(("query", "words"), [
    ("DELETE FROM power.meters WHERE v IN (SELECT 1 FROM text.`/etc/hostname`)", "files are not read"),
    ("CREATE STREAM power.s INTERVAL(10s) SLIDING(10s) FROM power.meters INTO power.s_out AS "
     "SELECT _twstart, count(*) AS n FROM parquet.`/etc`", "files are not read"),
])
def test_check_refuses_path_tables_in_a_delete_or_a_stream(tmp_path, query, words):
    """The DELETE and CREATE STREAM of tests/warehouse/test_path_tables.py, without their tables."""
    result = subprocess.run([str(SCRIPT), "check", query], capture_output=True, text=True, timeout=60,
                            env=os.environ | {"AIRFLOW_STREAM_HOME": str(tmp_path)})
    assert result.returncode == 2, result.stdout
    assert words in result.stderr and result.stdout == ""


def test_check_lets_a_delta_table_of_the_warehouse_through(tmp_path):
    env = os.environ | {"AIRFLOW_STREAM_HOME": str(tmp_path)}
    query = f"SELECT * FROM delta.`{tmp_path / 'warehouse' / 'power' / 'meters'}`"
    result = subprocess.run([str(SCRIPT), "check", query], capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "ok: SELECT\n"


def test_check_of_rollup_by_is_plainly_ok():
    result = run("check", "CREATE STREAM power.r INTERVAL(1h) SLIDING(1h) FROM power.meters ROLLUP BY location "
                          "INTO power.r_out AS SELECT _twstart, avg(current), _trollup_tbcount FROM %%trows")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["ok: CREATE STREAM power.r"]
