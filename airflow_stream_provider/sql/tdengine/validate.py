"""Rules of reference 000 that a CREATE STREAM breaks visibly in its text alone."""

from __future__ import annotations

from sqlglot import exp

from airflow_stream_provider import config
from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.sql.ast import (
    CLOSE_ONLY_PLACEHOLDERS,
    PLACEHOLDERS,
    REJECTED_PSEUDO_COLUMNS,
    ROLLUP_PLACEHOLDERS,
    PlaceholderTable,
    PseudoColumn,
    StreamPlaceholder,
)
from airflow_stream_provider.sql.functions import check_functions, position_in
from airflow_stream_provider.sql.grammar.lexer import Token

DAY_MICROS = 86_400_000_000
PERIOD_MIN = m.Duration(10, "a")
PERIOD_MAX = m.Duration(3650, "d")
MAX_DELAY_MIN = m.Duration(3, "s")
#: IDLE_TIMEOUT's range and units (TDengine 3.4.1)
IDLE_TIMEOUT_MIN = m.Duration(1, "s")
IDLE_TIMEOUT_MAX = m.Duration(10, "d")
IDLE_TIMEOUT_UNITS = ("a", "s", "m", "h", "d")
IDLE_EVENTS = (m.EventType.IDLE, m.EventType.RESUME)
#: the placeholders of IDLE and RESUME computations, and those of window events they cannot use
IDLE_PLACEHOLDERS = {"_tidlestart", "_tidleend"}
WINDOW_BOUND_PLACEHOLDERS = {"_twstart", "_twend", "_twduration", "_twrownum"}
#: the triggers ROLLUP BY groups (TDengine 3.4.2); state, event and count windows group by subtable only
ROLLUP_TRIGGERS = (m.PeriodTrigger, m.SlidingTrigger, m.IntervalWindow, m.SessionWindow)


class _Checker:
    def __init__(self, stmt: m.CreateStream, where: dict[str, Token]) -> None:
        self.stmt = stmt
        self.where = where

    @property
    def semantics(self) -> str:
        """The TDengine version whose behaviour the stream follows: its SEMANTICS option, else the home's."""
        return self.stmt.options.semantics or config.tdengine_semantics()

    def fail(self, clause: str, message: str, hint: str | None = None, at: str | None = None) -> None:
        tok = self.where.get(at or clause) or self.where.get("trigger") or self.where["CREATE STREAM"]
        raise StreamDefinitionError(message, line=tok.line, column=tok.column, clause=clause, hint=hint)

    def fail_in(self, expr: m.SqlExpression, needle: str, clause: str, message: str) -> None:
        """Fail at the first occurrence of ``needle`` inside ``expr``'s text."""
        line, column = position_in(needle, expr.text, expr.position)
        if line is None:
            self.fail(clause, message)
        raise StreamDefinitionError(message, line=line, column=column, clause=clause)


def validate_create_stream(stmt: m.CreateStream, where: dict[str, Token]) -> None:
    c = _Checker(stmt, where)
    _check_rollup(c)  # before the trigger's own rules: ROLLUP BY's need of FROM is the sharper message
    _check_trigger(c)
    _check_options(c)
    _check_notify(c)
    _check_output(c)
    _check_query(c)
    _check_nested(c)


