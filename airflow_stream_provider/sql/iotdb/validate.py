"""The rules of an IoTDB query and of a continuous query, and the lowering of ``CREATE CQ`` into the
stream model: a stream with a :class:`~airflow_stream_provider.model.ResampleTrigger` whose
computation is the query (``CreateStream.series``).

Continuous query rules (reference 004, IoTDB's ``CreateContinuousQueryStatement`` check): the body
has an INTO clause; its WHERE has no time filter and its GROUP BY no ``[start, end)`` (each
execution supplies its range); EVERY is given when there is no GROUP BY time; EVERY is at least the
configured minimum; the RANGE start offset is greater than the end offset and not below the GROUP
BY interval. A RANGE start below EVERY is allowed, as the reference's text says (its code refuses it).
"""

from __future__ import annotations

from datetime import UTC, datetime

from airflow_stream_provider import config
from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import did_you_mean
from airflow_stream_provider.model.names import CQ_NAMESPACE
from airflow_stream_provider.model.series import walk
from airflow_stream_provider.sql.grammar.cursor import TokenCursor
from airflow_stream_provider.sql.grammar.lexer import Token
from airflow_stream_provider.sql.iotdb.lexer import micros_duration, shown_duration

#: the scalar functions of a query, each a Spark SQL function of the same meaning
SCALAR_FUNCTIONS = {
    "sin": "sin", "cos": "cos", "tan": "tan", "asin": "asin", "acos": "acos", "atan": "atan", "sinh": "sinh",
    "cosh": "cosh", "tanh": "tanh", "degrees": "degrees", "radians": "radians", "abs": "abs", "sign": "signum",
    "ceil": "ceil", "floor": "floor", "round": "round", "exp": "exp", "ln": "ln", "log10": "log10", "sqrt": "sqrt",
    "length": "length", "upper": "upper", "lower": "lower", "trim": "trim",
}

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def check_query(p: TokenCursor, query: m.SeriesQuery, select: Token, items: list[Token]) -> None:
    """The rules of one query that need nothing but its text; ``select`` and ``items`` are where
    the query and each of its items start, for the errors' positions."""
    tok = select
    for item, at in zip(query.items, items, strict=True):
        _check_expression(p, item.expr, "SELECT", at)
    aggregated = query.aggregated
    if aggregated:
        raw = [at for item, at in zip(query.items, items, strict=True) if _has_raw_series(item.expr)]
        if raw:
            raise p.error("a SELECT cannot mix aggregates with raw series: aggregate every series, as "
                          "max_value(s1), count(s2)", raw[0], "SELECT")
    if query.group_by is not None and not aggregated:
        raise p.error("GROUP BY a time interval needs aggregates in the SELECT list, as max_value(temperature)",
                      tok, "GROUP BY")
    if query.levels and not aggregated:
        raise p.error("GROUP BY LEVEL needs aggregates in the SELECT list, as count(status)", tok, "GROUP BY")
    if query.having is not None and not aggregated:
        raise p.error("HAVING filters aggregated rows: the SELECT list needs aggregates", tok, "HAVING")
    group = query.group_by
    if group is not None and group.start is not None and group.end is not None and \
            not group.start.is_relative and not group.end.is_relative and group.start.at >= group.end.at:  # type: ignore[operator]
        raise p.error("the GROUP BY range is empty: its start must be before its end", tok, "GROUP BY")
    if query.into and (query.slimit is not None or query.soffset):
        raise p.error("SELECT ... INTO does not take SLIMIT or SOFFSET", tok, "INTO")
    if query.fill is not None and query.fill.method == "linear" and query.levels:
        raise p.error("FILL(LINEAR) does not apply to GROUP BY LEVEL results here", tok, "FILL")


def _has_raw_series(expr: m.SeriesExpr) -> bool:
    """Whether ``expr`` reads a series outside any aggregate."""
    if isinstance(expr, m.Ref):
        return True
    if isinstance(expr, m.Call) and expr.name in m.AGGREGATES:
        return False
    children: tuple = ()
    if isinstance(expr, m.Call):
        children = expr.args
    elif isinstance(expr, m.Unary):
        children = (expr.operand,)
    elif isinstance(expr, m.Binary):
        children = (expr.left, expr.right)
    return any(_has_raw_series(c) for c in children)


