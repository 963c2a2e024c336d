"""TDengine SQL on sqlglot: the tokenizer, parser and generator of expressions and subqueries.

Expressions and subqueries of the TDengine stream language are parsed here into the canonical tree
of :mod:`..ast`: TDengine-only syntax becomes its typed nodes (``5m``, ``_twstart``, ``FROM
%%trows``, ``_c0``, ``INTERVAL(1m) SLIDING(30s)`` on a SELECT). Every function call stays an
``exp.Anonymous`` so that one registry (:mod:`..functions`) decides what it means in Spark.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from sqlglot import exp, generator, parser, tokens
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError, TokenError
from sqlglot.helper import csv
from sqlglot.tokens import TokenType

from airflow_stream_provider.exceptions import StreamDefinitionError, StreamSyntaxError
from airflow_stream_provider.model.events import TriggerKind
from airflow_stream_provider.model.time import ALL_UNITS
from airflow_stream_provider.sql.ast import (
    PLACEHOLDERS,
    PSEUDO_COLUMNS,
    REJECTED_PSEUDO_COLUMNS,
    DurationLiteral,
    PartitionClause,
    PlaceholderTable,
    PseudoColumn,
    StreamPlaceholder,
    WindowClause,
)
from airflow_stream_provider.sql.grammar.lexer import Kind, Lexer

_MASK = "__"  # replaces "%%": same length, so sqlglot's positions stay those of the source
_MASKED = re.compile(r"^__(trows|tbname|rollup_tag|\d+)$", re.IGNORECASE)


def _window_keyword_tokens() -> dict[str, TokenType]:
    # STATE_WINDOW, EVENT_WINDOW and COUNT_WINDOW share a token type TDengine SQL never produces
    # otherwise, so that one query-modifier parser picks them all up (it dispatches on the text).
    kinds = (TriggerKind.STATE_WINDOW, TriggerKind.EVENT_WINDOW, TriggerKind.COUNT_WINDOW)
    return {str(kind): TokenType.CONNECT_BY for kind in kinds}


class TDengineParser(parser.Parser):
    # Every call is Anonymous: translation is by name, in one registry.
    FUNCTIONS: ClassVar[dict[str, Any]] = {}
    NO_PAREN_FUNCTIONS: ClassVar[dict[TokenType, Any]] = {}
    ID_VAR_TOKENS = parser.Parser.ID_VAR_TOKENS - {TokenType.CONNECT_BY, TokenType.SESSION, TokenType.INTERVAL}
    TABLE_ALIAS_TOKENS = parser.Parser.TABLE_ALIAS_TOKENS - {
        TokenType.INTERVAL,
        TokenType.SESSION,
        TokenType.CONNECT_BY,
        TokenType.PARTITION_BY,
    }
    ALIAS_TOKENS = ID_VAR_TOKENS

    def _parse_number_or_duration(self, token: tokens.Token) -> exp.Expr:
        nxt = self._curr
        if (
            nxt is not None
            and nxt.token_type == TokenType.VAR
            and nxt.start == token.end + 1
            and nxt.text.lower() in ALL_UNITS
            and re.fullmatch(r"\d+", token.text)
        ):
            self._advance()
            return self.expression(DurationLiteral(this=token.text, unit=nxt.text.lower()))
        return self.expression(exp.Literal.number(token.text))

    PRIMARY_PARSERS = {
        **parser.Parser.PRIMARY_PARSERS,
        TokenType.NUMBER: lambda self, token: self._parse_number_or_duration(token),
    }

    def _parse_partition_clause(self) -> tuple[str, exp.Expr]:
        self._advance()
        return "td_partition", self.expression(PartitionClause(expressions=self._parse_csv(self._parse_expression)))

    def _parse_duration_arg(self) -> exp.Expr | None:
        return self._parse_bitwise()

    def _parse_window_clause_td(self) -> tuple[str, exp.Expr]:
        kind = self._curr.text.upper()
        self._advance()
        args: dict = {"kind": kind}
        if kind == TriggerKind.EVENT_WINDOW:
            if not self._match_text_seq("START", "WITH"):
                self.raise_error("EVENT_WINDOW needs START WITH")
            args["start"] = self._parse_assignment()
            if not self._match_text_seq("END", "WITH"):
                self.raise_error("EVENT_WINDOW needs END WITH")
            args["end"] = self._parse_assignment()
        else:
            if not self._match(TokenType.L_PAREN):
                self.raise_error(f"{kind} needs its arguments in parentheses")
            args["expressions"] = self._parse_csv(self._parse_assignment)
            self._match_r_paren()
        if kind == TriggerKind.INTERVAL and self._match_text_seq("SLIDING"):
            self._match_l_paren()
            args["sliding"] = self._parse_bitwise()
            self._match_r_paren()
        if kind == TriggerKind.INTERVAL and self._match_text_seq("FILL"):
            self._match_l_paren()
            args["fill"] = exp.Tuple(expressions=self._parse_csv(self._parse_assignment))
            self._match_r_paren()
        if kind in (TriggerKind.STATE_WINDOW, TriggerKind.EVENT_WINDOW) and self._match_text_seq("TRUE_FOR"):
            self._match_l_paren()
            args["true_for"] = self._parse_assignment()
            self._match_r_paren()
        return "td_window", self.expression(WindowClause(**args))

    QUERY_MODIFIER_PARSERS = {
        **parser.Parser.QUERY_MODIFIER_PARSERS,
        TokenType.PARTITION_BY: lambda self: self._parse_partition_clause(),
        TokenType.INTERVAL: lambda self: self._parse_window_clause_td(),
        TokenType.SESSION: lambda self: self._parse_window_clause_td(),
        TokenType.CONNECT_BY: lambda self: self._parse_window_clause_td(),
    }
    QUERY_MODIFIER_TOKENS = set(QUERY_MODIFIER_PARSERS)


def _window_sql(self: generator.Generator, e: WindowClause) -> str:
    kind = e.args["kind"]
    if kind == TriggerKind.EVENT_WINDOW:
        sql = f" EVENT_WINDOW START WITH {self.sql(e, 'start')} END WITH {self.sql(e, 'end')}"
    else:
        sql = f" {kind}({self.expressions(e, flat=True)})"
    if e.args.get("sliding"):
        sql += f" SLIDING({self.sql(e, 'sliding')})"
    if e.args.get("fill"):
        sql += f" FILL({self.expressions(e.args['fill'], flat=True)})"
    if e.args.get("true_for"):
        sql += f" TRUE_FOR({self.sql(e, 'true_for')})"
    return sql


class TDengineGenerator(generator.Generator):
    """Writes TDengine SQL back, for messages and for the text stored with a definition."""

    TRANSFORMS = {
        **generator.Generator.TRANSFORMS,
        DurationLiteral: lambda self, e: f"{e.count}{e.unit}",
        StreamPlaceholder: lambda self, e: e.name,
        PlaceholderTable: lambda self, e: e.name + (f" {self.sql(e, 'alias')}" if e.args.get("alias") else ""),
        PseudoColumn: lambda self, e: e.name,
        PartitionClause: lambda self, e: f" PARTITION BY {self.expressions(e, flat=True)}",
        WindowClause: _window_sql,
    }

    def query_modifiers(self, expression: exp.Expr, *sqls: str) -> str:
        full = super().query_modifiers(expression, *sqls)
        extra = self.sql(expression, "td_partition") + self.sql(expression, "td_window")
        if not extra:
            return full
        head = csv(
            *sqls,
            *[self.sql(join) for join in expression.args.get("joins") or []],
            self.sql(expression, "match"),
            *[self.sql(lateral) for lateral in expression.args.get("laterals") or []],
            self.sql(expression, "prewhere"),
            self.sql(expression, "where"),
            sep="",
        )
        return head + extra + full[len(head) :]


class TDengine(Dialect):
    """TDengine's SQL: backquoted identifiers, strings in single or double quotes, ``5m`` durations."""

    class Tokenizer(tokens.Tokenizer):
        IDENTIFIERS = ["`"]
        QUOTES = ["'", '"']
        STRING_ESCAPES = ["\\", "'", '"']
        KEYWORDS = {
            **tokens.Tokenizer.KEYWORDS,
            **_window_keyword_tokens(),
            "SESSION": TokenType.SESSION,
        }
        KEYWORDS.pop("CONNECT BY", None)

    Parser = TDengineParser
    Generator = TDengineGenerator