def _check_trigger(c: _Checker) -> None:
    trig, stmt = c.stmt.trigger, c.stmt
    if isinstance(trig, m.PeriodTrigger):
        if trig.period.is_calendar:
            _check_calendar(c, "PERIOD", trig.period, trig.offset)
        elif not PERIOD_MIN.micros <= trig.period.micros <= PERIOD_MAX.micros:
            c.fail("PERIOD", f"period {trig.period} is outside the allowed range [10a, 3650d]", at="trigger")
        elif trig.offset and trig.offset.micros >= DAY_MICROS:
            _check_long_offset(c, "PERIOD", trig.period, trig.offset)
        if stmt.partition_by and stmt.trigger_table is None:
            c.fail("PARTITION BY", "PARTITION BY needs a trigger table (FROM)")
    elif stmt.trigger_table is None:
        label = trig.keyword
        c.fail(label, f"{label} triggers need a trigger table: add FROM [db.]table", at="trigger")
    if isinstance(trig, m.SlidingTrigger) and trig.sliding.is_calendar:
        _check_calendar(c, "SLIDING", trig.sliding, trig.offset)
    elif isinstance(trig, m.SlidingTrigger) and trig.offset and trig.offset.micros >= DAY_MICROS:
        _check_long_offset(c, "SLIDING", trig.sliding, trig.offset)
    if isinstance(trig, m.IntervalWindow) and (trig.interval.is_calendar or trig.sliding.is_calendar):
        _check_calendar_interval(c, trig)
    elif isinstance(trig, m.IntervalWindow):
        if trig.sliding.micros > trig.interval.micros:
            c.fail("SLIDING", f"sliding {trig.sliding} must not be greater than interval {trig.interval}", at="trigger")
        if trig.offset and trig.offset.micros >= trig.interval.micros:
            c.fail("INTERVAL", f"offset {trig.offset} must be less than interval {trig.interval}", at="trigger")


def _check_rollup(c: _Checker) -> None:
    """ROLLUP BY tag (TDengine 3.4.2): PERIOD, SLIDING, INTERVAL and SESSION triggers only, always with
    FROM; its placeholders only with it, and ``_trollup_tbcount`` only in the computation."""
    stmt = c.stmt
    if stmt.rollup_by is None:
        for part, clause in _rollup_parts(stmt):
            for node in part.tree.find_all(StreamPlaceholder):
                if node.name in ROLLUP_PLACEHOLDERS:
                    c.fail_in(part, node.name, clause, f"{node.name}: rollup placeholders require ROLLUP BY tag")
        return
    if not isinstance(stmt.trigger, ROLLUP_TRIGGERS):
        c.fail("ROLLUP BY", f"ROLLUP BY groups PERIOD, SLIDING, INTERVAL and SESSION triggers, not "
                            f"{stmt.trigger.keyword} (state, event and count windows group by subtable: "
                            "PARTITION BY tbname)")
    if stmt.trigger_table is None:
        c.fail("ROLLUP BY", "ROLLUP BY requires explicit FROM: the supertable whose tag it rolls up, even for "
                            "PERIOD triggers")
    for part, clause in _rollup_parts(stmt)[1:]:
        for node in part.tree.find_all(StreamPlaceholder):
            if node.name == "_trollup_tbcount":
                c.fail_in(part, node.name, clause, f"_trollup_tbcount counts the tables of one trigger; it can be "
                                                   f"used only in the computation (AS), not in {clause}")


def _rollup_parts(stmt: m.CreateStream) -> list[tuple[m.SqlExpression, str]]:
    """The computation, OUTPUT_SUBTABLE and TAGS expressions of ``stmt``, each with its clause."""
    parts = [(stmt.query, "AS"), (stmt.output_subtable, "OUTPUT_SUBTABLE"), *((t.expr, "TAGS") for t in stmt.tags)]
    return [(part, clause) for part, clause in parts if part is not None]


#: the largest count of each calendar unit (TDengine 3.4.1: 120 months, 10 years)
CALENDAR_MAX = {"n": 120, "q": 40, "y": 10}
#: an offset of a calendar period stays within its shortest month: 28 days a month
SHORTEST_MONTH_MICROS = 28 * DAY_MICROS


def _check_calendar(c: _Checker, clause: str, period: m.Duration, offset: m.Duration | None) -> None:
    """A period in months, quarters or years (TDengine 3.4.1): at most 10 years, and an offset in
    days or less, shorter than the shortest span the period can have (28 days a month)."""
    if period.count > CALENDAR_MAX[period.unit]:
        c.fail(clause, f"{clause.lower()} {period} is longer than the largest of {CALENDAR_MAX[period.unit]}"
               f"{period.unit} (10 years)", at="trigger")
    if offset is None:
        return
    if offset.unit == "w":
        c.fail(clause, f"offset {offset} of a calendar {clause.lower()} must be written in days or less (d, h, m, s, "
               "a)", at="trigger")
    if offset.micros >= period.months * SHORTEST_MONTH_MICROS:
        c.fail(clause, f"offset {offset} must be less than {period.months * 28}d, the shortest {period} can be",
               at="trigger")


