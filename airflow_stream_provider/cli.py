"""The ``airflow-stream`` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from airflow_stream_provider.exceptions import StreamDefinitionError


def _read_input(args: argparse.Namespace) -> tuple[str, str]:
    if args.file and args.statement:
        raise SystemExit("airflow-stream: give either -f FILE or a STATEMENT, not both")
    if args.file:
        if args.file == "-":
            return sys.stdin.read(), "<stdin>"
        with open(args.file, encoding="utf-8") as handle:
            return handle.read(), args.file
    if args.statement:
        return args.statement, "<statement>"
    if not sys.stdin.isatty():
        return sys.stdin.read(), "<stdin>"
    raise SystemExit("airflow-stream: give a STATEMENT, -f FILE, or statements on standard input")


def format_error(err: StreamDefinitionError, text: str, source: str = "") -> str:
    """``error: line L, col C: message``, then the offending line and a caret under the column."""
    lines = [f"error: {err}"]
    if err.line is not None:
        src_lines = text.splitlines() or [""]
        if 1 <= err.line <= len(src_lines):
            code = src_lines[err.line - 1]
            lines.append(f"  {code}")
            lines.append("  " + " " * (max(err.column or 1, 1) - 1) + "^")
    if source and source not in ("<statement>", "<stdin>"):
        lines.append(f"  in {source}")
    return "\n".join(lines)


def cmd_check(args: argparse.Namespace) -> int:
    from airflow_stream_provider.sql import parse

    text, source = _read_input(args)
    try:
        statements = parse(text)
    except StreamDefinitionError as err:
        print(format_error(err, text, source), file=sys.stderr)
        return 2
    if not statements:
        print("error: no statement found", file=sys.stderr)
        return 2
    for stmt in statements:
        print(f"ok: {stmt.kind} {stmt.subject}".rstrip())
    return 0


def cmd_selfcheck(args: argparse.Namespace) -> int:
    from airflow_stream_provider.engine.session import DeltaJarsMissing, delta_round_trip

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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="airflow-stream", description="TDengine-style streams on Spark and Airflow")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="parse and validate statements without starting Spark")
    check.add_argument("-f", "--file", help="read statements from FILE ('-' for standard input)")
    check.add_argument("statement", nargs="?", help="statements to check")
    check.set_defaults(func=cmd_check)
    selfcheck = sub.add_parser("selfcheck", help="create, write and read back a Delta table on local Spark")
    selfcheck.set_defaults(func=cmd_selfcheck)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
