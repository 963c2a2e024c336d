"""Bad names through the installed ``airflow-stream`` command: exit 2 with the name's line and
column, nothing written. No JVM: the parser
refuses the statement before anything runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(sys.executable).with_name("airflow-stream")


def run(*args: str, home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "AIRFLOW_STREAM_HOME": str(home)}
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=120, env=env)


STREAM = "CREATE STREAM {} INTERVAL(10s) SLIDING(10s) FROM meters NOTIFY('ws://127.0.0.1:9/') ON (WINDOW_CLOSE)"


@pytest.mark.parametrize(("name", "words"), [
    ("`../../../victim`", "stream name '../../../victim' contains '/'"),
    ("``", "stream name '' is empty"),
    ("`..`", "stream name '..' starts with '.'"),
    ("`a\x00b`", "stream name 'a\\x00b' contains '\\x00'"),
    ("`a\x01b`", "stream name 'a\\x01b' contains '\\x01'"),
    ("s" * 300, "stream name '" + "s" * 60 + "'... is 300 bytes long; a stream name has at most 192"),
])
@pytest.mark.parametrize("command", ["check", "sql"])
def test_a_bad_stream_name_exits_2_at_its_position(tmp_path, command, name, words):
    home = tmp_path / "home"
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("precious")
    script = tmp_path / "in.sql"
    script.write_text("CREATE DATABASE power;\n" + STREAM.format("power." + name) + ";\n", encoding="utf-8")
    result = run(command, "-f", str(script), home=home)
    assert result.returncode == 2, result.stderr
    assert "line 2, col 21: CREATE STREAM: " + words in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert (victim / "keep.txt").read_text() == "precious"
    assert not home.exists() or not any(home.rglob("*.sql"))  # nothing was executed


@pytest.mark.parametrize(("text", "where"), [
    ("CREATE DATABASE `" + "d" * 300 + "`", "line 1, col 17: CREATE DATABASE: database name"),
    ("CREATE STABLE p.st (ts TIMESTAMP, v INT) TAGS (tbname INT)", "line 1, col 48: TAGS: tag name 'tbname'"),
    ("DROP DATABASE `../../homec/warehouse/power`", "line 1, col 15: DROP DATABASE: database name"),
    ("INSERT INTO p.`../x` VALUES ('2025-01-01 00:00:00', 1)", "line 1, col 15: INSERT: table name '../x'"),
])
def test_other_bad_names_exit_2_at_their_position(tmp_path, text, where):
    result = run("sql", text, home=tmp_path)
    assert result.returncode == 2 and where in result.stderr, result.stderr
