"""A legacy CREATE STREAM lowered into the model every stream language shares.

The legacy statement puts the trigger inside its subquery: ``SELECT _wstart, avg(v) FROM t WHERE c
PARTITION BY tbname INTERVAL(10s) FILL(NULL)``. Lowered, that is the 3.3.7 shape:

- the window clause becomes the trigger (``INTERVAL(10s) SLIDING(10s)``, ``SESSION``, ...), and a
  subquery without one a :class:`~airflow_stream_provider.model.RowTrigger`;
- ``FROM t`` the trigger table, ``WHERE`` the trigger's ``PRE_FILTER``, ``PARTITION BY`` the groups
  (an expression groups by the columns it reads; its alias names a value for TAGS and SUBTABLE);
- the select list the computation, over ``%%trows``: ``_wstart``/``_wend``/``_wduration`` become
  ``_twstart``/``_twend``/``_twduration``, a PARTITION BY column outside aggregates its ``%%n``,
  and the window start is put first when the list does not start with it (the output's key);
- the options become :class:`~airflow_stream_provider.model.LegacyOptions`, which the runtime
  follows where this engine differs from 3.3.7.

Every rule the text shows is checked here, with the position of what breaks it.
"""

from __future__ import annotations

from sqlglot import exp

from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import StreamDefinitionError, did_you_mean
from airflow_stream_provider.model.time import CALENDAR_UNITS
from airflow_stream_provider.sql.ast import (
    DurationLiteral,
    PlaceholderTable,
    PseudoColumn,
    StreamPlaceholder,
    WindowClause,
    placeholders,
)
from airflow_stream_provider.sql.functions import AGGREGATES, check_functions, position_in, reject_subqueries
from airflow_stream_provider.sql.tdengine.dialect import TDengine, result_name
from airflow_stream_provider.sql.tdengine_legacy.streams import LegacySyntax

#: functions reference 003 forbids in stream computations
FORBIDDEN_FUNCTIONS = ("leastsquares", "percentile", "top", "bottom", "elapsed", "interp", "derivative", "irate",
                       "twa", "histogram", "diff", "statecount", "stateduration", "csum", "mavg", "sample", "tail",
                       "unique", "mode")
#: FILL modes a stream writes as its windows close (FORCE_WINDOW_CLOSE allows these, reference 003)
FILL_MODES = ("NONE", "NULL", "VALUE", "PREV")
MAX_DELAY_MIN = m.Duration(5, "s")
WINDOW_KEYWORDS = ("INTERVAL", "SESSION", "STATE_WINDOW", "EVENT_WINDOW", "COUNT_WINDOW", "PARTITION")
COUNT_MAX = 2**31 - 1
_WINDOW_PSEUDO = {"_wstart": "_twstart", "_wend": "_twend", "_wduration": "_twduration"}


def lower(syntax: LegacySyntax, pos: dict) -> m.CreateStream:
    """The model of a legacy CREATE STREAM; StreamDefinitionError at the place a rule is broken."""
    return _Lowering(syntax).statement(pos)