def _check_calendar_interval(c: _Checker, trig: m.IntervalWindow) -> None:
    """INTERVAL windows with months, quarters or years (TDengine 3.4.1): the calendar limits of
    each part, a SLIDING no longer than the interval (both in months, or a fixed step under the
    shortest month), and an offset under the shortest the interval can be."""
    if trig.interval.is_calendar:
        _check_calendar(c, "INTERVAL", trig.interval, trig.offset)
    elif trig.offset and trig.offset.micros >= trig.interval.micros:
        c.fail("INTERVAL", f"offset {trig.offset} must be less than interval {trig.interval}", at="trigger")
    if trig.sliding.is_calendar:
        _check_calendar(c, "SLIDING", trig.sliding, None)
    if trig.sliding.is_calendar and not trig.interval.is_calendar:
        c.fail("SLIDING", f"sliding {trig.sliding} must not be greater than interval {trig.interval}: a calendar "
               "sliding needs an interval in months, quarters or years", at="trigger")
    if trig.sliding.is_calendar and trig.sliding.months > trig.interval.months:
        c.fail("SLIDING", f"sliding {trig.sliding} must not be greater than interval {trig.interval}", at="trigger")
    if not trig.sliding.is_calendar and trig.sliding.micros > trig.interval.months * SHORTEST_MONTH_MICROS:
        c.fail("SLIDING", f"sliding {trig.sliding} must not be greater than interval {trig.interval} (at least "
               f"{trig.interval.months * 28}d)", at="trigger")


def _check_long_offset(c: _Checker, clause: str, period: m.Duration, offset: m.Duration) -> None:
    """An offset of a day or more: TDengine 3.4 takes one shorter than a period of whole weeks
    (``PERIOD(1w, 1d)``, Tuesdays); 3.3.7 takes none."""
    weeks = period.unit == "w" and offset.unit != "w"
    if weeks and c.semantics == "3.4" and offset.micros < period.micros:
        return
    if weeks and offset.micros < period.micros:
        c.fail(clause, f"offset {offset} must be less than 1 day under TDengine 3.3.7's semantics", at="trigger",
               hint="add SEMANTICS('3.4') to STREAM_OPTIONS: 3.4 aligns weeks to Mondays and takes an offset under "
                    "the period")
    limit = "the period" if weeks else "1 day"
    c.fail(clause, f"offset {offset} must be less than {limit}", at="trigger")


