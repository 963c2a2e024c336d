"""User trigger code that hangs, exits or is interrupted: every call has a deadline, a fire that
timed out is not waited for again in the same write, and SystemExit or KeyboardInterrupt is a
failure of the trigger, never the end of the writer."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from airflow_stream_provider.exceptions import StreamError
from tests.conftest import sql
from tests.iotdb.test_triggers import FILES, cli, create, points

pytestmark = pytest.mark.spark

HOSTILE = FILES / "hostile.py"


@pytest.fixture
def db(wh, monkeypatch):
    monkeypatch.setenv("AIRFLOW_STREAM_TRIGGER_SETUP_TIMEOUT", "2")
    sql(wh, "CREATE DATABASE root.t")
    return wh


def test_a_hanging_import_or_on_create_fails_the_create_by_its_deadline(db, tmp_path):
    slow = tmp_path / "slow_import.py"
    slow.write_text("import time\ntime.sleep(60)\n\nfrom airflow_stream_provider import InsertTrigger\n\n\n"
                    "class T(InsertTrigger):\n    pass\n")
    home = Path(os.environ["AIRFLOW_STREAM_HOME"])
    (home / "hangs.hang").touch()
    for cls, uri, step in (("slow_import.T", slow, "the import of slow_import"),
                           ("hostile.HangingCreate", HOSTILE, "on_create")):
        began = time.monotonic()
        with pytest.raises(StreamError, match=f"{step} did not return within 2 s "
                                              r"\(AIRFLOW_STREAM_TRIGGER_SETUP_TIMEOUT\)"):
            create(db, "hangs", cls, "root.t.**", uri=uri)
        assert time.monotonic() - began < 10
    (shown,) = sql(db, "SHOW TRIGGERS")
    assert shown.table.num_rows == 0


def test_an_on_create_that_hangs_in_a_later_writer_fails_its_write_by_the_deadline(db):
    create(db, "hangs", "hostile.HangingCreate", "root.t.**", uri=HOSTILE)
    (Path(os.environ["AIRFLOW_STREAM_HOME"]) / "hangs.hang").touch()
    began = time.monotonic()
    done = cli("sql", "INSERT INTO root.t.d1(time, s1) VALUES (1, 1), (2, 2)",
               env={"AIRFLOW_STREAM_TRIGGER_SETUP_TIMEOUT": "2"})
    assert time.monotonic() - began < 60
    assert done.returncode == 3, done.stderr
    assert "trigger hangs failed on root.t.d1: no instance: trigger hangs: on_create did not return within 2 s" \
        in done.stderr
    assert [v for _, v in points(db, "SELECT s1 FROM root.t.d1")] == [1, 2]


def test_a_fire_that_timed_out_fails_the_rest_of_its_write_at_once(db, monkeypatch):
    monkeypatch.setenv("AIRFLOW_STREAM_TRIGGER_TIMEOUT", "1")
    create(db, "slow", "hostile.HangingFire", "root.t.**", uri=HOSTILE)
    began = time.monotonic()
    (result,) = sql(db, "INSERT INTO root.t.d1(time, s1) VALUES (1, 1), (2, 2), (3, 3), (4, 4)")
    assert time.monotonic() - began < 3  # one timeout, not four
    assert result.notices == (
        "trigger slow failed on root.t.d1: fire did not return within 1 s (AIRFLOW_STREAM_TRIGGER_TIMEOUT) "
        "(the data is written)",
        *["trigger slow failed on root.t.d1: not fired: its fire timed out earlier in this write "
          "(the data is written)"] * 3)
    assert [v for _, v in points(db, "SELECT s1 FROM root.t.d1")] == [1, 2, 3, 4]
    (shown,) = sql(db, "SHOW TRIGGERS")
    assert shown.table.select(["Fired", "Failed"]).to_pylist() == [{"Fired": 4, "Failed": 4}]


@pytest.mark.parametrize(("cls", "raised"), [("hostile.InterruptedFire", "KeyboardInterrupt"),
                                              ("hostile.ExitingFire", "SystemExit: 0")])
def test_keyboard_interrupt_or_system_exit_in_fire_is_a_failure_not_a_hang(db, cls, raised):
    create(db, "rude", cls, "root.t.**", uri=HOSTILE)
    began = time.monotonic()
    (result,) = sql(db, "INSERT INTO root.t.d1(time, s1) VALUES (1, 1)")
    assert time.monotonic() - began < 10  # AIRFLOW_STREAM_TRIGGER_TIMEOUT is 30 s
    assert result.notices == (f"trigger rude failed on root.t.d1: fire raised {raised} (the data is written)",)


def test_system_exit_in_validate_is_a_clear_error_and_the_cli_says_so(db):
    home = os.environ["AIRFLOW_STREAM_HOME"]
    done = cli("sql", f"CREATE TRIGGER bye AFTER INSERT ON root.t.** AS 'hostile.ExitingValidate' USING URI "
                      f"'{HOSTILE}' WITH (\"dir\" = \"{home}\", \"name\" = \"bye\"); SHOW TRIGGERS")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "trigger bye: validate failed (SystemExit: 0)" in done.stderr
    (shown,) = sql(db, "SHOW TRIGGERS")
    assert shown.table.num_rows == 0
