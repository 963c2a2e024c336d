"""A cursor over the tokens of a statement: look ahead, accept, expect, and fail at a position.

A language's statement parser subclasses :class:`TokenCursor`; the values every language spells
the same way (names, table names, integers, name lists) and the spans handed to an expression
parser are read here.
"""

from __future__ import annotations

from collections.abc import Callable

from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import StreamDefinitionError, StreamSyntaxError
from airflow_stream_provider.model import names
from airflow_stream_provider.sql.grammar.lexer import Kind, Lexer, Token


class TokenCursor:
    #: the lexer of the language
    LEXER: type[Lexer] = Lexer

    def __init__(self, text: str, span: tuple[int, int] | None = None) -> None:
        """:param span: the part of ``text`` to read (its statements), positions staying those of
            the whole text; all of it by default."""
        self.text = text
        self.lexer = self.LEXER(text)
        self.toks = self.lexer.tokens(*(span or (0, None)))
        self.i = 0

    # --- tokens --------------------------------------------------------------------------------

    @property
    def tok(self) -> Token:
        return self.toks[self.i]

    def peek(self, k: int = 1) -> Token:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def advance(self) -> Token:
        tok = self.tok
        if tok.kind is not Kind.EOF:
            self.i += 1
        return tok

    def at(self, *words: str) -> bool:
        return all(self.peek(k).upper == w for k, w in enumerate(words))

    def at_op(self, op: str) -> bool:
        return self.tok.kind is Kind.OP and self.tok.text == op

    def at_end(self) -> bool:
        """At the end of a statement: ``;`` or the end of the text."""
        return self.at_op(";") or self.tok.kind is Kind.EOF

    def accept(self, *words: str) -> bool:
        if self.at(*words):
            self.i += len(words)
            return True
        return False

    def accept_op(self, op: str) -> bool:
        if self.at_op(op):
            self.i += 1
            return True
        return False

    def error(self, message: str, tok: Token | None = None, clause: str | None = None, hint: str | None = None,
              syntax: bool = False) -> StreamDefinitionError:
        tok = tok or self.tok
        cls = StreamSyntaxError if syntax else StreamDefinitionError
        return cls(message, line=tok.line, column=tok.column, clause=clause, hint=hint)

    def expect(self, *words: str, clause: str | None = None) -> Token:
        tok = self.tok
        if not self.accept(*words):
            raise self.error(f"expected {' '.join(words)}, found {tok.describe()}", clause=clause, syntax=True)
        return tok

    def expect_op(self, op: str, clause: str | None = None) -> Token:
        tok = self.tok
        if not self.accept_op(op):
            raise self.error(f"expected '{op}', found {tok.describe()}", clause=clause, syntax=True)
        return tok

    def position(self, tok: Token) -> m.Position:
        return m.Position(tok.line, tok.column)

    # --- statements --------------------------------------------------------------------------

    def statements(self, read: Callable[[], list[m.Statement]]) -> list[m.Statement]:
        """Every statement to the end of the text, ``;`` between them: ``read`` parses the one at
        the cursor (into one or more model statements), which then get its text."""
        out: list[m.Statement] = []
        while True:
            while self.accept_op(";"):
                pass
            if self.at_end():
                return out
            first = self.tok
            found = read()
            if not self.at_end():
                raise self.error(f"unexpected {self.tok.describe()}: expected ';' or the end of the statement",
                                 syntax=True)
            text = self.text[first.start : self.toks[self.i - 1].end]
            for stmt in found:
                object.__setattr__(stmt, "text", text)
            out.extend(found)

    # --- names and numbers ---------------------------------------------------------------------

    def ident(self, what: str = "name", clause: str | None = None, kind: names.NameKind | None = None) -> str:
        """A name; with ``kind``, one that obeys the name rule of that kind
        (:mod:`airflow_stream_provider.model.names`)."""
        tok = self.tok
        if tok.kind in (Kind.IDENT, Kind.QUOTED_IDENT):
            problem = names.name_problem(tok.value, kind) if kind is not None else None
            if kind is not None and problem is not None:
                raise self.error(f"{kind.label} name {names.shown(tok.value)} {problem}", tok, clause)
            self.advance()
            return tok.value
        raise self.error(f"expected a {what}, found {tok.describe()}", clause=clause, syntax=True)

    def table_name(self, what: str = "table name", clause: str | None = None,
                   kind: names.NameKind = names.TABLE) -> m.TableName:
        """``[db.]name``: a database name and a name of ``kind`` (a table unless said)."""
        dotted = self.peek().kind is Kind.OP and self.peek().text == "."
        if self.tok.kind in (Kind.IDENT, Kind.QUOTED_IDENT) and dotted:
            db = self.ident("database name", clause, names.DATABASE)
            self.advance()
            return m.TableName(self.ident(what, clause, kind), db=db)
        return m.TableName(self.ident(what, clause, kind))

    def integer(self, what: str, clause: str | None = None) -> int:
        tok = self.tok
        negative = self.accept_op("-")
        tok = self.tok
        if tok.kind is not Kind.NUMBER or not tok.text.isdigit():
            raise self.error(f"{what} must be an integer, found {tok.describe()}", tok, clause, syntax=True)
        self.advance()
        return -int(tok.text) if negative else int(tok.text)

    def name_list(self, clause: str, what: str = "column name") -> tuple[str, ...]:
        self.expect_op("(", clause)
        found = [self.ident(what, clause)]
        while self.accept_op(","):
            found.append(self.ident(what, clause))
        self.expect_op(")", clause)
        return tuple(found)

    # --- spans handed to an expression parser --------------------------------------------------

    def span_until(self, stop: Callable[[], bool], clause: str) -> tuple[int, int]:
        """Token span from here to the first depth-0 token where ``stop()`` holds."""
        depth, first, first_index = 0, self.tok, self.i
        while True:
            tok = self.tok
            if tok.kind is Kind.EOF:
                break
            if depth == 0 and (stop() or (tok.kind is Kind.OP and tok.text in (")", ";", ","))):
                break
            if tok.kind is Kind.OP and tok.text == "(":
                depth += 1
            elif tok.kind is Kind.OP and tok.text == ")":
                depth -= 1
            self.advance()
        if self.i == first_index:
            raise self.error(f"{clause} needs an expression here, found {self.tok.describe()}", clause=clause,
                             syntax=True)
        return first.start, self.toks[self.i - 1].end

    def span_to_end(self, clause: str, stop: Callable[[], bool] = lambda: False) -> tuple[Token, int, int]:
        """First token and span from here to the end of the statement (``;`` at depth 0, or the end),
        or to the first depth-0 token where ``stop()`` holds."""
        first = self.tok
        depth = 0
        while not (self.tok.kind is Kind.EOF or (depth == 0 and (self.at_op(";") or stop()))):
            if self.at_op("("):
                depth += 1
            elif self.at_op(")"):
                depth -= 1
            self.advance()
        if self.tok is first:
            raise self.error(f"{clause} needs a query", clause=clause, syntax=True)
        return first, first.start, self.toks[self.i - 1].end
