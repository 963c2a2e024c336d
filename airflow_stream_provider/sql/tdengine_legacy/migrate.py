"""The nearest TDengine 3.3.7 statement for a legacy one, and what it cannot reproduce.

TDengine moved from its first stream engine to the one of 3.3.7 without a tool that says what an
old stream becomes. :func:`to_3_3_7` writes the 3.3.7 ``CREATE STREAM`` nearest to a legacy one
(from the model both share) and lists, one by one, the legacy behaviours it does not reproduce and
when each one shows. When the list is empty the two are the same stream.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from airflow_stream_provider import model as m
from airflow_stream_provider.sql.ast import DurationLiteral, StreamPlaceholder
from airflow_stream_provider.sql.tdengine.dialect import TDengine


@dataclass(frozen=True)
class Migration:
    """``statement``: the nearest 3.3.7 text (None: 3.3.7 has no form for it); ``differences``:
    what the legacy stream does that it does not."""

    statement: str | None
    differences: tuple[str, ...]

    @property
    def exact(self) -> bool:
        return self.statement is not None and not self.differences


def to_3_3_7(stmt: m.Statement) -> Migration:
    """The 3.3.7 form of ``stmt``: legacy streams are rewritten, PAUSE and RESUME become STOP and
    START, every other statement is already 3.3.7."""
    if isinstance(stmt, m.StopStream | m.StartStream) and stmt.verb in ("PAUSE", "RESUME"):
        verb = "STOP" if isinstance(stmt, m.StopStream) else "START"
        exists = " IF EXISTS" if stmt.if_exists else ""
        untreated = " IGNORE UNTREATED" if isinstance(stmt, m.StartStream) and stmt.ignore_untreated else ""
        differences = (("IGNORE UNTREATED: before 3.3.7 a later computation that reads the table counts the rows "
                        "written while paused; 3.3.7 leaves them out",) if untreated else ())
        return Migration(f"{verb} STREAM{exists}{untreated} {stmt.name}", differences)
    if not isinstance(stmt, m.CreateStream) or stmt.legacy is None:
        return Migration(stmt.text.strip(), ())
    return _Writer(stmt).migration()


class _Writer:
    def __init__(self, stmt: m.CreateStream) -> None:
        assert stmt.legacy is not None
        self.stmt, self.legacy = stmt, stmt.legacy
        self.differences: list[str] = []

    def differ(self, text: str) -> None:
        self.differences.append(text)

    def migration(self) -> Migration:
        stmt, legacy = self.stmt, self.legacy
        if legacy.trigger is m.TriggerMode.FORCE_WINDOW_CLOSE:
            self.differ("FORCE_WINDOW_CLOSE: 3.3.7 has no wall-clock INTERVAL window. The nearest is "
                        "PERIOD(interval) FROM t PARTITION BY ... with a query over [_tprev_localtime, _tlocaltime) "
                        "and FORCE_OUTPUT, but PERIOD restarts at local midnight (INTERVAL windows are aligned to "
                        "the epoch), its instants are nanoseconds of local time, and FORCE_OUTPUT writes NULLs only: "
                        "FILL(PREV) and FILL(VALUE) have no form")
            return Migration(None, tuple(self.differences))
        trigger = self.trigger()
        options = self.options()
        parts = [f"CREATE STREAM{' IF NOT EXISTS' if stmt.if_not_exists else ''} {stmt.name} {trigger}"]
        if stmt.trigger_table is not None:
            parts.append(f"FROM {stmt.trigger_table}")
        if stmt.partition_by:
            parts.append(f"PARTITION BY {', '.join(stmt.partition_by)}")
        if options:
            parts.append(f"STREAM_OPTIONS({' | '.join(options)})")
        if stmt.notify is not None:
            parts.append(self.notify(stmt.notify))
        parts += self.output()
        if stmt.query is not None:
            parts.append(f"AS {self.query(stmt.query)}")
        self.behaviour()
        return Migration("\n  ".join(parts), tuple(self.differences))

    # --- clauses ---------------------------------------------------------------------------------

    def trigger(self) -> str:
        trig = self.stmt.trigger
        if isinstance(trig, m.RowTrigger):
            self.differ("no window: 3.3.7 writes a row per row with COUNT_WINDOW(1), whose windows ignore "
                        "updates, deletes and late rows; before 3.3.7 a rewritten row is written again, moves to "
                        "its new group, and a deleted one removes its output row. On a supertable 3.3.7's count "
                        "window also needs PARTITION BY tbname")
            return "COUNT_WINDOW(1)"
        return str(trig)

    def options(self) -> list[str]:
        stmt, legacy, opts = self.stmt, self.legacy, self.stmt.options
        out = []
        window = not isinstance(stmt.trigger, m.RowTrigger)
        if opts.watermark is not None:
            out.append(f"WATERMARK({opts.watermark})")
        if opts.fill_history is not None:
            out.append("FILL_HISTORY")
        if window and not isinstance(stmt.trigger, m.CountWindow):
            out.append("DELETE_RECALC")
        if legacy.trigger is m.TriggerMode.AT_ONCE and window:
            out.append("MAX_DELAY(3s)")
        if legacy.trigger is m.TriggerMode.MAX_DELAY and legacy.max_delay is not None:
            out.append(f"MAX_DELAY({legacy.max_delay})")
        if opts.pre_filter is not None:
            out.append(f"PRE_FILTER({opts.pre_filter.text})")
        if isinstance(stmt.trigger, m.IntervalWindow) and opts.ignore_nodata_trigger:
            out.append("IGNORE_NODATA_TRIGGER")
        return out

    def notify(self, notify: m.Notify) -> str:
        urls = ", ".join(f"'{u}'" for u in notify.urls)
        flags = [f for f, on in (("NOTIFY_HISTORY", notify.history), ("ON_FAILURE_PAUSE", notify.on_failure_pause))
                 if on]
        text = f"NOTIFY({urls}) ON ({' | '.join(notify.on)})"
        self.differ("NOTIFY: receivers get 3.3.7's messages (triggerId, triggerType with Interval, groupId) instead "
                    "of 3.3.6's (windowId, windowType with Time)")
        return text + (f" NOTIFY_OPTIONS({' | '.join(flags)})" if flags else "")

    def output(self) -> list[str]:
        stmt = self.stmt
        if stmt.into is None:
            return []
        parts = [f"INTO {stmt.into}"]
        if not stmt.partition_by:
            self.differ(f"output: without PARTITION BY, {stmt.into} is a regular table in 3.3.7; before 3.3.7 it is "
                        "a supertable with one subtable")
        if stmt.output_subtable is not None:
            parts.append(f"OUTPUT_SUBTABLE({stmt.output_subtable.text})")
            self.differ(f"SUBTABLE: before 3.3.7 the name gets _{stmt.into.name}_<group id> appended (since "
                        "3.2.3.0); 3.3.7 uses the expression's value as it is")
        if stmt.columns:
            parts.append("(" + ", ".join(c.name + (" COMPOSITE KEY" if c.composite_key else "")
                                         for c in stmt.columns) + ")")
            self.differ("column list: before 3.3.7 it maps the results onto the named columns of an existing "
                        "supertable (others NULL, types converted); 3.3.7 renames the results and needs an existing "
                        "table's schema to match exactly")
        if stmt.tags:
            typed = [t for t in stmt.tags if t.type is not None]
            if len(typed) == len(stmt.tags):
                parts.append("TAGS (" + ", ".join(f"{t.name} {t.type} AS {t.expr.text}" for t in typed) + ")")
            else:
                self.differ("TAGS (name, ...): 3.3.7 needs each tag's type (TAGS (name type AS expr)), which is "
                            "the existing supertable's")
        elif stmt.partition_by:
            self.differ("tags: before 3.3.7 the output subtables carry one tag, group_id; 3.3.7 makes the PARTITION "
                        "BY columns the tags (tbname as tag_tbname)")
        return parts

    def query(self, query: m.SqlExpression) -> str:
        tree = query.tree
        trig = self.stmt.trigger
        if isinstance(trig, m.SessionWindow):  # a legacy session's _wend is its last row plus the gap
            gap = DurationLiteral(this=str(trig.gap.count), unit=trig.gap.unit)
            tree = tree.copy().transform(
                lambda n: exp.Paren(this=exp.Add(this=n.copy(), expression=gap.copy()))
                if isinstance(n, StreamPlaceholder) and n.name == "_twend" else n)
            if any(p.name == "_twduration" for p in tree.find_all(StreamPlaceholder)):
                self.differ("_wduration of a session: before 3.3.7 it runs to the last row plus the gap; 3.3.7's "
                            "_twduration to the last row")
        return tree.sql(dialect=TDengine)

    # --- behaviour -------------------------------------------------------------------------------

    def behaviour(self) -> None:
        """What the legacy engine does at run time that 3.3.7 does not."""
        stmt, legacy = self.stmt, self.legacy
        trig = stmt.trigger
        if isinstance(trig, m.RowTrigger):
            return
        mode = legacy.trigger
        if mode is m.TriggerMode.AT_ONCE:
            self.differ("AT_ONCE: before 3.3.7 every write rewrites the windows it touches at once; 3.3.7 writes a "
                        "window when it closes, and open ones every MAX_DELAY (at least 3s)")
        elif mode is m.TriggerMode.MAX_DELAY:
            self.differ("MAX_DELAY: before 3.3.7 an open window is written once per delay and again only after new "
                        "rows, with a minimum of 5s; 3.3.7 writes it every delay while it stays open")
        elif mode is m.TriggerMode.CONTINUOUS_WINDOW_CLOSE:
            self.differ(f"CONTINUOUS_WINDOW_CLOSE: before 3.3.7 changed windows are recalculated every "
                        f"{legacy.recalculate_every}; 3.3.7 recalculates them at once")
        if legacy.ignore_update:
            self.differ("IGNORE UPDATE 1: before 3.3.7 a row written again at an existing timestamp counts as one "
                        "more row; 3.3.7 never counts a row twice")
        elif isinstance(trig, m.CountWindow):
            self.differ("IGNORE UPDATE 0: 3.3.7's count windows ignore updates")
        if legacy.ignore_expired:
            self.differ("IGNORE EXPIRED 1: before 3.3.7 a row older than its table's latest row that falls into a "
                        "closed window is dropped; 3.3.7 recalculates it (IGNORE_DISORDER would drop every "
                        "out-of-order row, also into open windows)")
        self.differ("deletes: before 3.3.7 a delete recalculates its windows and removes the result of a window "
                    "left empty; 3.3.7's DELETE_RECALC keeps results already written" if not isinstance(
                        trig, m.CountWindow) else "deletes: 3.3.7's count windows ignore deletes")
        if not isinstance(trig, m.IntervalWindow):
            self.differ("windows that merge or split (late rows, updates): before 3.3.7 the result of a window "
                        "that no longer exists is removed; 3.3.7 keeps it")
        if legacy.fill is not None and legacy.fill.mode != "NONE":
            self.differ(f"FILL({legacy.fill.mode}): before 3.3.7 the empty windows between a group's rows are "
                        "written filled; 3.3.7 computes them over no rows (count 0, other aggregates NULL)")
        if legacy.delete_mark is not None:
            self.differ("DELETE_MARK: 3.3.7 has no option for how long window state is kept")
        if legacy.fill_history_async:
            self.differ("FILL_HISTORY 1 ASYNC: 3.3.7's SHOW STREAMS reports other states than init, ready and "
                        "failed")
