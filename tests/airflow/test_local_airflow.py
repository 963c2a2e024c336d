"""The local Airflow's metadata database: a writer must not fail while other processes read."""

import sqlite3

import pytest

from airflow_stream_provider.local_airflow import write_ahead_log


def _commit_while_another_reads(database) -> None:
    reader = sqlite3.connect(database, timeout=0.2, isolation_level=None)
    writer = sqlite3.connect(database, timeout=0.2)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM dag_run").fetchone()  # an open read, as the scheduler's
        writer.execute("INSERT INTO dag_run VALUES (2)")
        writer.commit()
        reader.execute("COMMIT")
    finally:
        reader.close()
        writer.close()


def _database(tmp_path):
    database = tmp_path / "airflow.db"
    with sqlite3.connect(database) as connection:
        connection.execute("CREATE TABLE dag_run (id INTEGER)")
        connection.execute("INSERT INTO dag_run VALUES (1)")
    connection.close()
    return database


def test_a_writer_commits_while_another_process_reads(tmp_path):
    database = _database(tmp_path)
    write_ahead_log(database)
    _commit_while_another_reads(database)
    with sqlite3.connect(database) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert connection.execute("SELECT count(*) FROM dag_run").fetchone()[0] == 2
    connection.close()


def test_without_the_log_the_same_writer_is_locked_out(tmp_path):
    # the failure write_ahead_log removes, in SQLite's default rollback journal
    with pytest.raises(sqlite3.OperationalError, match="database is locked"):
        _commit_while_another_reads(_database(tmp_path))
