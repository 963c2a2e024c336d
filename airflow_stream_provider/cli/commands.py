"""The ``airflow-stream`` command."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from airflow_stream_provider import model as m
from airflow_stream_provider.cli.inputs import format_error, quote_source, read_input
from airflow_stream_provider.exceptions import StreamDefinitionError, StreamError
from airflow_stream_provider.hooks import bind
from airflow_stream_provider.model.names import CQ_NAMESPACE
from airflow_stream_provider.node import server as node
from airflow_stream_provider.notify import receiver
from airflow_stream_provider.progress import Console
from airflow_stream_provider.spark.session import DeltaJarsMissing, delta_round_trip
from airflow_stream_provider.sql import parse
from airflow_stream_provider.sql.tdengine.versions import report_3_4
from airflow_stream_provider.sql.tdengine_legacy.migrate import to_3_3_7

#: the data is written, but an insert trigger failed on it (reference 004's "the insertion itself is completed")
EXIT_TRIGGER_FAILED = 3


def cmd_check(args: argparse.Namespace) -> int:
    text, source = read_input(args)
    try:
        statements = parse(text)
    except StreamDefinitionError as err:
        print(format_error(err, text, source), file=sys.stderr)
        return 2
    if not statements:
        print("error: no statement found", file=sys.stderr)
        return 2
    if args.to == "3.4":
        return _print_version_changes(statements)
    if args.to:
        return _print_migrations(statements)
    failed = _refused_path_tables(statements, text, source)
    if failed:
        print(failed, file=sys.stderr)
        return 2
    for stmt in statements:
        note = ""
        print(f"ok: {stmt.kind} {stmt.subject}{note}".rstrip())
    return 0


def _refused_path_tables(statements: list[m.Statement], text: str, source: str) -> str | None:
    """The error ``sql`` would give for the first path table it refuses (files, Delta tables
    outside this home's warehouse), checked without running anything."""
    from airflow_stream_provider import config
    from airflow_stream_provider.storage import StorageError, named_store
    from airflow_stream_provider.warehouse import resolve

    for index, stmt in enumerate(statements, start=1):
        try:
            for tree in resolve.query_trees(stmt):
                resolve.check_path_tables(named_store(config.warehouse()), tree)
        except (StreamError, StorageError) as err:
            return _statement_error(index, stmt, err, text, source)
    return None


def _print_migrations(statements: list[m.Statement]) -> int:
    """``check --to 3.3.7``: each statement in TDengine 3.3.7's syntax, and what it cannot reproduce."""
    for stmt in statements:
        found = to_3_3_7(stmt)
        legacy = isinstance(stmt, m.CreateStream) and stmt.legacy is not None
        if legacy:
            state = "exact" if found.exact else "nearest" if found.statement else "no"
            print(f"-- {stmt.subject}: {state} TDengine 3.3.7 form")
        if found.statement is not None:
            print(found.statement.rstrip(";") + ";")
        if found.differences:
            print(f"-- what {stmt.subject} does that {'it' if found.statement else '3.3.7'} does not:")
            for difference in found.differences:
                print(f"--   * {difference}")
    return 0


def _print_version_changes(statements: list[m.Statement]) -> int:
    """``check --to 3.4``: what each 3.3.7 statement would do differently under TDengine 3.4."""
    print("\n".join(line for stmt in statements for line in report_3_4(stmt)))
    return 0


def cmd_selfcheck(args: argparse.Namespace) -> int:
    try:
        rows = delta_round_trip()
    except DeltaJarsMissing as err:
        print(f"selfcheck failed: {err}", file=sys.stderr)
        return 1
    except Exception as err:  # the whole point is to say loudly what failed
        print(f"selfcheck failed: Delta round trip on local Spark: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    print(f"ok: Delta table created, merged and read back on local Spark ({rows} rows, change feed on)")
    return 0


def _statement_error(index: int, stmt: m.Statement, err: Exception, text: str, source: str) -> str:
    """``error: statement N (KIND subject) at line L, col C: message`` and the statement's first line."""
    where = f"line {stmt.position.line}, col {stmt.position.column}"
    if isinstance(err, StreamDefinitionError) and err.line is not None:
        where = f"line {err.line}, col {err.column}"
    message = err.message if isinstance(err, StreamDefinitionError) and err.line is not None else str(err)
    if isinstance(err, StreamDefinitionError) and err.line is not None and err.hint:
        message += f" ({err.hint})"
    first_line = str(message).strip().splitlines()[0] if str(message).strip() else type(err).__name__
    label = f"{stmt.kind} {stmt.subject}".rstrip()
    return quote_source([f"error: statement {index} ({label}) at {where}: {first_line}"], text,
                         stmt.position.line, source)


def cmd_sql(args: argparse.Namespace) -> int:
    from airflow_stream_provider import statements as run_statements
    from airflow_stream_provider.cli.render import render
    from airflow_stream_provider.warehouse import Warehouse

    text, source = read_input(args)
    try:
        statements = parse(text)
    except StreamDefinitionError as err:
        print(format_error(err, text, source) + "\n  nothing was executed", file=sys.stderr)
        return 2
    if not statements:
        print("error: no statement found", file=sys.stderr)
        return 2
    warehouse = Warehouse(database=args.database)
    notes = sys.stdout if args.format == "table" else sys.stderr
    status = 0
    for index, stmt in enumerate(statements, start=1):
        try:
            result = run_statements.execute(warehouse, stmt)
        except StreamError as err:
            print(_statement_error(index, stmt, err, text, source), file=sys.stderr)
            return 2
        except Exception as err:
            if not _is_spark_error(err):
                raise
            print(_statement_error(index, stmt, err, text, source), file=sys.stderr)
            return 2
        if result.table is not None:
            sys.stdout.write(render(result.table, args.format))
            sys.stdout.flush()
            if args.format == "table":
                print(f"({result.message})")
        else:
            print(f"ok: {result.message}", file=notes)
        status = max(status, _report_notices(index, stmt, result.notices))
    return status


def _report_notices(index: int, stmt: m.Statement, notices: Sequence[str]) -> int:
    """A statement that was done but an insert trigger failed: its warnings; exit status 3."""
    for notice in notices:
        print(f"warning: statement {index} ({stmt.kind}): {notice}", file=sys.stderr)
    return EXIT_TRIGGER_FAILED if notices else 0


def _is_spark_error(err: Exception) -> bool:
    try:
        from pyspark.errors import PySparkException
    except ImportError:
        return False
    return isinstance(err, PySparkException)


def cmd_load(args: argparse.Namespace) -> int:
    from airflow_stream_provider import streams  # noqa: F401  (insert triggers fire on the load)
    from airflow_stream_provider.warehouse import Warehouse, listeners
    from airflow_stream_provider.warehouse.load import load

    if args.into.upper() != "INTO":
        print(f"error: expected INTO after the file name, found {args.into!r}", file=sys.stderr)
        return 2
    db, _, name = args.table.rpartition(".")
    if not db:
        print(f"error: name the table with its database, as in power.meters (found {args.table!r})", file=sys.stderr)
        return 2

    progress = Console()

    try:
        report = load(Warehouse(), Path(args.file), m.TableName(name, db), batch_rows=args.batch_rows,
                      progress=progress)
    except (StreamError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"ok: {report.rows} rows loaded into {report.table} in {report.seconds:.1f} s "
          f"({report.rows / max(report.seconds, 1e-9):,.0f} rows/s, {report.commits} commit"
          f"{'s' if report.commits != 1 else ''})")
    notices = listeners.take_notices()
    for notice in notices:
        print(f"warning: {notice}", file=sys.stderr)
    return EXIT_TRIGGER_FAILED if notices else 0


def cmd_catalog(args: argparse.Namespace) -> int:
    """A table of the shared catalog by name: its location and columns, and with --rows its first rows."""
    from airflow_stream_provider.cli.render import render
    from airflow_stream_provider.warehouse import Warehouse
    from airflow_stream_provider.warehouse.metastore import catalog_table

    try:
        spark = Warehouse().spark
        found = catalog_table(spark, args.name)
    except StreamError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"name": args.name.lower(), "location": found.location, "schema": found.schema.jsonValue()}))
    else:
        print(f"{args.name.lower()}: Delta table at {found.location}")
        for column in found.schema.fields:
            print(f"  {column.name} {column.dataType.simpleString()}{'' if column.nullable else ' NOT NULL'}")
    if args.rows:
        rows = spark.read.format("delta").load(found.location).limit(args.rows).toArrow()
        sys.stdout.write(render(rows, "csv" if args.json else "table"))
    return 0