def _blank_prefix(text: str, start: int) -> str:
    """Everything before ``start`` blanked but its newlines kept, so positions stay absolute."""
    return re.sub(r"[^\n]", " ", text[:start])


def _mask_references(text: str, start: int, end: int) -> str:
    fragment = list(text[start:end])
    for tok in Lexer(text[start:end]).tokens():
        if tok.kind is Kind.REF:
            fragment[tok.start] = fragment[tok.start + 1] = "_"
        elif tok.kind is Kind.IDENT and _MASKED.match(tok.text):
            line, column = Lexer(text).position(start + tok.start)
            raise StreamDefinitionError(
                f"identifier {tok.text} is reserved for %%{tok.text[2:]}", line=line, column=column
            )
    return "".join(fragment)


def parse_fragment(text: str, start: int = 0, end: int | None = None, *, clause: str, query: bool = False) -> exp.Expr:
    """Parse ``text[start:end]`` as a TDengine expression (or query), positions kept absolute."""
    body = _mask_references(text, start, len(text) if end is None else end)
    if not body.strip():
        line, column = Lexer(text).position(start)
        raise StreamSyntaxError(f"{clause} needs an expression here", line=line, column=column, clause=clause)
    source = _blank_prefix(text, start) + body
    try:
        trees = [t for t in TDengine().parse(source) if t is not None]
    except ParseError as err:
        info = err.errors[0] if err.errors else {}
        at_line, at_column = _error_position(text, info)
        description = _readable(info.get("description") or str(err).split(". Line")[0])
        raise StreamSyntaxError(description, line=at_line, column=at_column, clause=clause) from None
    except TokenError as err:
        line, column = Lexer(text).position(start)
        raise StreamSyntaxError(str(err), line=line, column=column, clause=clause) from None
    except RecursionError:
        line, column = Lexer(text).position(start)
        raise StreamSyntaxError("expression is nested too deeply", line=line, column=column, clause=clause) from None
    line, column = Lexer(text).position(start)
    if len(trees) != 1:
        raise StreamSyntaxError(f"{clause} needs one expression here", line=line, column=column, clause=clause)
    tree = trees[0]
    if query and not isinstance(tree, exp.Query):
        raise StreamSyntaxError(f"{clause} needs a SELECT query here", line=line, column=column, clause=clause)
    if not query and isinstance(tree, (exp.Query, exp.Command)):
        raise StreamSyntaxError(f"{clause} needs an expression here, not a statement", line=line, column=column,
                                clause=clause)
    return resolve_tdengine_nodes(tree)


