"""The tree rewriting of the batched query: ``SELECT ... FROM <triggers> t, LATERAL (<query>) q``.

Placeholders in WHERE/HAVING become correlated references to ``t``; select items that use
placeholders are split so that the placeholder part is evaluated beside the subquery and the data
part inside it (:func:`split`). A query this cannot batch raises :class:`Unbatchable`, and is then
computed per trigger.
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlglot import exp

from airflow_stream_provider.sql.ast import PseudoColumn, StreamPlaceholder
from airflow_stream_provider.sql.functions import AGGREGATES
from airflow_stream_provider.sql.tdengine.dialect import result_name
from airflow_stream_provider.streams.fired import column_of


class Unbatchable(Exception):
    """The query needs per-trigger evaluation; the message says why."""


def named(tree: exp.Expr) -> exp.Expr:
    """``tree`` with every top-level select item aliased by its TDengine name, so that a bound
    placeholder (a literal) keeps the name it was written with."""
    tree = tree.copy()
    select = tree if isinstance(tree, exp.Select) else None
    if select is None:
        return tree
    items = []
    for item in select.expressions:
        if isinstance(item, exp.Alias) or is_star(item):
            items.append(item)
        else:
            items.append(exp.alias_(item, result_name(item), quoted=True))
    select.set("expressions", items)
    return tree


def trigger_column(node: exp.Expr) -> exp.Expr:
    """A placeholder -> its column of the trigger row ``__t``; any other node as it is."""
    if isinstance(node, StreamPlaceholder):
        return exp.column(column_of(node.name), table="__t", quoted=True)
    return node


def is_star(item: exp.Expr) -> bool:
    """``*`` or ``t.*``."""
    return isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star))


def _is_aggregate_call(node: exp.Expr) -> bool:
    return isinstance(node, exp.Anonymous) and node.name.lower() in AGGREGATES


def split(items: list[exp.Expr]) -> tuple[list[exp.Expr], list[exp.Expr]]:
    """Select items -> (inside the lateral subquery, beside it).

    An item without placeholders is computed inside and passed through. An item with placeholders
    is computed beside the subquery from the trigger row, its placeholder-free parts that read data
    (``avg(v)`` in ``avg(v) * _twduration``) computed inside as hidden columns.
    """
    inner: list[exp.Expr] = []
    outer: list[exp.Expr] = []
    for i, item in enumerate(items):
        if is_star(item):
            inner.append(item.copy())
            outer.append(exp.Column(this=exp.Star(), table=exp.to_identifier("__q")))
            continue
        name = item.alias if isinstance(item, exp.Alias) else result_name(item)
        body = item.this if isinstance(item, exp.Alias) else item
        if body.find(StreamPlaceholder) is None:
            hidden = f"__c{i}"
            inner.append(exp.alias_(body.copy(), hidden, quoted=True))
            outer.append(exp.alias_(exp.column(hidden, table="__q", quoted=True), name, quoted=True))
            continue
        for ph in body.find_all(StreamPlaceholder):
            if any(_is_aggregate_call(a) for a in _ancestors(ph, body)):
                raise Unbatchable(f"placeholder {ph.name} is used inside an aggregate function")
        lifted: list[exp.Expr] = []

        def lift(node: exp.Expr, i: int = i, lifted: list[exp.Expr] = lifted) -> exp.Expr:
            if isinstance(node, StreamPlaceholder):
                return exp.column(column_of(node.name), table="__t", quoted=True)
            if node.find(StreamPlaceholder) is None and reads_data(node):
                hidden = f"__c{i}_{len(lifted)}"
                lifted.append(exp.alias_(node.copy(), hidden, quoted=True))
                return exp.column(hidden, table="__q", quoted=True)
            return node

        rewritten = body.copy().transform(lift)
        inner.extend(lifted)
        outer.append(exp.alias_(rewritten, name, quoted=True))
    return inner, outer


def _ancestors(node: exp.Expr, stop: exp.Expr) -> Iterator[exp.Expr]:
    parent = node.parent
    while parent is not None and parent is not stop.parent:
        yield parent
        parent = parent.parent


def reads_data(node: exp.Expr) -> bool:
    """Whether ``node`` reads the data (a column, a pseudo-column, a function, a subquery, ``*``)."""
    return any(isinstance(n, (exp.Column, PseudoColumn, exp.Anonymous, exp.Subquery, exp.Star))
               for n in node.walk())