def _check_options(c: _Checker) -> None:
    opts, trig = c.stmt.options, c.stmt.trigger
    window = m.STREAM_KINDS[trig.keyword] is m.StreamKind.WINDOW
    given = opts.given
    if opts.max_delay and opts.max_delay.micros < MAX_DELAY_MIN.micros:
        c.fail("MAX_DELAY", f"MAX_DELAY({opts.max_delay}) is below the minimum of 3s")
    _check_idle(c, window)
    if opts.fill_history and isinstance(trig, m.PeriodTrigger):
        name = "FILL_HISTORY_FIRST" if opts.fill_history.first else "FILL_HISTORY"
        c.fail(name, f"{name} is not supported with PERIOD triggers (they run on wall-clock time)")
    not_for_period = {"WATERMARK": "WATERMARK does not apply to PERIOD triggers",
                      "EXPIRED_TIME": "EXPIRED_TIME does not apply to PERIOD triggers",
                      "IGNORE_DISORDER": "IGNORE_DISORDER does not apply to PERIOD triggers"}
    if isinstance(trig, m.PeriodTrigger):
        for name, message in not_for_period.items():
            if name in given:
                c.fail(name, message)
    if not window:
        for name in ("MAX_DELAY", "EVENT_TYPE"):
            if name in given:
                c.fail(name, f"{name} applies to window triggers only, not to {trig.keyword}")
    if "IGNORE_NODATA_TRIGGER" in given and not isinstance(trig, (m.PeriodTrigger, m.SlidingTrigger, m.IntervalWindow)):
        c.fail("IGNORE_NODATA_TRIGGER", "IGNORE_NODATA_TRIGGER applies to PERIOD, SLIDING and INTERVAL triggers only")
    if "DELETE_RECALC" in given and not (window and not isinstance(trig, m.CountWindow)):
        c.fail("DELETE_RECALC", "DELETE_RECALC needs a trigger that recalculates: INTERVAL, SESSION, STATE_WINDOW or "
                                "EVENT_WINDOW")
    if "DELETE_OUTPUT_TABLE" in given and c.stmt.rollup_by is not None:
        c.fail("DELETE_OUTPUT_TABLE", "DELETE_OUTPUT_TABLE applies to streams grouped by subtable, not to ROLLUP BY "
                                      "(a rollup group's output outlives any one source subtable)")
    if "DELETE_OUTPUT_TABLE" in given and "tbname" not in {p.lower() for p in c.stmt.partition_by}:
        c.fail("DELETE_OUTPUT_TABLE", "DELETE_OUTPUT_TABLE needs PARTITION BY tbname (one output subtable per "
                                      "trigger subtable)")
    if opts.calc_notify_only:
        if c.stmt.notify is None:
            c.fail("CALC_NOTIFY_ONLY", "CALC_NOTIFY_ONLY sends results only as notifications: add NOTIFY(...)")
        if c.stmt.into is not None:
            c.fail("CALC_NOTIFY_ONLY", "CALC_NOTIFY_ONLY does not write results: remove INTO")
    if opts.force_output and c.stmt.query is None:
        c.fail("FORCE_OUTPUT", "FORCE_OUTPUT needs a computation (AS subquery)")
    if opts.pre_filter is not None:
        _reject_in_tree(c, opts.pre_filter, "PRE_FILTER", placeholders=True)
    _check_engine(c, window)


def _check_idle(c: _Checker, window: bool) -> None:
    """IDLE_TIMEOUT(d) with IDLE and RESUME events (TDengine 3.4.1): d from 1 s to 10 d, in a, s, m, h or
    d; a group's idleness is watched by the live detector, so the trigger is a window trigger."""
    opts, notify = c.stmt.options, c.stmt.notify
    timeout = opts.idle_timeout
    if timeout is None:
        if notify is not None and set(notify.on) & set(IDLE_EVENTS):
            c.fail("NOTIFY ON", "IDLE and RESUME events need STREAM_OPTIONS(IDLE_TIMEOUT(d)): a group is idle once "
                                "no rows came for d", at="ON")
        return
    if timeout.unit not in IDLE_TIMEOUT_UNITS:
        c.fail("IDLE_TIMEOUT", f"IDLE_TIMEOUT({timeout}): the unit must be a, s, m, h or d")
    if not IDLE_TIMEOUT_MIN.micros <= timeout.micros <= IDLE_TIMEOUT_MAX.micros:
        c.fail("IDLE_TIMEOUT", f"IDLE_TIMEOUT({timeout}) is outside the allowed range [1s, 10d]")
    if not window:
        c.fail("IDLE_TIMEOUT", f"IDLE_TIMEOUT watches each group's rows in the live window detector; a "
                               f"{c.stmt.trigger.keyword} trigger has none (use a window trigger such as "
                               "INTERVAL(1m) SLIDING(1m) or SESSION(ts, 1m))")
    wanted = set(opts.event_types) | set(notify.on if notify is not None else ())
    if not wanted & set(IDLE_EVENTS):
        c.fail("IDLE_TIMEOUT", "IDLE_TIMEOUT without IDLE or RESUME events does nothing: add them to EVENT_TYPE(...) "
                               "or NOTIFY ... ON (...)")


