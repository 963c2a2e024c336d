"""The rules of a nested ``WINDOW(<trigger> AS w_outer, ..., <leaf>)`` (TDengine 3.4.2) that its
layers break in the text alone, as TDengine's window-plan validator states them.

An outer layer's windows must not overlap, so that every row belongs to at most one window of each
layer: INTERVAL with SLIDING equal to the interval, COUNT_WINDOW sliding by its count, STATE_WINDOW
with EXTEND(1) (a window reaches the next one) and without TRUE_FOR or ZEROTH_STATE, EVENT_WINDOW
without TRUE_FOR. Every outer layer is named, the names differ (ignoring case), and PERIOD is never
a layer.
"""

from __future__ import annotations

from sqlglot import exp

from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.sql.ast import StreamPlaceholder
from airflow_stream_provider.sql.grammar.lexer import Token

#: the types of :data:`~.model.NESTABLE`, which an :class:`~.model.OuterWindow` holds
OUTER_TYPES = (m.IntervalWindow, m.SlidingTrigger, m.SessionWindow, m.StateWindow, m.EventWindow, m.CountWindow)
#: the longest layer name TDengine keeps
NAME_MAX = 192


def _fail(message: str, tok: Token, hint: str | None = None) -> StreamDefinitionError:
    return StreamDefinitionError(message, line=tok.line, column=tok.column, clause="WINDOW", hint=hint)


def check_layer(trigger: m.Trigger, tok: Token, *, leaf: bool) -> None:
    """One layer, ``tok`` its first token: the types a layer may be, and what an outer one may not do."""
    if trigger.keyword not in m.NESTABLE:
        raise _fail(f"{trigger.keyword} cannot be a layer of WINDOW(...): a layer is INTERVAL, SLIDING, SESSION, "
                    "STATE_WINDOW, EVENT_WINDOW or COUNT_WINDOW", tok)
    if leaf:
        return
    what = f"the outer window {trigger}"
    if isinstance(trigger, m.IntervalWindow) and not _same_length(trigger.sliding, trigger.interval):
        raise _fail(f"{what} overlaps: an outer INTERVAL slides by its interval", tok,
                    hint=f"write INTERVAL({trigger.interval}) SLIDING({trigger.interval})")
    if isinstance(trigger, m.CountWindow) and trigger.sliding is not None and trigger.sliding < trigger.count:
        raise _fail(f"{what} overlaps: an outer COUNT_WINDOW slides by at least its count", tok,
                    hint=f"write COUNT_WINDOW({trigger.count})")
    if isinstance(trigger, m.StateWindow):
        if trigger.extend != 1:
            raise _fail(f"{what} needs EXTEND(1): an outer state window reaches to the next one", tok,
                        hint=f"write STATE_WINDOW({', '.join(map(str, trigger.keys))}) EXTEND(1)")
        if trigger.true_for is not None or trigger.zeroth is not None:
            raise _fail(f"{what}: an outer STATE_WINDOW takes no TRUE_FOR and no ZEROTH_STATE", tok)
    if isinstance(trigger, m.EventWindow) and trigger.true_for is not None:
        raise _fail(f"{what}: an outer EVENT_WINDOW takes no TRUE_FOR", tok)


def check_name(name: str, tok: Token, earlier: list[str]) -> None:
    """A layer's name: at most :data:`NAME_MAX` characters, and not one an earlier layer took."""
    if len(name) > NAME_MAX:
        raise _fail(f"window name {name[:20]}... is longer than {NAME_MAX} characters", tok)
    if name.lower() in (e.lower() for e in earlier):
        raise _fail(f"window name {name} is given to two layers", tok)


def check_layers(count: int, tok: Token) -> None:
    """How many layers: an outer one and a leaf at least, :data:`~.model.NESTED_MAX_LAYERS` at most."""
    if count < 2:
        raise _fail("WINDOW(...) nests windows: give an outer layer and a leaf, as in "
                    "WINDOW(INTERVAL(1h) SLIDING(1h) AS w_outer, COUNT_WINDOW(10))", tok)
    if count > m.NESTED_MAX_LAYERS:
        raise _fail(f"WINDOW(...) has {count} layers; at most {m.NESTED_MAX_LAYERS} (the leaf included)", tok)


def _same_length(a: m.Duration, b: m.Duration) -> bool:
    """Two durations of one length: as many months, or as many microseconds."""
    if a.is_calendar or b.is_calendar:
        return a.is_calendar and b.is_calendar and a.months == b.months
    return a.micros == b.micros


def layer_placeholder(name: str, depth: int) -> str:
    """The placeholder an outer layer's ``name._twstart`` binds as: ``_twstart@<depth>``, the layer's
    depth counted from the outermost (0)."""
    return f"{name}@{depth}"


def bind_layers(tree: exp.Expr, stmt: m.CreateStream) -> exp.Expr:
    """The query of a stream of nested windows with its layers' placeholders as placeholders: an
    outer layer's ``w_outer._twstart`` becomes :func:`layer_placeholder`, the leaf's ``w_leaf._twstart``
    plain ``_twstart`` (a copy; the validator checked every such reference)."""
    if not stmt.nested:
        return tree
    depths = {o.name.lower(): i for i, o in enumerate(stmt.outer_windows)}
    leaf = stmt.leaf_name.lower() if stmt.leaf_name else None

    def convert(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and node.table and not node.args.get("db"):
            layer, name = node.table.lower(), node.name.lower()
            if layer == leaf:
                return StreamPlaceholder(this=name)
            if layer in depths:
                return StreamPlaceholder(this=layer_placeholder(name, depths[layer]))
        return node

    return tree.copy().transform(convert)