def _check_expression(p: TokenCursor, expr: m.SeriesExpr, clause: str, tok: Token) -> None:
    for node in walk(expr):
        if isinstance(node, m.Call):
            if node.name in m.AGGREGATES:
                if len(node.args) != 1:
                    raise p.error(f"{node.name} takes one series, found {len(node.args)} arguments", tok, clause)
                if any(isinstance(n, m.Call) and n.name in m.AGGREGATES for n in walk(node.args[0])):
                    raise p.error(f"{node.name} cannot hold another aggregate", tok, clause)
            elif node.name not in SCALAR_FUNCTIONS:
                known = sorted((*m.AGGREGATES, *SCALAR_FUNCTIONS))
                raise p.error(f"unknown function {node.name}", tok, clause,
                              hint=did_you_mean(node.name, known) or f"known: {', '.join(known)}")
        if isinstance(node, m.TimeRef) and clause == "SELECT":
            raise p.error("time is the Time column of every result: select series or expressions", tok, clause)


def lower_cq(p: TokenCursor, pos: m.Position, cq_id: str, every: int | None, boundary: m.TimePoint | int | None,
             start: int | None, end: int | None, policy: str, query: m.SeriesQuery, body: Token,
             tokens: dict, first: Token) -> m.CreateStream:
    """``CREATE CQ`` as a stream: its instants and range as a :class:`~airflow_stream_provider.model.ResampleTrigger`,
    its query as the computation. Every micro value is in microseconds."""
    if not query.into:
        raise p.error("the query of a continuous query needs an INTO clause: it writes its results into series",
                      body, "CREATE CQ")
    if query.where is not None and any(isinstance(n, m.TimeRef) for n in walk(query.where)):
        raise p.error("the WHERE of a continuous query cannot filter on time: each execution supplies its "
                      "own time range", _word_after(p, body, "WHERE") or body, "WHERE")
    group = query.group_by
    if group is not None and (group.start is not None or group.end is not None):
        raise p.error("the GROUP BY of a continuous query has no [start, end) range: write GROUP BY(interval"
                      "[, step]); each execution supplies its range", _word_after(p, body, "GROUP") or body,
                      "GROUP BY")
    if every is None and group is None:
        raise p.error("a continuous query without GROUP BY time needs RESAMPLE EVERY: at least one of EVERY "
                      "and the GROUP BY interval must be given", first, "RESAMPLE")
    every = every if every is not None else group.interval.micros  # type: ignore[union-attr]
    minimum = config.cq_min_every_micros()
    if every < minimum:
        raise p.error(f"EVERY {shown_duration(every)} is below the smallest allowed, {shown_duration(minimum)} "
                      "(AIRFLOW_STREAM_CQ_MIN_EVERY, in milliseconds)", tokens.get("EVERY", first), "RESAMPLE")
    start = start if start is not None else every
    end = end or 0
    if start <= end:
        raise p.error(f"RANGE's start offset ({shown_duration(start)}) must be greater than its end offset "
                      f"({shown_duration(end)})", tokens.get("RANGE", first), "RESAMPLE")
    if group is not None and group.interval.micros > start:
        raise p.error(f"the GROUP BY interval ({shown_duration(group.interval.micros)}) must not exceed RANGE's "
                      f"start offset ({shown_duration(start)})", tokens.get("RANGE", first), "RESAMPLE")
    boundary_micros = 0
    if isinstance(boundary, m.TimePoint):
        if boundary.at is None:
            raise p.error("BOUNDARY must be a fixed time (a timestamp or an epoch number in milliseconds): the "
                          "definition is read again whenever the query runs", tokens["BOUNDARY"], "RESAMPLE")
        delta = boundary.at - _EPOCH
        boundary_micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    elif isinstance(boundary, int):
        boundary_micros = boundary * 1000
    trigger = m.ResampleTrigger(every=micros_duration(every), start_offset=micros_duration(start),
                                end_offset=micros_duration(end) if end else m.Duration(0, "s"),
                                boundary=boundary_micros, policy=policy)
    return m.CreateStream(name=m.TableName(cq_id, db=CQ_NAMESPACE), trigger=trigger,
                          series=m.SeriesCompute(query, cq_id), position=pos, text="")


def _word_after(p: TokenCursor, start: Token, word: str) -> Token | None:
    """The first token ``word`` from ``start`` on, for an error's position."""
    index = p.toks.index(start)
    return next((t for t in p.toks[index:] if t.upper == word), None)
