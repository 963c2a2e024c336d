"""What fired: a trigger with its placeholder values (:class:`Fired`), the trigger table as
``%%trows`` and ``%%tbname`` read it (:class:`TriggerSource`), and the names and types of the
placeholder columns a batch of triggers carries.

Each fired trigger carries its placeholder values (reference 000, "Placeholders"). They never
become text: a batch is a small table with one row per trigger and one column per placeholder.
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_stream_provider.sql.spark import Binding
from airflow_stream_provider.windows.events import WindowEvent

#: the column of a batch's trigger rows (and of its results) that says which trigger it is
IDX = "__idx"
#: internal values a trigger carries besides the placeholders: the bounds of %%trows
TROWS_FROM, TROWS_TO = "__trows_from", "__trows_to"
#: ROLLUP BY: the group's path and its separator, the prefix of the paths below it (a value of the
#: trigger's, which %%trows's condition reads)
ROLLUP_BELOW = "__rollup_below"
#: Spark types of the placeholder columns; %%n and %%tbname take the grouping columns' types
TIMESTAMPS = ("_twstart", "_twend", "_tprev_ts", "_tcurrent_ts", "_tnext_ts", TROWS_FROM, TROWS_TO)
INTEGERS = ("_twduration", "_twrownum", "_tgrpid", "_tlocaltime", "_tprev_localtime", "_tnext_localtime",
            "_tidlestart", "_tidleend", "_trollup_tbcount")


def base_name(name: str) -> str:
    """The placeholder ``name`` stands for: ``_twstart`` for an outer layer's ``_twstart@0`` (nested
    windows), else itself."""
    return name.split("@", 1)[0]


def column_of(name: str) -> str:
    """The trigger-table column holding placeholder ``name``."""
    if "@" in name:  # an outer layer's, ``_twstart@0``
        base, depth = name.split("@", 1)
        return f"__o{depth}{base}"
    if name == "%%tbname":
        return "__tbname"
    if name.startswith("%%") and name[2:].isdigit():
        return f"__k{name[2:]}"
    return name


@dataclass(frozen=True)
class Fired:
    """One fired trigger: its position in the batch and its placeholder values.

    :param values: placeholder name -> value (``_twstart``, ``%%1``, ``%%tbname``, ...); timestamps
        are aware datetimes, ``_tlocaltime``-style values integers in nanoseconds.
    :param version: the trigger table's Delta version the trigger saw (``%%trows``).
    :param since_version: PERIOD: %%trows holds the rows written after this version.
    """

    idx: int
    values: dict[str, Binding]
    version: int | None = None
    since_version: int | None = None
    group: tuple = ()  # the PARTITION BY values
    group_id: str = "0"
    trigger_id: str = ""
    event: WindowEvent | None = None  # window triggers: the event that fired it
    #: (JSON) the rows the window counts where they differ from the table's, for a stream of
    #: TDengine's engine before 3.3.7: ``drop`` the table's rows of these ``keys``, ``add`` these rows
    adjust: str | None = None


@dataclass(frozen=True)
class TriggerSource:
    """The trigger table, as ``%%trows`` and ``%%tbname`` read it."""

    path: str  # the Delta table (a supertable's, for a subtable)
    ts_column: str
    keys: tuple[str, ...] = ()  # PARTITION BY columns (or the ROLLUP BY tag)
    #: ROLLUP BY: the group's rows are those whose tag lies under its path (%%1), not equal to it
    rollup: bool = False
    subtable: str | None = None  # the trigger table is this subtable of ``path``
    pre_filter: str | None = None  # PRE_FILTER, as Spark SQL
    count_columns: tuple[str, ...] = ()  # COUNT_WINDOW trigger columns: a row counts if one is not NULL
    end_inclusive: bool = True  # %%trows takes rows up to and including TROWS_TO
    changes: bool = False  # PERIOD: %%trows is what was written between two triggers
    # inclusive ranges of table versions whose rows %%trows leaves out (START ... IGNORE UNTREATED)
    skip_versions: tuple[tuple[int, int], ...] = ()
