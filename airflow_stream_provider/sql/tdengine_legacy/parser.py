"""The statement parser of TDengine's stream syntax before 3.3.7, beside 3.3.7's.

:class:`Parser` extends the 3.3.7 parser's statement table: a CREATE STREAM whose name is followed
by a 3.3.7 trigger (``INTERVAL``, ``SESSION``, ``PERIOD``...) is read as 3.3.7, one followed by
legacy options, ``INTO`` or ``AS`` as legacy; ``PAUSE`` and ``RESUME STREAM`` are added. Every
other statement is the 3.3.7 parser's, so both forms are recognised without a flag.
"""

from __future__ import annotations

from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import did_you_mean
from airflow_stream_provider.model import names
from airflow_stream_provider.sql.grammar.lexer import Kind
from airflow_stream_provider.sql.tdengine import parser as tdengine
from airflow_stream_provider.sql.tdengine.streams import TRIGGER_KEYWORDS
from airflow_stream_provider.sql.tdengine_legacy.lower import lower
from airflow_stream_provider.sql.tdengine_legacy.streams import OPTION_WORDS, LegacyStreamStatements

#: what follows a legacy stream's name: an option, the output table, or the subquery
LEGACY_STARTS = (*OPTION_WORDS, "INTO", "AS")


def _create_stream(p: tdengine.Parser, pos: dict) -> tdengine.Parsed:
    assert isinstance(p, Parser)  # the table below is this parser's
    if p.legacy_at_name():
        return lower(p.legacy_create_stream(), pos)
    return p.create_stream(pos)


def _pause_resume(p: tdengine.Parser, pos: dict) -> tdengine.Parsed:
    assert isinstance(p, Parser)
    return p.pause_resume(pos)


class Parser(LegacyStreamStatements, tdengine.Parser):
    STATEMENTS: dict[tuple[str, ...], tdengine.ParseMethod] = {
        **tdengine.Parser.STATEMENTS,
        ("CREATE", "STREAM"): _create_stream,
        ("PAUSE", "STREAM"): _pause_resume,
        ("RESUME", "STREAM"): _pause_resume,
    }
    KNOWN = ("CREATE, ALTER DATABASE, DROP, SHOW, START, STOP, PAUSE, RESUME, RECALCULATE, VERIFY, USE, INSERT, "
             "DELETE or SELECT")

    def legacy_at_name(self) -> bool:
        """Whether the CREATE STREAM here is in the legacy syntax, decided by the token after its name
        (the cursor does not move); an error when that token begins neither form."""
        start = self.i
        try:
            self.expect("CREATE", "STREAM")
            self.accept("IF", "NOT", "EXISTS")
            self.table_name("stream name", "CREATE STREAM", names.STREAM)
            tok, after = self.tok, self.peek()
        finally:
            self.i = start
        if tok.upper in TRIGGER_KEYWORDS or (tok.upper == "WINDOW" and after.text == "("):
            return False  # (WINDOW(...): the nested windows of TDengine 3.4.2, refused by the 3.3.7 parser)
        if tok.upper in LEGACY_STARTS:
            return True
        hint = did_you_mean(tok.text, (*TRIGGER_KEYWORDS, *LEGACY_STARTS)) if tok.kind is Kind.IDENT else None
        raise self.error(f"expected a trigger ({', '.join(TRIGGER_KEYWORDS)}) or, in the syntax of TDengine before "
                         f"3.3.7, stream options, INTO or AS; found {tok.describe()}", tok, "CREATE STREAM",
                         hint=hint, syntax=True)


def parse(text: str, span: tuple[int, int] | None = None) -> list[m.Statement]:
    """Parse and validate every statement of ``text``, in either TDengine stream syntax."""
    return Parser(text, span).parse()
