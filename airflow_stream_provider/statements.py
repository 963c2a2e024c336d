"""Runs any parsed statement: table statements on the warehouse, queries with their window
clauses, and stream statements on :mod:`airflow_stream_provider.streams`.

This is the one dispatch table of the project; the CLI, the Airflow operators and the Streams page
all execute SQL through :func:`run` or :func:`execute`. It also supplies the system tables of
``information_schema`` to queries.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.spark import endpoint
from airflow_stream_provider.sql import parse
from airflow_stream_provider.streams import cq, insert_triggers, lifecycle, recalculations, status, verify
from airflow_stream_provider.warehouse import Result, SystemView, Warehouse, WarehouseError, listeners, listing, tables
from airflow_stream_provider.warehouse.series import attached
from airflow_stream_provider.warehouse.series import statements as series
from airflow_stream_provider.windows import select as window_select
from airflow_stream_provider.windows.changes import ChangeFeed

if TYPE_CHECKING:
    from airflow_stream_provider.warehouse.series.store import SeriesDatabase

#: the tables of ``information_schema``
SYSTEM_VIEWS: Mapping[str, SystemView] = {
    "ins_streams": status.ins_streams,
    "ins_stream_tasks": status.ins_stream_tasks,
    "ins_stream_recalculates": lambda _warehouse: recalculations.recalculates_table(),
    "ins_stables": listing.ins_stables,
    "ins_tables": listing.ins_tables,
}


def _create_stream(warehouse: Warehouse, stmt: m.CreateStream) -> Result:
    """CREATE STREAM, or CREATE CQ (a stream whose computation is an IoTDB query)."""
    return cq.create(warehouse, stmt) if stmt.series is not None else lifecycle.create(warehouse, stmt)


def _select(warehouse: Warehouse, stmt: m.Select) -> Result:
    warehouse.check_path_tables(stmt.query.tree)  # before a Spark session is opened
    table = window_select.table(warehouse, stmt.query, views=SYSTEM_VIEWS)
    return Result(stmt, f"{table.num_rows} row{'s' if table.num_rows != 1 else ''}", table=table)


def _create_trigger(warehouse: Warehouse, stmt: m.CreateInsertTrigger) -> Result:
    """CREATE TRIGGER. Over attached devices an AFTER INSERT trigger fires in the stream node, on
    each commit of the table's owner after this one (:mod:`airflow_stream_provider.node.attached_triggers`);
    a BEFORE INSERT trigger is refused: the owner's writes cannot be refused."""
    reached = [db for db in series.store_of(warehouse).databases()
               if db.attached and attached.reaches(stmt.pattern, db)]
    if reached and stmt.event is m.TriggerEvent.BEFORE_INSERT:
        db = reached[0]
        line, column = _keyword_position(stmt, r"\bBEFORE\s+INSERT\b")
        raise StreamDefinitionError(
            f"CREATE TRIGGER {stmt.name}: a BEFORE INSERT trigger cannot be put on {stmt.pattern}, which reaches "
            f"{db.path}, attached from the Delta table at {db.table}: its owner writes it, and a write the project "
            "does not make cannot be refused", line=line, column=column, clause="BEFORE INSERT",
            hint="use AFTER INSERT, which fires on each of the owner's commits, or put the trigger on a pattern of "
                 "the project's own databases")
    since = tuple((str(db.path), str(db.table), _version_now(db)) for db in reached)
    message = insert_triggers.create(stmt, since)
    notices = []
    if reached and endpoint.running() is None:
        notices.append(f"trigger {stmt.name} fires on the commits to {', '.join(str(db.path) for db in reached)} in "
                       "the stream node, which is not running: start it with `airflow-stream node start`; the rows "
                       "committed until then fire when it does")
    return Result(stmt, message, notices=tuple(notices))


def _version_now(db: SeriesDatabase) -> int:
    version = ChangeFeed(db.table).latest()
    if version is None:
        raise WarehouseError(f"{db.path} is attached from the Delta table at {db.table}, which cannot be read now",
                             hint="see that the table is there, or DELETE DATABASE " + str(db.path))
    return version