def _check_engine(c: _Checker, window: bool) -> None:
    """ENGINE names a window stream's detector engine: ``in-process``, ``spark`` (one Structured
    Streaming query per trigger table, which the stream node starts on its Spark session) or
    ``auto`` (spark when the node drives a cluster). A stream naming ``spark`` is refused, at the
    option, when it uses what that engine does not run; one naming ``auto`` runs in process then."""
    engine = c.stmt.options.engine
    if engine is None:
        return
    if not window:
        c.fail("ENGINE", f"ENGINE chooses a window detector; a {c.stmt.trigger.keyword} trigger has none")
    if engine != "spark":
        return
    refused = m.spark_refusal_of(c.stmt)
    if refused is not None:
        word, what = refused
        c.fail(word, f"ENGINE('spark'): the spark detector engine does not run {what}",
               hint="write ENGINE('in-process') or ENGINE('auto'), or leave the option out")


def _check_notify(c: _Checker) -> None:
    notify, trig = c.stmt.notify, c.stmt.trigger
    if notify is None:
        return
    if m.STREAM_KINDS[trig.keyword] is m.StreamKind.WINDOW:
        if not notify.on:
            c.fail("NOTIFY", f"NOTIFY on a {m.TRIGGER_TYPES[trig.keyword]} window trigger needs ON "
                             "(WINDOW_OPEN|WINDOW_CLOSE)")
        if m.EventType.ON_TIME in notify.on:
            c.fail("NOTIFY ON", "ON_TIME is the event of PERIOD and SLIDING triggers; window triggers send "
                                "WINDOW_OPEN and WINDOW_CLOSE")
    elif set(notify.on) - {m.EventType.ON_TIME}:
        c.fail("NOTIFY ON", f"{trig.keyword} triggers only send ON_TIME events")
    if notify.where is not None:
        if c.stmt.query is None:
            c.fail("NOTIFY WHERE", "NOTIFY WHERE filters on result columns, so it needs a computation (AS subquery)")
        _reject_in_tree(c, notify.where, "NOTIFY WHERE", placeholders=True)


def _check_output(c: _Checker) -> None:
    stmt = c.stmt
    if stmt.query is None and stmt.notify is None:
        c.fail("CREATE STREAM", "a stream needs a computation (AS subquery), a notification (NOTIFY), or both")
    if not stmt.grouped:
        if stmt.output_subtable is not None:
            c.fail("OUTPUT_SUBTABLE", "OUTPUT_SUBTABLE needs PARTITION BY or ROLLUP BY: without groups there is one "
                                      "output table")
        if stmt.tags:
            c.fail("TAGS", "TAGS needs PARTITION BY or ROLLUP BY: without groups the output is a regular table")
    if stmt.into is not None and stmt.query is None:
        c.fail("INTO", "INTO needs a computation (AS subquery) whose results it stores")
    if (stmt.columns or stmt.tags or stmt.output_subtable) and stmt.into is None:
        clause = "TAGS" if stmt.tags else "OUTPUT_SUBTABLE" if stmt.output_subtable else "columns"
        c.fail(clause, f"{clause} describes the output table: add INTO [db.]table")
    if stmt.into is not None:
        db = stmt.name.db
        if stmt.trigger_table is not None and stmt.into.key(db) == stmt.trigger_table.key(db):
            c.fail("INTO", f"the output table {stmt.into} cannot be the trigger table")
        if stmt.query is not None:
            for table in stmt.query.tree.find_all(exp.Table):
                source = m.TableName(table.name, table.db or None)
                if source.key(db) == stmt.into.key(db):
                    c.fail("INTO", f"the output table {stmt.into} cannot also be a source table of the computation")
    seen: set[str] = set()
    for col in stmt.columns:
        if col.name.lower() in seen:
            c.fail("columns", f"output column {col.name} is named twice")
        seen.add(col.name.lower())
    for tag in stmt.tags:
        if tag.name.lower() in seen:
            c.fail("TAGS", f"tag {tag.name} has the name of another output column or tag")
        seen.add(tag.name.lower())
        _check_group_refs(c, tag.expr, "TAGS")
    if stmt.output_subtable is not None:
        _check_group_refs(c, stmt.output_subtable, "OUTPUT_SUBTABLE")


