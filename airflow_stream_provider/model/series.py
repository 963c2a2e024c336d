"""Apache IoTDB's data model and statements: series named by paths, queries over path patterns,
continuous queries (reference 004; ``shared/reference/iotdb-semantics.md``).

A path is ``root.<database...>.<device...>.<measurement>``; its nodes keep their case (IoTDB names
are case-sensitive). A pattern may hold ``*`` (one node, or part of one: ``d*``) and ``**`` (one
or more nodes). A query's expressions name series by a suffix that is appended to each FROM prefix,
or by a full path starting with ``root``.

The node rule (IoTDB itself has none): a node is not empty, holds no control character (NUL among
them) and has at most :data:`NODE_MAX_BYTES` bytes in UTF-8, as a TDengine column name; a device
path, shown as :class:`SeriesPath` prints it, has at most :data:`DEVICE_MAX_BYTES`, the length of
the ``tbname`` that holds it in the devices table. Statements are checked where they are parsed,
and writes again, since ``::`` and ``${i}`` in INTO make devices from the data.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from enum import StrEnum

from airflow_stream_provider.model.names import shown
from airflow_stream_provider.model.time import Duration, TimePoint

#: a node that needs no backquotes when a path is shown
_PLAIN_NODE = re.compile(r"[A-Za-z_\u0080-\uffff][A-Za-z0-9_\u0080-\uffff]*|\*{1,2}|[A-Za-z0-9_]*\*[A-Za-z0-9_*]*")

ROOT = "root"
NODE_MAX_BYTES = 64
DEVICE_MAX_BYTES = 192

#: IoTDB's aggregate functions (reference 004 and its query pages), by their lower-case names
AGGREGATES = frozenset({
    "count", "sum", "avg", "extreme", "max_value", "min_value", "first_value", "last_value",
    "max_time", "min_time", "stddev", "stddev_pop", "stddev_samp", "variance", "var_pop", "var_samp",
})


class SeriesType(StrEnum):
    """The data types of a series (IoTDB 1.2)."""

    BOOLEAN = "BOOLEAN"
    INT32 = "INT32"
    INT64 = "INT64"
    FLOAT = "FLOAT"
    DOUBLE = "DOUBLE"
    TEXT = "TEXT"

    @property
    def numeric(self) -> bool:
        return self in (SeriesType.INT32, SeriesType.INT64, SeriesType.FLOAT, SeriesType.DOUBLE)


def node_problem(node: str) -> str | None:
    """What is wrong with ``node`` as a path node (the module's rule), or None."""
    if not node:
        return "is empty"
    bad = next((c for c in node if unicodedata.category(c) in ("Cc", "Cs")), None)
    if bad is not None:
        return f"contains {bad!r}, which a path node cannot hold"
    size = len(node.encode("utf-8", "surrogatepass"))
    if size > NODE_MAX_BYTES:
        return f"is {size} bytes long; a path node has at most {NODE_MAX_BYTES}"
    return None


def device_problem(device: SeriesPath) -> str | None:
    """What is wrong with the concrete ``device`` as a device path (a node, or its length), or None."""
    for node in device.nodes:
        problem = node_problem(node)
        if problem is not None:
            return f"its node {shown(node)} {problem}"
    size = len(str(device).encode("utf-8", "surrogatepass"))
    if size > DEVICE_MAX_BYTES:
        return (f"it is {size} bytes long; a device path has at most {DEVICE_MAX_BYTES} bytes (the devices "
                "table's tbname)")
    return None


def show_node(node: str) -> str:
    """A node as written in a path: backquoted when it is not a plain name or a wildcard."""
    return node if _PLAIN_NODE.fullmatch(node) else "`" + node.replace("`", "``") + "`"


@dataclass(frozen=True)
class SeriesPath:
    """A path or a path pattern: its nodes as written."""

    nodes: tuple[str, ...]

    def __str__(self) -> str:
        return ".".join(show_node(n) for n in self.nodes)

    @property
    def is_pattern(self) -> bool:
        return any("*" in n for n in self.nodes)

    @property
    def absolute(self) -> bool:
        return bool(self.nodes) and self.nodes[0].lower() == ROOT

    def child(self, *nodes: str) -> SeriesPath:
        return SeriesPath(self.nodes + nodes)

    @property
    def parent(self) -> SeriesPath:
        return SeriesPath(self.nodes[:-1])

    @property
    def last(self) -> str:
        return self.nodes[-1]

    def matches(self, path: SeriesPath | tuple[str, ...]) -> bool:
        """Whether the concrete ``path`` matches this pattern: ``*`` is one node (or, inside a node,
        any characters), ``**`` one or more nodes; names compare with their case."""
        return len(self.nodes) in self._states(path)

    def reaches_below(self, path: SeriesPath | tuple[str, ...]) -> bool:
        """Whether a path strictly under the concrete ``path`` can match this pattern
        (``root.ln.**`` and ``root.*.wf01.*`` reach below ``root.ln``)."""
        return any(k < len(self.nodes) for k in self._states(path))

    def _states(self, path: SeriesPath | tuple[str, ...]) -> set[int]:
        """The pattern positions reachable after reading the concrete nodes of ``path``: position
        ``k`` means the pattern's nodes before ``k`` have matched (a ``**`` at ``k`` may go on)."""
        states = {0}
        for node in path.nodes if isinstance(path, SeriesPath) else path:
            after: set[int] = set()
            for k in states:
                if k == len(self.nodes):
                    continue
                want = self.nodes[k]
                if want == "**":
                    after |= {k, k + 1}
                elif _node_matches(want, node):
                    after.add(k + 1)
            states = after
            if not states:
                break
        return states


def _node_matches(pattern: str, node: str) -> bool:
    if pattern == "*":
        return True
    if "*" not in pattern:
        return pattern == node
    return re.fullmatch(".*".join(re.escape(part) for part in pattern.split("*")), node, re.DOTALL) is not None


# --- expressions -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ref:
    """A series: a suffix of each FROM prefix, or a full path (``root...``)."""

    path: SeriesPath


@dataclass(frozen=True)
class Literal:
    """A constant; a time written as a timestamp or ``now()`` (± durations) is a :class:`TimePoint`."""

    value: int | float | str | bool | None | TimePoint


@dataclass(frozen=True)
class TimeRef:
    """``time`` (or ``timestamp``) in WHERE."""


@dataclass(frozen=True)
class Call:
    name: str  # lower case
    args: tuple[SeriesExpr, ...]
    #: ``key = 'value'`` attributes of a function call, as in ``top_k(s1, 'k'='2')``
    attributes: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Unary:
    op: str  # "-", "+", "NOT"
    operand: SeriesExpr


@dataclass(frozen=True)
class Binary:
    op: str  # + - * / % = != < <= > >= AND OR
    left: SeriesExpr
    right: SeriesExpr


@dataclass(frozen=True)
class Between:
    operand: SeriesExpr
    low: SeriesExpr
    high: SeriesExpr
    negated: bool = False


@dataclass(frozen=True)
class InList:
    operand: SeriesExpr
    values: tuple[SeriesExpr, ...]
    negated: bool = False


SeriesExpr = Ref | Literal | TimeRef | Call | Unary | Binary | Between | InList


def walk(expr: SeriesExpr):
    """Every node of ``expr``, the node first."""
    yield expr
    children: tuple[SeriesExpr, ...] = ()
    if isinstance(expr, Call):
        children = expr.args
    elif isinstance(expr, Unary):
        children = (expr.operand,)
    elif isinstance(expr, Binary):
        children = (expr.left, expr.right)
    elif isinstance(expr, Between):
        children = (expr.operand, expr.low, expr.high)
    elif isinstance(expr, InList):
        children = (expr.operand, *expr.values)
    for child in children:
        yield from walk(child)


# --- queries -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SelectItem:
    expr: SeriesExpr
    alias: str | None = None


@dataclass(frozen=True)
class GroupByTime:
    """``GROUP BY ([start, end), interval[, step])``; a continuous query has no range of its own."""

    interval: Duration
    step: Duration | None = None
    start: TimePoint | None = None
    end: TimePoint | None = None
    #: ``((start, end], ...)``: windows are (t, t + interval], labelled by their end
    left_open: bool = False

    @property
    def sliding(self) -> Duration:
        return self.step or self.interval


@dataclass(frozen=True)
class SeriesFill:
    """``FILL(PREVIOUS | LINEAR | constant)``."""

    method: str  # "previous" | "linear" | "constant"
    value: int | float | str | bool | None = None


@dataclass(frozen=True)
class IntoItem:
    """``[ALIGNED] device(measurement, ...)``: a device may hold ``::`` and ``${i}``; a measurement
    may be ``::`` or hold ``${i}``."""

    device: SeriesPath
    measurements: tuple[str, ...]
    aligned: bool = False


@dataclass(frozen=True)
class SeriesQuery:
    """An IoTDB SELECT."""

    items: tuple[SelectItem, ...]
    sources: tuple[SeriesPath, ...]
    where: SeriesExpr | None = None
    group_by: GroupByTime | None = None
    levels: tuple[int, ...] = ()
    having: SeriesExpr | None = None
    fill: SeriesFill | None = None
    limit: int | None = None
    offset: int = 0
    slimit: int | None = None
    soffset: int = 0
    align_by_device: bool = False
    descending: bool = False
    into: tuple[IntoItem, ...] = ()

    @property
    def aggregated(self) -> bool:
        return any(isinstance(node, Call) and node.name in AGGREGATES
                   for item in self.items for node in walk(item.expr))


@dataclass(frozen=True)
class SeriesCompute:
    """What a continuous query computes at each instant: its query over the instant's range, into
    the series its INTO names. Rides on ``CreateStream.series``."""

    query: SeriesQuery
    cq_id: str