def cmd_node(args: argparse.Namespace) -> int:
    if args.action == "start":
        try:
            info = node.start(port=args.port, memory=args.memory, master=args.master)
        except node.NodeError as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
        print(f"stream node running: pid {info.pid}, {info.url}, log {node.folder() / 'node.log'}, "
              f"token {node.folder() / 'token'}")
        return 0
    if args.action == "stop":
        pid = node.stop()
        print(f"stream node stopped (pid {pid})" if pid else "stream node was not running")
        return 0
    report = node.status()
    if report is None:
        print("stream node: not running")
        return 3
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"stream node: running, pid {report['pid']}, {report['url']}, up {_uptime(report['uptime_s'])}")
    print(f"  log: {report['log']}")
    queries = report.get("queries", [])
    print(f"  streaming queries: {len(queries)}")
    for query in queries:
        progress = query.get("last_progress") or {}
        last = (f"batch {progress.get('batchId')} at {progress.get('timestamp')}, "
                f"{progress.get('numInputRows')} rows, {progress.get('processedRowsPerSecond', 0):.1f} rows/s"
                if progress else "no batch yet")
        print(f"  - {query.get('name') or query['id']}: {last}")
    return 0


def _stream_of(args: argparse.Namespace) -> tuple[str, str] | None:
    """The (database, name) of ``args.stream`` (``db.name``, or a name with ``-d DB``, or a continuous
    query's id); None, said on standard error, when no database is named."""
    db, _, name = args.stream.rpartition(".")
    db = db or args.database or _continuous_query_namespace(name)
    if not db:
        print(f"error: name the stream's database: db.{name} (or -d DB); no continuous query has the id {name}",
              file=sys.stderr)
        return None
    return db, name


