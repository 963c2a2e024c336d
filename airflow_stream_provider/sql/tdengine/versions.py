"""What a TDengine 3.3.7 statement would do differently under TDengine 3.4's semantics
(``airflow-stream check --to 3.4``).

One behaviour differs: a PERIOD of a day or more counts in 3.3.7 from midnight of the creation day
plus the offset, never resetting; in 3.4 its instants are whole multiples of the period from the
epoch's local midnight, a period of whole weeks counting from Monday 1970-01-05 (so ``PERIOD(1w)``
fires on Mondays). Calendar periods (``n``, ``q``, ``y``) exist only since 3.4.1 and fire the same
way under both.
"""

from __future__ import annotations

from airflow_stream_provider import model as m

DAY_MICROS = 86_400_000_000
WEEK_MICROS = 7 * DAY_MICROS


def changes_under_3_4(stmt: m.Statement) -> list[str]:
    """The differences of ``stmt`` under TDengine 3.4, one sentence each; none when it is the same."""
    if not isinstance(stmt, m.CreateStream) or stmt.legacy is not None or stmt.options.semantics == "3.4":
        return []
    trig = stmt.trigger
    if not isinstance(trig, m.PeriodTrigger) or trig.period.is_calendar or trig.period.micros < DAY_MICROS:
        return []
    offset = f" + {trig.offset}" if trig.offset else ""
    if trig.period.micros % WEEK_MICROS == 0:
        grid = f"every {trig.period} counted from Monday 1970-01-05{offset}"
        weekday = " (on Mondays)" if not trig.offset else ""
    else:
        grid = f"at whole multiples of {trig.period} from the epoch's local midnight{offset}"
        weekday = ""
    return [f"{trig}: 3.3.7 fires from midnight of the creation day{offset}, stepping by the period plus the "
            f"offset; 3.4 fires {grid}{weekday}, whatever day the stream was created"]


def report_3_4(stmt: m.Statement) -> list[str]:
    """The lines ``check --to 3.4`` prints for ``stmt``: SQL comments, one per difference."""
    changes = changes_under_3_4(stmt)
    if not changes:
        return [f"-- {stmt.subject}: the same under TDengine 3.4"]
    head = f"-- {stmt.subject}: changes under TDengine 3.4 (SEMANTICS('3.3.7') keeps 3.3.7's behaviour):"
    return [head, *(f"--   * {change}" for change in changes)]