def _check_group_refs(c: _Checker, expr: m.SqlExpression, clause: str) -> None:
    """TAGS and OUTPUT_SUBTABLE expressions may use only the grouping columns and constants."""
    groups = {p.lower() for p in c.stmt.group_columns}
    by = "ROLLUP BY" if c.stmt.rollup_by is not None else "PARTITION BY"
    for col in expr.tree.find_all(exp.Column):
        if col.name.lower() not in groups:
            c.fail(clause, f"{clause} can use only {by} columns ({', '.join(c.stmt.group_columns)}), "
                           f"not {col.name}")
    _reject_in_tree(c, expr, clause, placeholders=False)


def _reject_in_tree(c: _Checker, expr: m.SqlExpression, clause: str, placeholders: bool) -> None:
    check_functions(expr.tree, expr.text, expr.position, clause)
    if placeholders:
        for node in expr.tree.find_all(StreamPlaceholder, PlaceholderTable):
            c.fail(clause, f"{clause} cannot use the placeholder {node.name}")
    for node in expr.tree.find_all(PseudoColumn):
        if node.name in REJECTED_PSEUDO_COLUMNS:
            c.fail(clause, f"pseudo-column {node.name} is not supported in stream queries")


def _check_query(c: _Checker) -> None:
    stmt, query = c.stmt, c.stmt.query
    if query is None:
        return
    tree = query.tree
    check_functions(tree, query.text, query.position, "AS")
    trig = stmt.trigger
    for node in tree.find_all(PseudoColumn):
        if node.name in REJECTED_PSEUDO_COLUMNS:
            c.fail("AS", f"pseudo-column {node.name} is not supported in stream queries")
    opens = m.EventType.WINDOW_OPEN in stmt.options.event_types and m.STREAM_KINDS[trig.keyword] is m.StreamKind.WINDOW
    idles = bool(set(stmt.options.event_types) & set(IDLE_EVENTS))
    groups = [p.lower() for p in stmt.group_columns]
    by = "ROLLUP BY tag" if stmt.rollup_by is not None else "PARTITION BY column"
    for placeholder in tree.find_all(StreamPlaceholder):
        name = placeholder.name
        if name.startswith("%%"):
            ref = name[2:]
            if ref == "trows":
                c.fail_in(query, name, "AS", "%%trows can only be used as a table: FROM %%trows")
            if ref == "tbname" and "tbname" not in groups:
                c.fail_in(query, name, "AS", "%%tbname needs PARTITION BY tbname")
            if ref.isdigit() and not 1 <= int(ref) <= len(groups):
                c.fail_in(query, name, "AS", f"%%{ref} refers to {by} {ref}, but the stream groups "
                                             f"by {len(groups)} column(s)")
            continue
        if name in WINDOW_BOUND_PLACEHOLDERS and idles:
            c.fail_in(query, name, "AS", f"placeholder {name} belongs to window events, but EVENT_TYPE includes IDLE "
                                         "or RESUME: use _tidlestart and _tidleend, or a stream of its own for windows")
        if name in IDLE_PLACEHOLDERS and not idles:
            c.fail_in(query, name, "AS", f"placeholder {name} is only defined for IDLE and RESUME events: add them "
                                         "to EVENT_TYPE(...) with IDLE_TIMEOUT(d)")
        kinds = PLACEHOLDERS[name]
        if m.STREAM_KINDS[trig.keyword] not in kinds:
            owners = " and ".join(sorted(k.upper() if k is not m.StreamKind.WINDOW else "window" for k in kinds))
            c.fail_in(query, name, "AS", f"placeholder {name} is not defined for {trig.keyword} "
                                         f"triggers (it belongs to {owners} triggers)")
        if name in CLOSE_ONLY_PLACEHOLDERS and opens:
            c.fail_in(query, name, "AS", f"placeholder {name} is only defined at WINDOW_CLOSE, but EVENT_TYPE "
                                         "includes WINDOW_OPEN")
    for table in tree.find_all(PlaceholderTable):
        if table.name == "%%tbname":
            if "tbname" not in groups:
                c.fail("AS", "FROM %%tbname needs PARTITION BY tbname")
            continue
        if table.name != "%%trows":
            c.fail("AS", f"{table.name} cannot be used as a table; only %%trows and %%tbname can")
        if stmt.trigger_table is None:
            c.fail("AS", "%%trows needs a trigger table (FROM)")
        if opens:
            c.fail("AS", "%%trows is only defined at WINDOW_CLOSE, but EVENT_TYPE includes WINDOW_OPEN")
        select = table.find_ancestor(exp.Select)
        if select is not None:
            if select.args.get("where") is not None:
                c.fail("AS", "a query on %%trows cannot filter it with WHERE; use PRE_FILTER, or a subquery")
            if select.args.get("joins"):
                c.fail("AS", "%%trows cannot be joined")
        if table.find_ancestor(exp.Join) is not None:
            c.fail("AS", "%%trows cannot be joined")