def cmd_run(args: argparse.Namespace) -> int:
    from airflow_stream_provider.streams.run import run as run_stream
    from airflow_stream_provider.streams.run_request import RunRequest
    from airflow_stream_provider.warehouse import Warehouse

    found = _stream_of(args)
    if found is None:
        return 2
    db, name = found
    warehouse = Warehouse(database=db)

    progress = Console()

    try:
        report = run_stream(warehouse, db, name, RunRequest.everything(progress=progress))
    except StreamError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except Exception as err:
        if not _is_spark_error(err):
            raise
        print(f"error: {type(err).__name__}: {str(err).splitlines()[0]}", file=sys.stderr)
        return 2
    if report.per_trigger:
        print(f"note: computed per trigger: {report.per_trigger}", file=sys.stderr)
    print(report.summary())
    return 0


#: VERIFY found differences (``airflow-stream verify``)
EXIT_DIFFERENCES = 3


def cmd_verify(args: argparse.Namespace) -> int:
    """``airflow-stream verify``: VERIFY STREAM from the command line; 0 equal, 3 differences, 2 bad input."""
    from airflow_stream_provider.airflow_api import AirflowApi
    from airflow_stream_provider.cli.render import render
    from airflow_stream_provider.streams.verify import verify
    from airflow_stream_provider.warehouse import Warehouse

    found = _stream_of(args)
    if found is None:
        return 2
    db, name = found
    text = f"VERIFY STREAM `{db}`.`{name}`" + "".join(
        f" {word} {_time_literal(value)}" for word, value in (("FROM", args.start), ("TO", args.end)) if value)
    try:
        stmt = parse(text)[0]
    except StreamDefinitionError as err:
        print(format_error(err, text, "--from/--to"), file=sys.stderr)
        return 2
    assert isinstance(stmt, m.VerifyStream)
    now = datetime.now(UTC)
    progress = Console() if args.format == "table" else None
    try:
        report = verify(Warehouse(database=db), db, name, stmt.start.resolve(now) if stmt.start else None,
                        stmt.end.resolve(now) if stmt.end else None, repair=args.repair, progress=progress,
                        api=AirflowApi() if args.repair else None)
    except StreamError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except Exception as err:
        if not _is_spark_error(err):
            raise
        print(f"error: {type(err).__name__}: {str(err).splitlines()[0]}", file=sys.stderr)
        return 2
    if args.format == "json":
        print(json.dumps(report.to_json(), indent=2))
    else:
        if report.differences:
            sys.stdout.write(render(report.table(), "table"))
        print(report.summary())
    return 0 if report.equal else EXIT_DIFFERENCES


def cmd_retention(args: argparse.Namespace) -> int:
    """``airflow-stream retention``: one retention run (what the retention DAG runs every hour)."""
    from airflow_stream_provider.streams.retention import run_retention
    from airflow_stream_provider.warehouse import Warehouse

    try:
        report = run_retention(Warehouse(), vacuum_hours=args.vacuum_hours, say=Console())
    except StreamError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(report.summary())
    return 0


def _time_literal(value: str) -> str:
    """A --from/--to value as the statement writes it: ``now - 1d`` and epoch milliseconds as they
    are, anything else as a quoted timestamp."""
    plain = value.strip()
    if plain.lower().startswith("now") or plain.isdigit():
        return plain
    return "'" + plain.replace("'", "''") + "'"


