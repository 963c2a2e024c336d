"""The statement parser of TDengine 3.3.7: a table from leading keywords to the method that parses.

Statement structure (clauses, options, names, durations) is parsed from the project's own tokens
(:mod:`..grammar`); embedded expressions and queries go to the dialect on sqlglot
(:mod:`.dialect`). The statements themselves live in :mod:`.streams` and :mod:`.tables`;
:attr:`Parser.STATEMENTS` says which one a statement is, by its leading keywords, the longest
match first. Another language extends the table (``{**Parser.STATEMENTS, ...}``) and overrides
methods, never adds a branch here.
"""

from __future__ import annotations

from collections.abc import Callable

from airflow_stream_provider import model as m
from airflow_stream_provider.sql.tdengine.streams import StreamStatements
from airflow_stream_provider.sql.tdengine.tables import TableStatements

#: what a parse method returns: one statement, or several (``CREATE TABLE a USING ... b USING ...``)
Parsed = m.Statement | list[m.Statement]
ParseMethod = Callable[["Parser", dict], Parsed]


def _create_snode(p: Parser, pos: dict) -> Parsed:
    raise p.error("CREATE SNODE is not needed: start the stream node with `airflow-stream node start`")


def _iotdb_continuous_query(p: Parser, pos: dict) -> Parsed:
    raise p.error("CREATE CQ is an IoTDB continuous query: the TDengine language does not read it; the default "
                  "language recognises IoTDB's statements by their shape", clause="CREATE CQ")


def _iotdb_trigger(p: Parser, pos: dict) -> Parsed:
    raise p.error("CREATE TRIGGER is an IoTDB trigger: the TDengine language does not read it; the default "
                  "language recognises IoTDB's statements by their shape", clause="CREATE TRIGGER")


def _legacy_pause_resume(p: Parser, pos: dict) -> Parsed:
    word = p.tok.upper
    raise p.error(f"{word} STREAM is TDengine's older syntax (3.0 to 3.3.6): use "
                  f"{'STOP' if word == 'PAUSE' else 'START'} STREAM", clause=f"{word} STREAM")


class Parser(StreamStatements, TableStatements):
    STATEMENTS: dict[tuple[str, ...], ParseMethod] = {
        ("CREATE", "STREAM"): lambda p, pos: p.create_stream(pos),
        ("CREATE", "DATABASE"): lambda p, pos: p.create_database(pos),
        ("ALTER", "DATABASE"): lambda p, pos: p.alter_database(pos),
        ("CREATE", "STABLE"): lambda p, pos: p.create_table(pos),
        ("CREATE", "TABLE"): lambda p, pos: p.create_table(pos),
        ("CREATE", "SNODE"): _create_snode,
        ("CREATE", "CQ"): _iotdb_continuous_query,
        ("CREATE", "CONTINUOUS", "QUERY"): _iotdb_continuous_query,
        ("CREATE", "TRIGGER"): _iotdb_trigger,
        ("CREATE", "STATEFUL", "TRIGGER"): _iotdb_trigger,
        ("CREATE", "STATELESS", "TRIGGER"): _iotdb_trigger,
        ("PAUSE", "STREAM"): _legacy_pause_resume,
        ("RESUME", "STREAM"): _legacy_pause_resume,
        ("DROP",): lambda p, pos: p.drop(pos),
        ("SHOW",): lambda p, pos: p.show(pos),
        ("START",): lambda p, pos: p.stream_control(pos),
        ("STOP",): lambda p, pos: p.stream_control(pos),
        ("RECALCULATE",): lambda p, pos: p.stream_control(pos),
        ("VERIFY",): lambda p, pos: p.stream_control(pos),
        ("USE",): lambda p, pos: p.use_database(pos),
        ("DESCRIBE",): lambda p, pos: p.describe(pos),
        ("DESC",): lambda p, pos: p.describe(pos),
        ("INSERT",): lambda p, pos: p.insert(pos),
        ("DELETE",): lambda p, pos: p.delete(pos),
        ("SELECT",): lambda p, pos: p.select(pos),
        ("WITH",): lambda p, pos: p.select(pos),
    }
    #: the statements named in the message for an unknown one
    KNOWN = ("CREATE, ALTER DATABASE, DROP, SHOW, DESCRIBE, START, STOP, RECALCULATE, VERIFY, USE, INSERT, DELETE "
             "or SELECT")

    def parse(self) -> list[m.Statement]:
        return self.statements(self.statement)

    def statement(self) -> list[m.Statement]:
        tok = self.tok
        pos = {"position": self.position(tok), "text": ""}
        method = self.statement_method()
        if method is None:
            raise self.error(f"unknown statement {tok.describe()}: expected {self.KNOWN}", syntax=True)
        parsed = method(self, pos)
        return parsed if isinstance(parsed, list) else [parsed]

    def statement_method(self) -> ParseMethod | None:
        """The parse method of the statement here: the longest run of leading keywords in the table."""
        if self.at_op("("):
            return self.STATEMENTS[("SELECT",)]
        for words in sorted(self.STATEMENTS, key=len, reverse=True):
            if self.at(*words):
                return self.STATEMENTS[words]
        return None


def parse(text: str, span: tuple[int, int] | None = None) -> list[m.Statement]:
    """Parse and validate every statement in ``text``; raises :class:`StreamDefinitionError`."""
    return Parser(text, span).parse()