def _check_nested(c: _Checker) -> None:
    """FLUSH_ON_OUTER_CLOSE, DELETE_RECALC and the query's ``layer._tw...`` references of a nested
    WINDOW(...) (TDengine 3.4.2)."""
    stmt = c.stmt
    if not stmt.nested:
        if stmt.options.flush_on_outer_close:
            c.fail("FLUSH_ON_OUTER_CLOSE", "FLUSH_ON_OUTER_CLOSE closes the leaf windows of a nested WINDOW(...) with "
                                           "their outer window; this stream has no nested windows")
        return
    # the live detector rescans a group's open outer windows as rows arrive, with no processing-time
    # timeout (windows.nested_step)
    for name, given in (("MAX_DELAY", stmt.options.max_delay), ("IDLE_TIMEOUT", stmt.options.idle_timeout)):
        if given is not None:
            c.fail("WINDOW", f"{name} with nested windows (WINDOW(...), TDengine 3.4.2) is not run: their leaf "
                             "windows are reported as the rows of their outer windows arrive, without "
                             f"processing-time timeouts", hint=f"leave {name} out, or create the leaf alone, "
                                                               f"{stmt.trigger}", at="trigger")
    layers = [(o.trigger, o.name) for o in stmt.outer_windows] + [(stmt.trigger, stmt.leaf_name)]
    if "DELETE_RECALC" in stmt.options.given:
        for trig, _ in layers:
            if isinstance(trig, m.CountWindow) and (trig.sliding or trig.count) != 1:
                c.fail("DELETE_RECALC", f"DELETE_RECALC with nested windows needs every COUNT_WINDOW to slide by 1, "
                                        f"found {trig}")
    query = stmt.query
    if query is None:
        return
    names = {name.lower(): trig for trig, name in layers if name}
    for alias in query.tree.find_all(exp.TableAlias):
        if alias.name.lower() in names:
            c.fail_in(query, alias.name, "WINDOW", f"{alias.name} names a window layer of WINDOW(...) and a table of "
                                                   "the query: give one of them another name")
    for col in query.tree.find_all(exp.Column):
        layer = names.get(col.table.lower()) if col.table else None
        if layer is None:
            continue
        kinds = PLACEHOLDERS.get(col.name.lower())
        if kinds != {m.STREAM_KINDS[layer.keyword]} or col.name.lower() in IDLE_PLACEHOLDERS:
            c.fail_in(query, f"{col.table}.{col.name}", "AS", f"{col.table}.{col.name}: a window layer gives the "
                                                              f"placeholders of its {layer.keyword} trigger, as "
                                                              f"{col.table}._twstart")
