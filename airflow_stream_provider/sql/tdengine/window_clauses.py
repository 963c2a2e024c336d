"""The clauses of a trigger that read rows: a row expression, STATE_WINDOW with its keys, EXTEND and
ZEROTH_STATE, and TRUE_FOR, with positioned errors."""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from airflow_stream_provider import model as m
from airflow_stream_provider.sql.functions import reject_subqueries
from airflow_stream_provider.sql.grammar.lexer import Token
from airflow_stream_provider.sql.tdengine.literals import ValueParser


class WindowClauses(ValueParser):
    """Row expressions and the STATE_WINDOW and TRUE_FOR clauses of CREATE STREAM."""

    def row_expression(self, clause: str, stop: Callable[[], bool] = lambda: False) -> m.SqlExpression:
        """An expression computed for each row or group (a trigger condition, a filter, a tag, a
        subtable name): no subquery."""
        expr = self.expression(clause, stop)
        reject_subqueries(expr.tree, expr.text, expr.position, clause)
        return expr

    def state_window(self) -> m.StateWindow:
        """``STATE_WINDOW(k1[, k2 ...]) [EXTEND(n)] [ZEROTH_STATE(v1[, ...])] [TRUE_FOR(...)]`` (the keys,
        EXTEND and ZEROTH_STATE since TDengine 3.3.8 / 3.4.0), and the single-key form of TDengine
        3.3.6, ``STATE_WINDOW(k, extend[, zeroth])``."""
        self.advance()
        self.expect_op("(", "STATE_WINDOW")
        toks, keys = [self.tok], [self.row_expression("STATE_WINDOW")]
        while self.accept_op(","):
            toks.append(self.tok)
            keys.append(self.row_expression("STATE_WINDOW"))
        self.expect_op(")", "STATE_WINDOW")
        constant = [_constant(k.tree) for k in keys]
        extend = 0
        zeroth_values: tuple[m.Value, ...] | None = None
        if len(keys) in (2, 3) and not constant[0] and all(c is not None for c in constant[1:]):
            extend = self._extend_value(constant[1], toks[1])  # TDengine 3.3.6's STATE_WINDOW(k, extend[, zeroth])
            zeroth_values = (self._zeroth_value(constant[2], toks[2]),) if len(keys) == 3 else None
            keys, toks, constant = keys[:1], toks[:1], constant[:1]
            for word in ("EXTEND", "ZEROTH_STATE"):
                if self.at(word):
                    raise self.error(f"STATE_WINDOW(key, extend[, zeroth]) already gives {word}: write either that "
                                     f"form or STATE_WINDOW(key) {word}(...)", clause=word)
        for tok, key, c in zip(toks, keys, constant, strict=True):
            if c is not None or key.tree.find(exp.Column) is None:
                raise self.error(f"STATE_WINDOW key {key.text} is a constant: a key reads a column or a tag",
                                 tok, "STATE_WINDOW")
        seen: dict[str, str] = {}
        for tok, key in zip(toks, keys, strict=True):
            text = key.tree.sql().lower()
            if text in seen:
                raise self.error(f"STATE_WINDOW names the key {key.text} twice", tok, "STATE_WINDOW")
            seen[text] = key.text
        if self.at("EXTEND"):
            self.advance()
            self.expect_op("(", "EXTEND")
            tok = self.tok
            extend = self._extend_value(self.integer("EXTEND", "EXTEND"), tok)
            self.expect_op(")", "EXTEND")
        if self.at("ZEROTH_STATE"):
            zeroth_values = self.zeroth_state(len(keys))
        tf_tok = self.tok
        true_for = self.true_for()
        if true_for is not None and (true_for.start or true_for.end):
            raise self.error("TRUE_FOR(start(...)) and TRUE_FOR(end(...)) belong to EVENT_WINDOW; a STATE_WINDOW "
                             "takes TRUE_FOR(d), TRUE_FOR(COUNT n) or both", tf_tok, "TRUE_FOR")
        for word in ("EXTEND", "ZEROTH_STATE"):
            if self.at(word):
                raise self.error(f"{word} is out of place: STATE_WINDOW(...) takes EXTEND, ZEROTH_STATE and TRUE_FOR "
                                 "in that order", clause=word, syntax=True)
        return m.StateWindow(tuple(keys), true_for, extend, zeroth_values)

    def _extend_value(self, value: object, tok: Token) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or value not in m.STATE_EXTENDS:
            raise self.error(f"EXTEND must be 0, 1 or 2, found {tok.text}", tok, "EXTEND")
        return value

    def _zeroth_value(self, value: object, tok: Token) -> m.Value:
        if not isinstance(value, (int, str)):  # bool is an int
            raise self.error(f"ZEROTH_STATE takes integers, booleans, strings or NO_ZEROTH, found {tok.text}",
                             tok, "ZEROTH_STATE")
        return value

    def zeroth_state(self, keys: int) -> tuple[m.Value, ...]:
        """``ZEROTH_STATE(v1[, ...])``: one constant or ``NO_ZEROTH`` per key."""
        at = self.advance()
        self.expect_op("(", "ZEROTH_STATE")
        values: list[m.Value] = []
        while True:
            tok = self.tok
            if self.accept("NO_ZEROTH"):
                values.append(None)
            else:
                values.append(self._zeroth_value(self.literal("ZEROTH_STATE"), tok))
            if not self.accept_op(","):
                break
        self.expect_op(")", "ZEROTH_STATE")
        if len(values) != keys:
            raise self.error(f"ZEROTH_STATE gives {len(values)} values for {keys} STATE_WINDOW keys: give one per key "
                             "(NO_ZEROTH where a key takes no part)", at, "ZEROTH_STATE")
        if all(v is None for v in values):
            raise self.error("ZEROTH_STATE gives NO_ZEROTH for every key: leave it out", at, "ZEROTH_STATE")
        return tuple(values)

    def event_window(self) -> m.EventWindow:
        """``EVENT_WINDOW(START WITH c END WITH e) [TRUE_FOR(...)]``, and the sub-event window of
        TDengine 3.4.0, ``EVENT_WINDOW(START WITH (c1, c2[, ...]) [END WITH e]) [TRUE_FOR(...)]``."""
        self.advance()
        self.expect_op("(", "EVENT_WINDOW")
        self.expect("START", "WITH", clause="EVENT_WINDOW")
        start_index = self.i
        start = self.row_expression("EVENT_WINDOW START WITH", lambda: self.at("END", "WITH"))
        starts = [start]
        if isinstance(start.tree, exp.Tuple):  # (c1, c2, ...): read each condition with its own position
            self.i = start_index
            self.expect_op("(", "EVENT_WINDOW")
            starts = []
            while True:
                tok = self.tok
                condition = self.row_expression("EVENT_WINDOW START WITH")
                if isinstance(condition.tree, exp.Tuple) or condition.tree.find(exp.Tuple) is not None:
                    raise self.error("EVENT_WINDOW START WITH nests conditions (a condition tree, TDengine 3.4.2), "
                                     "which is not supported: list the conditions in one level, "
                                     "START WITH (c1, c2, ...)", tok, "EVENT_WINDOW")
                starts.append(condition)
                if not self.accept_op(","):
                    break
            self.expect_op(")", "EVENT_WINDOW START WITH")
            if not (self.at("END", "WITH") or self.at_op(")")):
                raise self.error(f"expected END WITH or ) after the START WITH conditions, found {self.tok.describe()}",
                                 clause="EVENT_WINDOW", syntax=True)
        end: m.SqlExpression | None = None
        if len(starts) == 1 or self.at("END", "WITH"):
            self.expect("END", "WITH", clause="EVENT_WINDOW")
            end = self.row_expression("EVENT_WINDOW END WITH")
        self.expect_op(")", "EVENT_WINDOW")
        true_for_tok = self.tok
        true_for = self.true_for()
        if len(starts) > 1 and true_for is not None and (true_for.start or true_for.end):
            raise self.error("TRUE_FOR start(...) and end(...) apply to an EVENT_WINDOW of one START WITH "
                             "condition only, not to sub-event windows (START WITH (c1, c2, ...))", true_for_tok,
                             "TRUE_FOR")
        return m.EventWindow(starts[0], end, true_for, tuple(starts[1:]))

    def true_for(self) -> m.TrueFor | None:
        """``TRUE_FOR(limit[, start(limit)][, end(limit)])``, the three in any order, each at most once
        (``start``/``end`` since TDengine 3.4.2)."""
        if not self.accept("TRUE_FOR"):
            return None
        self.expect_op("(", "TRUE_FOR")
        given: dict[str, m.TrueFor] = {}
        while True:
            tok = self.tok
            name = tok.upper.lower() if tok.upper in ("START", "END") and self.peek(1).text == "(" else "window"
            if name in given:
                what = "a window limit" if name == "window" else f"{name}(...)"
                raise self.error(f"TRUE_FOR gives {what} twice", tok, "TRUE_FOR")
            if name == "window":
                given[name] = self.limit()
            else:
                self.advance()
                self.expect_op("(", "TRUE_FOR")
                given[name] = self.limit()
                self.expect_op(")", "TRUE_FOR")
            if not self.accept_op(","):
                break
        self.expect_op(")", "TRUE_FOR")
        window = given.get("window", m.TrueFor())
        return m.TrueFor(window.duration, window.count, window.op, given.get("start"), given.get("end"))

    def limit(self) -> m.TrueFor:
        """``d``, ``COUNT n``, or both joined by AND or OR."""
        duration: m.Duration | None = None
        count: int | None = None
        op: str | None = None
        for index in range(2):
            if index == 1:
                if not (self.at("AND") or self.at("OR")):
                    break
                op = self.advance().upper
            tok = self.tok
            if self.accept("COUNT"):
                if count is not None:
                    raise self.error("TRUE_FOR gives COUNT twice", tok, "TRUE_FOR")
                count_tok = self.tok
                count = self.integer("TRUE_FOR COUNT", "TRUE_FOR")
                if count < 1:
                    raise self.error(f"TRUE_FOR COUNT must be at least 1, found {count}", count_tok, "TRUE_FOR")
            else:
                if duration is not None:
                    raise self.error("TRUE_FOR gives a duration twice", tok, "TRUE_FOR")
                duration = self.duration("TRUE_FOR")
        return m.TrueFor(duration, count, op)


def _constant(tree: exp.Expr) -> object | None:
    """The value of a key that is a plain constant (``1``, ``-1``, ``'a'``, ``TRUE``), else None."""
    if isinstance(tree, exp.Neg) and isinstance(tree.this, exp.Literal) and not tree.this.is_string:
        inner = _constant(tree.this)
        return -inner if isinstance(inner, (int, float)) else None
    if isinstance(tree, exp.Boolean):
        return bool(tree.this)
    if isinstance(tree, exp.Literal):
        if tree.is_string:
            return tree.this
        text = tree.this
        return int(text) if text.isdigit() else float(text)
    return None