class _Lowering:
    def __init__(self, syntax: LegacySyntax) -> None:
        self.s = syntax
        self.query = syntax.query

    # --- errors ---------------------------------------------------------------------------------

    def fail(self, clause: str, message: str, at: str | None = None, hint: str | None = None) -> StreamDefinitionError:
        tok = self.s.where.get(at or clause) or self.s.where["CREATE STREAM"]
        return StreamDefinitionError(message, line=tok.line, column=tok.column, clause=clause, hint=hint)

    def fail_in(self, needle: str, clause: str, message: str, expr: m.SqlExpression | None = None,
                hint: str | None = None) -> StreamDefinitionError:
        """An error at the first ``needle`` in the subquery (or ``expr``)."""
        expr = expr or self.query
        line, column = position_in(needle, expr.text, expr.position)
        return StreamDefinitionError(message, line=line, column=column, clause=clause, hint=hint)

    # --- the statement --------------------------------------------------------------------------

    def statement(self, pos: dict) -> m.CreateStream:
        s = self.s
        select = self.select()
        window: WindowClause | None = select.args.get("td_window")
        keys, values = self.partition(select)
        trigger = self.trigger(window, select) if window is not None else m.RowTrigger()
        legacy, options = self.options(trigger, window, select)
        self.check_functions()
        if s.notify is not None and isinstance(trigger, m.RowTrigger):
            raise self.fail("NOTIFY", "NOTIFY needs a window: a stream without one has no window to open or close")
        if s.into is None and s.notify is None:
            raise self.fail("CREATE STREAM", "a stream needs INTO stb_name (or NOTIFY, to only send its windows)",
                            at="AS")
        if s.into is None and (s.columns or s.tags or s.subtable):
            raise self.fail("INTO", "column lists, TAGS and SUBTABLE describe the output table: add INTO stb_name")
        table = self.trigger_table(select)
        if s.into is not None and s.into.key(s.name.db) == table.key(s.name.db):
            raise self.fail("INTO", f"the output table {s.into} cannot be the trigger table")
        query = self.compute(select, trigger, keys)
        return m.CreateStream(
            name=s.name, trigger=trigger, if_not_exists=s.if_not_exists, trigger_table=table,
            partition_by=keys, options=options, notify=s.notify, into=s.into,
            output_subtable=self.subtable(keys, values), columns=s.columns, tags=self.tags(keys, values),
            query=query, legacy=legacy, **pos)

    def select(self) -> exp.Select:
        tree = self.query.tree
        if not isinstance(tree, exp.Select):
            raise self.fail("AS", "the subquery of a stream is one SELECT, not a set operation")
        for arg, clause in (("group", "GROUP BY"), ("having", "HAVING"), ("order", "ORDER BY"), ("limit", "LIMIT"),
                            ("offset", "OFFSET"), ("joins", "JOIN"), ("with_", "WITH"), ("distinct", "DISTINCT")):
            if tree.args.get(arg):
                raise self.fail_in(clause.split()[0], "AS", f"a stream's subquery cannot have {clause}")
        return tree

    def trigger_table(self, select: exp.Select) -> m.TableName:
        source = select.args.get("from_")
        table = source.this if source is not None else None
        if not isinstance(table, exp.Table) or isinstance(table, PlaceholderTable) or not table.name:
            raise self.fail_in("FROM", "AS", "a stream's subquery reads one table: FROM [db.]table")
        alias = table.args.get("alias")
        if alias is not None and alias.args.get("columns"):  # `FROM t intervl(10s)` reads as an alias
            word = alias.name
            raise self.fail_in(word, "AS", f"unexpected {word}(...) after FROM {table.name}",
                               hint=did_you_mean(word, WINDOW_KEYWORDS))
        return m.TableName(table.name, table.db or None)

    # --- PARTITION BY ---------------------------------------------------------------------------

    def partition(self, select: exp.Select) -> tuple[tuple[str, ...], dict[str, exp.Expr]]:
        """The grouping columns, and the value of each PARTITION BY item by its alias (and by its name,
        for a plain column). An expression groups by the columns it reads."""
        clause = select.args.get("td_partition")
        keys: list[str] = []
        values: dict[str, exp.Expr] = {}
        for item in clause.expressions if clause is not None else []:
            alias = item.alias if isinstance(item, exp.Alias) else None
            body = item.this if isinstance(item, exp.Alias) else item
            text = body.sql(dialect=TDengine)
            if body.find(StreamPlaceholder, PlaceholderTable, PseudoColumn) is not None or _has_aggregate(body):
                raise self.fail_in(text, "PARTITION BY", f"PARTITION BY {text}: group by columns, tags, tbname or "
                                                         "expressions of them, without aggregates")
            columns = [c.name for c in body.find_all(exp.Column)]
            if not columns:
                raise self.fail_in(text, "PARTITION BY", f"PARTITION BY {text} reads no column, so it makes one "
                                                         "group: leave it out")
            for name in columns:
                if name.lower() not in (k.lower() for k in keys):
                    keys.append(name)
            if isinstance(body, exp.Column):
                values.setdefault(body.name.lower(), body)
            if alias:
                if alias.lower() in values and not isinstance(body, exp.Column):
                    raise self.fail_in(alias, "PARTITION BY", f"PARTITION BY alias {alias} is given twice")
                values[alias.lower()] = body
        return tuple(keys), values

    # --- the window -----------------------------------------------------------------------------

    def trigger(self, window: WindowClause, select: exp.Select) -> m.Trigger:
        kind = window.args["kind"]
        args = list(window.args.get("expressions") or [])
        if window.args.get("true_for") is not None:
            raise self.fail_in("TRUE_FOR", kind, "TRUE_FOR belongs to TDengine 3.3.7; write the stream in that "
                                                 "form (STATE_WINDOW(...) TRUE_FOR(...) FROM t ...)")
        if kind == m.TriggerKind.INTERVAL:
            if not 1 <= len(args) <= 2:
                raise self.fail_in("INTERVAL", "INTERVAL", "INTERVAL takes (interval[, offset])")
            interval = self.duration(args[0], "INTERVAL")
            offset = self.duration(args[1], "INTERVAL offset") if len(args) == 2 else None
            sliding_arg = window.args.get("sliding")
            sliding = self.duration(sliding_arg, "SLIDING") if sliding_arg is not None else interval
            if sliding.micros > interval.micros:
                raise self.fail_in("SLIDING", "SLIDING", f"SLIDING({sliding}) must not be longer than "
                                                         f"INTERVAL({interval})")
            if offset is not None and offset.micros >= interval.micros:
                raise self.fail_in("INTERVAL", "INTERVAL", f"the offset {offset} must be shorter than the interval "
                                                           f"{interval}")
            return m.IntervalWindow(interval, sliding, offset)
        if kind == m.TriggerKind.SESSION:
            if len(args) != 2 or not isinstance(args[0], exp.Column):
                raise self.fail_in("SESSION", "SESSION", "SESSION takes (timestamp column, gap)")
            return m.SessionWindow(args[0].name, self.duration(args[1], "SESSION"))
        if kind == m.TriggerKind.STATE_WINDOW:
            if len(args) != 1:
                raise self.fail_in("STATE_WINDOW", "STATE_WINDOW", "STATE_WINDOW takes one column or expression")
            return m.StateWindow((self.expression(args[0], "STATE_WINDOW"),))
        if kind == m.TriggerKind.EVENT_WINDOW:
            return m.EventWindow(self.expression(window.args["start"], "EVENT_WINDOW"),
                                 self.expression(window.args["end"], "EVENT_WINDOW"))
        if not 1 <= len(args) <= 2:
            raise self.fail_in("COUNT_WINDOW", "COUNT_WINDOW", "COUNT_WINDOW takes (count[, sliding])")
        count = self.whole(args[0], "COUNT_WINDOW")
        if not 2 <= count <= COUNT_MAX:
            raise self.fail_in("COUNT_WINDOW", "COUNT_WINDOW", f"COUNT_WINDOW count must be at least 2 and less than "
                                                               f"2147483648, found {count}")
        sliding_count = self.whole(args[1], "COUNT_WINDOW") if len(args) == 2 else None
        if sliding_count is not None and not 1 <= sliding_count <= count:
            raise self.fail_in("COUNT_WINDOW", "COUNT_WINDOW", f"COUNT_WINDOW sliding must be between 1 and the count "
                                                               f"{count}, found {sliding_count}")
        return m.CountWindow(count, sliding_count)

    def duration(self, node: exp.Expr, clause: str) -> m.Duration:
        text = node.sql(dialect=TDengine)
        if not isinstance(node, DurationLiteral):
            raise self.fail_in(text, clause, f"{clause} needs a duration such as 10s, not {text}")
        if node.unit in CALENDAR_UNITS or node.unit == "b":
            raise self.fail_in(text, clause, f"{clause}({text}) needs a fixed length in u, a, s, m, h, d or w")
        if node.count <= 0:
            raise self.fail_in(text, clause, f"{clause} must be positive, found {text}")
        return m.Duration(node.count, node.unit)

    def whole(self, node: exp.Expr, clause: str) -> int:
        if not (isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit()):
            raise self.fail_in(clause, clause, f"{clause} needs a whole number, not {node.sql(dialect=TDengine)}")
        return int(node.this)

    def expression(self, node: exp.Expr, clause: str) -> m.SqlExpression:
        """The trigger's condition or filter at ``node``: computed for each row, so no subquery."""
        text = node.sql(dialect=TDengine)
        line, column = position_in(text, self.query.text, self.query.position)
        at = m.Position(line, column) if line is not None and column is not None else self.query.position
        reject_subqueries(node, text, at, clause)
        return m.SqlExpression(text, node.copy(), at, frozenset(placeholders(node)))

    # --- options --------------------------------------------------------------------------------

    def options(self, trigger: m.Trigger, window: WindowClause | None,
                select: exp.Select) -> tuple[m.LegacyOptions, m.StreamOptions]:
        given = self.s.options
        chosen: dict = given.get("TRIGGER") or {"mode": m.TriggerMode.WINDOW_CLOSE}
        mode: m.TriggerMode = chosen["mode"]
        history: dict = given.get("FILL_HISTORY") or {"on": False}
        fill = self.fill(window)
        legacy = m.LegacyOptions(
            trigger=mode, max_delay=chosen.get("max_delay"), recalculate=chosen.get("recalculate"),
            ignore_expired=bool(given.get("IGNORE EXPIRED", True)),
            ignore_update=bool(given.get("IGNORE UPDATE", True)),
            delete_mark=given.get("DELETE_MARK"),
            fill_history_async=bool(history.get("async")), fill=fill, given=frozenset(given))
        self.check_mode(legacy, trigger, window, history)
        where = select.args.get("where")
        pre_filter = self.expression(where.this, "WHERE") if where is not None else None
        options = m.StreamOptions(
            watermark=given.get("WATERMARK"),
            fill_history=m.FillHistory() if history["on"] else None, pre_filter=pre_filter,
            ignore_nodata_trigger=fill is None or fill.mode == "NONE")
        return legacy, options

    def fill(self, window: WindowClause | None) -> m.Fill | None:
        node = window.args.get("fill") if window is not None else None
        if node is None:
            return None
        items = node.expressions if isinstance(node, exp.Tuple) else [node]
        mode = "NULL" if isinstance(items[0], exp.Null) else items[0].name.upper()
        if mode not in FILL_MODES:
            hint = "LINEAR and NEXT need the window after, which a stream has not seen when it writes" \
                if mode in ("LINEAR", "NEXT") else None
            raise self.fail_in("FILL", "FILL", f"FILL({mode}) is not supported in a stream; use NULL, VALUE, PREV "
                                               "or NONE", hint=hint)
        values: list[m.Value] = []
        for item in items[1:]:
            negative = isinstance(item, exp.Neg)
            lit = item.this if negative else item
            if not isinstance(lit, exp.Literal):
                raise self.fail_in("FILL", "FILL",
                                   f"FILL(VALUE, ...) takes constants, not {item.sql(dialect=TDengine)}")
            value: m.Value = lit.this if lit.is_string else (float(lit.this) if "." in lit.this or "e" in
                                                             lit.this.lower() else int(lit.this))
            values.append(-value if negative and isinstance(value, (int, float)) else value)
        if (mode == "VALUE") != bool(values):
            raise self.fail_in("FILL", "FILL", "FILL(VALUE, v, ...) takes its values, and only VALUE takes any")
        aggregates = [item for item in self.query.tree.expressions if _has_aggregate(item)]
        if mode == "VALUE" and len(values) != len(aggregates):
            raise self.fail_in("FILL", "FILL", f"FILL(VALUE, ...) takes one value per aggregate of the select list "
                                               f"({len(aggregates)}), found {len(values)}")
        return m.Fill(mode, tuple(values))

    def check_mode(self, legacy: m.LegacyOptions, trigger: m.Trigger, window: WindowClause | None,
                   history: dict) -> None:
        mode, given = legacy.trigger, self.s.options
        if legacy.max_delay is not None and legacy.max_delay.micros < MAX_DELAY_MIN.micros:
            raise self.fail("TRIGGER", f"MAX_DELAY {legacy.max_delay} is below the minimum of 5s")
        if history.get("async") and not history["on"]:
            raise self.fail("FILL_HISTORY", "ASYNC applies to FILL_HISTORY 1 only", at="ASYNC")
        if isinstance(trigger, m.RowTrigger):
            if mode not in (m.TriggerMode.AT_ONCE, m.TriggerMode.WINDOW_CLOSE):
                raise self.fail("TRIGGER", f"TRIGGER {mode} needs a window; a stream without one writes every row "
                                           "at once")
            return
        if mode is m.TriggerMode.FORCE_WINDOW_CLOSE:
            if not isinstance(trigger, m.IntervalWindow) or trigger.sliding != trigger.interval:
                raise self.fail("TRIGGER", "FORCE_WINDOW_CLOSE supports INTERVAL windows only, without SLIDING")
            for option, value in (("FILL_HISTORY", False), ("IGNORE EXPIRED", True), ("IGNORE UPDATE", True)):
                if option in given and bool(history["on"] if option == "FILL_HISTORY" else given[option]) != value:
                    raise self.fail(option, f"FORCE_WINDOW_CLOSE needs {option} {int(value)}")
        if isinstance(trigger, m.CountWindow) and not legacy.ignore_expired:
            raise self.fail("IGNORE EXPIRED", "COUNT_WINDOW needs IGNORE EXPIRED 1: a late row cannot move the rows "
                                              "of count windows already counted")
        if mode is m.TriggerMode.CONTINUOUS_WINDOW_CLOSE and not isinstance(trigger, m.IntervalWindow):
            raise self.fail("TRIGGER", "CONTINUOUS_WINDOW_CLOSE supports INTERVAL windows only")
        if "RECALCULATE" in self.s.where and mode is not m.TriggerMode.CONTINUOUS_WINDOW_CLOSE:
            raise self.fail("RECALCULATE", "RECALCULATE belongs to TRIGGER CONTINUOUS_WINDOW_CLOSE")

    def check_functions(self) -> None:
        for call in self.query.tree.find_all(exp.Anonymous):
            if call.name.lower() in FORBIDDEN_FUNCTIONS:
                raise self.fail_in(call.name, "AS", f"function {call.name.upper()} cannot be used in a stream "
                                                    "(reference 003 forbids 19 functions in stream computations: "
                                                    f"{', '.join(FORBIDDEN_FUNCTIONS)})")
        check_functions(self.query.tree, self.query.text, self.query.position, "AS")

    # --- the computation ------------------------------------------------------------------------

    def compute(self, select: exp.Select, trigger: m.Trigger, keys: tuple[str, ...]) -> m.SqlExpression:
        """The select list as a computation over ``%%trows``, each item named as TDengine names it."""
        windowed = not isinstance(trigger, m.RowTrigger)
        key_of = {k.lower(): i for i, k in enumerate(keys, start=1)}
        seen: set[str] = set()
        items: list[exp.Expr] = []
        for item in select.expressions:
            if isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star)):
                if windowed:
                    raise self.fail_in("*", "AS", "SELECT * cannot be computed per window: name the aggregates")
                items.append(item.copy())
                continue
            name = result_name(item)
            if name.lower() in seen:
                raise self.fail_in(name, "AS", f"the subquery selects {name} twice; name each column once "
                                               "(an alias: AS other_name)")
            seen.add(name.lower())
            body = (item.this if isinstance(item, exp.Alias) else item).copy()
            items.append(exp.alias_(self.rewrite(body, windowed, key_of), name, quoted=True))
        first = select.expressions[0] if select.expressions else None
        first_body = first.this if isinstance(first, exp.Alias) else first
        if windowed and not (isinstance(first_body, PseudoColumn) and first_body.name == "_wstart"):
            items.insert(0, exp.alias_(StreamPlaceholder(this="_twstart"), "_wstart", quoted=True))
        source = select.args["from_"].this
        tree = exp.select(*items).from_(PlaceholderTable(this="%%trows", alias=source.args.get("alias")))
        return m.SqlExpression(tree.sql(dialect=TDengine), tree, self.query.position, frozenset(placeholders(tree)))

    def rewrite(self, body: exp.Expr, windowed: bool, key_of: dict[str, int]) -> exp.Expr:
        def convert(node: exp.Expr) -> exp.Expr:
            if isinstance(node, PseudoColumn):
                if node.name in _WINDOW_PSEUDO:
                    if not windowed:
                        raise self.fail_in(node.name, "AS", f"{node.name} needs a window clause")
                    return StreamPlaceholder(this=_WINDOW_PSEUDO[node.name])
                if node.name not in ("_c0", "_rowts"):
                    raise self.fail_in(node.name, "AS", f"pseudo-column {node.name} is not supported in stream queries")
                return node
            if windowed and isinstance(node, exp.Column) and not node.table and node.name.lower() in key_of and \
                    not _inside_aggregate(node):
                return StreamPlaceholder(this=f"%%{key_of[node.name.lower()]}")
            return node

        return body.transform(convert)

    # --- the output -----------------------------------------------------------------------------

    def group_value(self, name: str, keys: tuple[str, ...], values: dict[str, exp.Expr],
                    expr: m.SqlExpression) -> exp.Expr:
        found = values.get(name.lower())
        if found is None:
            where = f"the PARTITION BY items ({', '.join(keys)})" if keys else "PARTITION BY items"
            raise self.fail_in(name, "SUBTABLE", f"SUBTABLE: {name} is not a PARTITION BY item; SUBTABLE takes "
                                                 f"its values from {where} and their aliases", expr=expr)
        return found

    def tags(self, keys: tuple[str, ...], values: dict[str, exp.Expr]) -> tuple[m.TagDefinition, ...]:
        """TAGS take the values of the PARTITION BY items of the same name (an alias, or a column);
        a tag no item names is NULL, as in TDengine (udTableAndTag2.sim)."""
        out = []
        for tag in self.s.tags:
            value = values.get(tag.name.lower(), exp.Null())
            text = value.sql(dialect=TDengine)
            out.append(m.TagDefinition(tag.name, tag.type, m.SqlExpression(text, value.copy()), tag.comment))
        return tuple(out)

    def subtable(self, keys: tuple[str, ...], values: dict[str, exp.Expr]) -> m.SqlExpression | None:
        expr = self.s.subtable
        if expr is None:
            return None
        if expr.tree.find(StreamPlaceholder, PlaceholderTable, PseudoColumn) is not None:
            raise self.fail("SUBTABLE", "SUBTABLE takes an expression of PARTITION BY items")
        check_functions(expr.tree, expr.text, expr.position, "SUBTABLE")

        def resolve(node: exp.Expr) -> exp.Expr:
            if isinstance(node, exp.Column) and not node.table:
                return self.group_value(node.name, keys, values, expr).copy()
            return node

        tree = expr.tree.copy().transform(resolve)
        return m.SqlExpression(tree.sql(dialect=TDengine), tree, expr.position)


def _has_aggregate(node: exp.Expr) -> bool:
    return any(isinstance(n, exp.Anonymous) and n.name.lower() in AGGREGATES for n in node.walk())


def _inside_aggregate(node: exp.Expr) -> bool:
    parent = node.parent
    while parent is not None:
        if isinstance(parent, exp.Anonymous) and parent.name.lower() in AGGREGATES:
            return True
        parent = parent.parent
    return False