def result_name(item: exp.Expr) -> str:
    """The name TDengine gives a result column: its alias, else its text (``avg(col1)``)."""
    if isinstance(item, exp.Alias):
        return item.alias
    if isinstance(item, exp.Column):
        return item.name
    return item.sql(dialect=TDengine, normalize_functions=False)


_TOKEN_REPR = re.compile(r"<Token token_type: TokenType\.(\w+), text: (.*?), line: .*?>")


def _readable(message: str) -> str:
    def token(m: re.Match) -> str:
        return "end of input" if m.group(1) == "SENTINEL" else repr(m.group(2))

    return _TOKEN_REPR.sub(token, message)


def _error_position(text: str, info: dict) -> tuple[int | None, int | None]:
    line, col = info.get("line"), info.get("col")
    if line is None:
        return None, None
    # sqlglot reports the column where the offending token ends; point at its start instead.
    highlight = info.get("highlight") or ""
    if col is None or not highlight:
        return line, col
    return line, max(1, col - len(highlight) + 1)


def resolve_tdengine_nodes(tree: exp.Expr) -> exp.Expr:
    """Turn the generic nodes sqlglot built for TDengine-only names into the typed nodes above."""

    def convert(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and not node.table:
            ident = node.this
            name = node.name
            lowered = name.lower()
            quoted = isinstance(ident, exp.Identifier) and ident.quoted
            if _MASKED.match(name):
                return StreamPlaceholder(this="%%" + lowered[2:])
            if quoted:
                return node
            if lowered in PLACEHOLDERS:
                return StreamPlaceholder(this=lowered)
            if lowered in PSEUDO_COLUMNS or lowered in REJECTED_PSEUDO_COLUMNS:
                return PseudoColumn(this=lowered)
            if lowered in ("now", "today"):
                return exp.Anonymous(this=lowered, expressions=[])
        if isinstance(node, exp.Table) and not node.args.get("db") and _MASKED.match(node.name):
            return PlaceholderTable(this="%%" + node.name.lower()[2:], alias=node.args.get("alias"))
        return node

    return tree.transform(convert, copy=False)