def _keyword_position(stmt: m.Statement, pattern: str) -> tuple[int | None, int | None]:
    """Line and column of the first match of ``pattern`` in the statement's text."""
    found = re.search(pattern, stmt.text, re.IGNORECASE)
    if found is None:
        return stmt.position.line, stmt.position.column
    before = stmt.text[:found.start()]
    if "\n" in before:
        return stmt.position.line + before.count("\n"), found.start() - before.rfind("\n")
    return stmt.position.line, stmt.position.column + found.start()


def _drop_trigger(warehouse: Warehouse, stmt: m.DropInsertTrigger) -> Result:
    message, notices = insert_triggers.drop(stmt)
    return Result(stmt, message, notices=tuple(notices))


def _show_triggers(warehouse: Warehouse, stmt: m.ShowInsertTriggers) -> Result:
    table = insert_triggers.show()
    return Result(stmt, f"{table.num_rows} trigger{'s' if table.num_rows != 1 else ''}", table=table)


#: the statements the warehouse runs, by type: TDengine's tables and IoTDB's series
TABLE_STATEMENTS: dict[type, Callable[[Warehouse, Any], Result]] = {
    m.CreateSeriesDatabase: series.create_database,
    m.DropSeriesDatabases: series.drop_databases,
    m.AttachDevices: series.attach_devices,
    m.ShowSeriesDatabases: series.show_databases,
    m.CreateTimeseries: series.create_timeseries,
    m.DropTimeseries: series.drop_timeseries,
    m.ShowTimeseries: series.show_timeseries,
    m.ShowDevices: series.show_devices,
    m.InsertPoints: series.insert,
    m.DeletePoints: series.delete,
    m.QuerySeries: series.select,
    m.CreateDatabase: tables.create_database,
    m.AlterDatabase: tables.alter_database,
    m.SetTtl: series.set_ttl,
    m.UseDatabase: tables.use_database,
    m.DropDatabase: tables.drop_database,
    m.CreateSuperTable: tables.create_table,
    m.CreateTable: tables.create_table,
    m.AttachTable: tables.attach_table,
    m.ShowTables: listing.show_tables,
    m.Describe: listing.describe,
    m.CreateSubTable: tables.create_subtable,
    m.DropTable: tables.drop_table,
    m.Insert: tables.insert,
    m.Delete: tables.delete,
}

#: every statement type the project runs, and what runs it
HANDLERS: dict[type, Callable[[Warehouse, Any], Result]] = {
    **TABLE_STATEMENTS,
    m.Select: _select,
    m.CreateStream: _create_stream,
    m.DropContinuousQuery: cq.drop,
    m.ShowContinuousQueries: cq.show,
    m.CreateInsertTrigger: _create_trigger,
    m.DropInsertTrigger: _drop_trigger,
    m.ShowInsertTriggers: _show_triggers,
    m.DropStream: lifecycle.drop,
    m.StopStream: lifecycle.stop,
    m.StartStream: lifecycle.start,
    m.RecalculateStream: lifecycle.recalculate_statement,
    m.VerifyStream: verify.verify_statement,
    m.ShowStreams: status.show_streams,
    m.ShowCreateStream: status.show_create_stream,
}


def execute(warehouse: Warehouse, statement: m.Statement) -> Result:
    """Run one parsed statement."""
    handler = HANDLERS.get(type(statement))
    if handler is None:
        raise WarehouseError(
            f"{statement.kind} is not run by `airflow-stream sql` yet; it runs table statements, queries "
            "and CREATE/DROP/START/STOP/RECALCULATE/VERIFY STREAM and SHOW STREAMS (CREATE DATABASE/STABLE/TABLE, "
            "INSERT, DELETE, DROP, SELECT, USE)")
    listeners.take_notices()  # what an earlier, failed statement left
    result = handler(warehouse, statement)
    notices = listeners.take_notices()
    return dataclasses.replace(result, notices=result.notices + tuple(notices)) if notices else result


def run(warehouse: Warehouse, text: str) -> Iterator[Result]:
    """Parse all of ``text``, then execute its statements in order, yielding each result."""
    for statement in parse(text):
        yield execute(warehouse, statement)
