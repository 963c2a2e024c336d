"""Nodes of the canonical query tree that plain SQL has no node for, and the names they stand for.

Every stream language parses its queries into sqlglot trees with these nodes: ``5m`` is a
:class:`DurationLiteral`, ``_twstart`` a :class:`StreamPlaceholder`, ``FROM %%trows`` a
:class:`PlaceholderTable`, ``_c0`` a :class:`PseudoColumn`, and a window clause
(``INTERVAL(1m) SLIDING(30s)``) a :class:`WindowClause` on the SELECT. Translation (:mod:`.spark`)
binds or rewrites them; a language's generator writes them back as its own text.
"""

from __future__ import annotations

from sqlglot import exp

from airflow_stream_provider.model.events import StreamKind

#: placeholder name -> the trigger kinds that define it (reference 000, "Placeholders")
PLACEHOLDERS = {
    "_tprev_localtime": {StreamKind.PERIOD},
    "_tnext_localtime": {StreamKind.PERIOD},
    "_tprev_ts": {StreamKind.SLIDING},
    "_tcurrent_ts": {StreamKind.SLIDING},
    "_tnext_ts": {StreamKind.SLIDING},
    "_twstart": {StreamKind.WINDOW},
    "_twend": {StreamKind.WINDOW},
    "_twduration": {StreamKind.WINDOW},
    "_twrownum": {StreamKind.WINDOW},
    # IDLE and RESUME events (IDLE_TIMEOUT, TDengine 3.4.1): the group's idle span, processing time
    "_tidlestart": {StreamKind.WINDOW},
    "_tidleend": {StreamKind.WINDOW},
    "_tgrpid": {StreamKind.PERIOD, StreamKind.SLIDING, StreamKind.WINDOW},
    "_tlocaltime": {StreamKind.PERIOD, StreamKind.SLIDING, StreamKind.WINDOW},
    # ROLLUP BY (TDengine 3.4.2): the source subtables of the trigger's rollup group
    "_trollup_tbcount": {StreamKind.PERIOD, StreamKind.SLIDING, StreamKind.WINDOW},
}
#: the placeholders of ROLLUP BY streams (TDengine 3.4.2): the group's last path segment, its tables
ROLLUP_PLACEHOLDERS = ("%%rollup_tag", "_trollup_tbcount")
#: placeholders only defined when the window has closed
CLOSE_ONLY_PLACEHOLDERS = {"_twend", "_twduration", "_twrownum"}

PSEUDO_COLUMNS = {"_c0", "_rowts", "_wstart", "_wend", "_wduration", "_irowts", "_isfilled"}
REJECTED_PSEUDO_COLUMNS = {"_qstart", "_qend", "_qduration"}


class DurationLiteral(exp.Expression):
    """A duration literal such as ``5m``: ``this`` is the count, ``unit`` the letter."""

    arg_types = {"this": True, "unit": True}

    @property
    def count(self) -> int:
        return int(self.args["this"])

    @property
    def unit(self) -> str:
        return self.args["unit"]


class StreamPlaceholder(exp.Expression):
    """``_twstart``, ``%%tbname``, ``%%2``...: a value bound per trigger, never pasted as text."""

    arg_types = {"this": True}

    @property
    def name(self) -> str:
        return self.args["this"]


class PlaceholderTable(exp.Expression):
    """``%%trows`` or ``%%tbname`` used as a table in FROM: the sqlglot node for the rows of the
    window that fired, or for the trigger's subtable, until translation binds it to a real table."""

    arg_types = {"this": True, "alias": False}

    @property
    def name(self) -> str:
        return self.args["this"]


class PseudoColumn(exp.Expression):
    """``_c0``/``_rowts`` (the first column of the table) and ``_wstart``-style window columns."""

    arg_types = {"this": True}

    @property
    def name(self) -> str:
        return self.args["this"]


class PartitionClause(exp.Expression):
    """``PARTITION BY a, b`` after WHERE in a SELECT."""

    arg_types = {"expressions": True}


class WindowClause(exp.Expression):
    """A window clause of a SELECT: ``kind`` is INTERVAL, SESSION, STATE_WINDOW, EVENT_WINDOW or
    COUNT_WINDOW; ``expressions`` its arguments in order."""

    arg_types = {
        "kind": True,
        "expressions": False,
        "sliding": False,
        "fill": False,
        "start": False,
        "end": False,
        "true_for": False,
    }


def placeholders(tree: exp.Expr) -> set[str]:
    return {node.name for node in tree.find_all(StreamPlaceholder)}