def _continuous_query_namespace(name: str) -> str | None:
    """The namespace of the continuous query ``name``, or None: a CQ id is global in IoTDB, so
    ``run cq1`` needs no database."""
    from airflow_stream_provider.streams.store import StreamStore

    store = StreamStore()
    try:
        found = store.exists(CQ_NAMESPACE, name.lower()) and store.get(CQ_NAMESPACE, name.lower()).statement.series
    except StreamError:  # not a name at all: the error below says what to write
        return None
    return CQ_NAMESPACE if found else None


def cmd_serve(args: argparse.Namespace) -> int:
    from airflow_stream_provider.serve.server import Settings, serve_until_stopped

    try:
        settings = Settings.read(host=args.host, tdengine_port=args.tdengine_port, iotdb_port=args.iotdb_port,
                                 iotdb_session_port=args.iotdb_session_port)
        return serve_until_stopped(settings)
    except (ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


def cmd_receive(args: argparse.Namespace) -> int:
    token = args.token if args.token is not None else os.environ.get("AIRFLOW_STREAM_RECEIVE_TOKEN") or None
    return receiver.main(args.host, args.port, args.out, args.quiet, args.json, args.tls_cert, args.tls_key,
                         args.max_size, token)


def cmd_demo(args: argparse.Namespace) -> int:
    from airflow_stream_provider import demo

    if args.meters < 1 or args.duration < 0:
        print("error: --meters must be at least 1 and --duration at least 0", file=sys.stderr)
        return 2
    return demo.main(args.home, args.duration, args.port, args.meters, args.drain)


def _uptime(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="airflow-stream", description="TDengine-style streams on Spark and Airflow")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="parse and validate statements without starting Spark")
    check.add_argument("-f", "--file", help="read statements from FILE ('-' for standard input)")
    check.add_argument("statement", nargs="?", help="statements to check")
    check.add_argument("--to", choices=("3.3.7", "3.4"), help="3.3.7: each statement in 3.3.7's syntax and what it "
                       "cannot reproduce; 3.4: what a 3.3.7 statement does differently under 3.4's semantics")
    check.set_defaults(func=cmd_check)
    selfcheck = sub.add_parser("selfcheck", help="create, write and read back a Delta table on local Spark")
    selfcheck.set_defaults(func=cmd_selfcheck)

    sql = sub.add_parser("sql", help="execute table statements and queries on the Delta warehouse")
    sql.add_argument("-f", "--file", help="read statements from FILE ('-' for standard input)")
    sql.add_argument("statement", nargs="?", help="statements to execute")
    sql.add_argument("--format", choices=("table", "csv", "json"), default="table", help="how SELECT results print")
    sql.add_argument("-d", "--database", help="database used by names without one (as after USE)")
    sql.set_defaults(func=cmd_sql)

    load = sub.add_parser("load", help="bulk-load a CSV or Parquet file into a table",
                          usage="airflow-stream load FILE INTO db.table [--batch-rows N]")
    load.add_argument("file", help="a .csv (with a header line) or .parquet file")
    load.add_argument("into", metavar="INTO")
    load.add_argument("table", help="db.table: a supertable, subtable or regular table")
    load.add_argument("--batch-rows", type=int, default=2_000_000,
                      help="rows per commit; a file up to this size loads in one atomic commit (default 2000000)")
    load.set_defaults(func=cmd_load)

    catalog = sub.add_parser("catalog", help="show a Delta table of the shared catalog by name: location, "
                             "columns, rows")
    catalog.add_argument("name", help="database.table as the metastore knows it, such as iot.readings")
    catalog.add_argument("--rows", type=int, default=0, help="also print the first ROWS rows")
    catalog.add_argument("--json", action="store_true", help="location and schema as JSON (rows as CSV)")
    catalog.set_defaults(func=cmd_catalog)

    run = sub.add_parser("run", help="run a stream's pending triggers: detection, compute, write")
    run.add_argument("stream", help="db.stream, or a continuous query's id")
    run.add_argument("--until-idle", action="store_true", required=True,
                     help="process everything pending, then exit (the only mode of this command)")
    run.add_argument("-d", "--database", help="database of a stream named without one")
    run.set_defaults(func=cmd_run)

    verify = sub.add_parser("verify", help="compare a stream's output with its triggers computed again in batch",
                            description="Recompute every trigger of the range in batch over the table versions the "
                                        "stream's progress names and compare with its output table. Exit status 0: "
                                        "equal, 3: differences, 2: bad input.")
    verify.add_argument("stream", help="db.stream, or a continuous query's id")
    verify.add_argument("--from", dest="start", help="event time to start at: '2025-01-01 00:00:00', epoch "
                                                    "milliseconds or now - 1d (default: the first row)")
    verify.add_argument("--to", dest="end", help="event time to end before (default: as far as the stream has "
                                                "processed)")
    verify.add_argument("--repair", action="store_true", help="recalculate the windows that differ, remove the "
                                                             "extra rows, and verify again")
    verify.add_argument("--format", choices=("table", "json"), default="table", help="how the differences print")
    verify.add_argument("-d", "--database", help="database of a stream named without one")
    verify.set_defaults(func=cmd_verify)

    keep = sub.add_parser("retention", help="delete the rows KEEP and TTL no longer keep, vacuum the tables, record "
                                            "the streams' source horizons (once)")
    keep.add_argument("--vacuum-hours", type=float, help="remove unreferenced files older than this (default: each "
                                                         "table's delta.deletedFileRetentionDuration, 7 days)")
    keep.set_defaults(func=cmd_retention)

    node = sub.add_parser("node", help="start, stop or inspect the stream node (Spark with Spark Connect)")
    node.add_argument("action", choices=("start", "stop", "status"))
    node.add_argument("--port", type=int, help="Spark Connect port on 127.0.0.1 (default 15002)")
    node.add_argument("--memory", help="driver memory of the node, such as 4g")
    node.add_argument("--master", help="the Spark master the node drives: local[2] (default), or a standalone "
                      "cluster's spark://host:port (also AIRFLOW_STREAM_NODE_MASTER, [node] master)")
    node.add_argument("--json", action="store_true", help="status as JSON")
    node.set_defaults(func=cmd_node)

    serve = sub.add_parser("serve", help="serve TDengine's REST API and schemaless writes and IoTDB's REST API v2 "
                           "over the warehouse")
    serve.add_argument("--host", help="address to listen on (default 127.0.0.1, or [serve] host)")
    serve.add_argument("--tdengine-port", type=int, help="TDengine's REST and schemaless port (default 6041; 0: off)")
    serve.add_argument("--iotdb-port", type=int, help="IoTDB's REST API v2 port (default 18080; 0: off)")
    serve.add_argument("--iotdb-session-port", type=int,
                       help="IoTDB's session protocol port, for the apache-iotdb Session "
                            "(IoTDB's is 6667; default 0: off)")
    serve.set_defaults(func=cmd_serve)

    receive = sub.add_parser("receive", help="listen for stream notifications on a WebSocket and print them")
    receive.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    receive.add_argument("--port", type=int, default=8765, help="port to listen on (default 8765)")
    receive.add_argument("--out", help="also append each message, one JSON per line, to this file")
    receive.add_argument("--json", action="store_true", help="print messages as received, not summarized")
    receive.add_argument("-q", "--quiet", action="store_true", help="print nothing (with --out)")
    receive.add_argument("--tls-cert", help="serve wss:// with this certificate (PEM)")
    receive.add_argument("--tls-key", help="the certificate's private key (PEM)")
    receive.add_argument("--max-size", type=int, default=receiver.MAX_SIZE, metavar="BYTES",
                         help=f"close a connection that sends a larger message (default {receiver.MAX_SIZE})")
    receive.add_argument("--token", help="accept only senders presenting this bearer token (default: "
                         "$AIRFLOW_STREAM_RECEIVE_TOKEN, else anyone); senders give it as the password, with no "
                         "login, of their stream_ws connection, which sends it only over wss:// unless its extra "
                         "sets allow_plaintext")
    receive.set_defaults(func=cmd_receive)
    demo = sub.add_parser("demo", help="run the stream node, Airflow and a receiver over simulated smart meters",
                          description="Start the stream node, Airflow standalone and a WebSocket receiver; create "
                                      "simulated smart meters and six streams over them; write live readings and "
                                      "print notifications. Stops on Ctrl-C or after --duration.")
    demo.add_argument("--duration", type=float, default=600,
                      help="seconds of live readings (default 600; 0: until Ctrl-C)")
    demo.add_argument("--home", default=".demo", help="folder for everything the demo makes, emptied at start "
                                                      "(default .demo)")
    demo.add_argument("--port", type=int, help="the Airflow UI's port (default 8080 when free; 0: any free port)")
    demo.add_argument("--meters", type=int, default=5, help="simulated meters (default 5)")
    demo.add_argument("--drain", type=float, default=90,
                      help="seconds to let the streams finish after writing stops (default 90)")
    demo.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    bind()  # delivery and Spark sessions read Airflow connections through the hooks
    args = build_parser().parse_args(argv)
    # PySpark logs every failed query as JSON before raising it; the error is reported once, below.
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
