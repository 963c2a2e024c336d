"""The stream model: frozen dataclasses of parsed statements, the same whatever language they came in.

Every public name of the submodules is here, so ``from airflow_stream_provider import model as m``
then ``m.CreateStream`` reads the model in one namespace. The model imports no language: front-ends
in :mod:`airflow_stream_provider.sql` build it, and the rules a single object can check are checked
where it is built.

- :mod:`.time`: duration units, :class:`Duration`, :class:`TimePoint`
- :mod:`.types`: positions, table names, embedded SQL, data types, literal values
- :mod:`.events`: the :class:`EventType` and :class:`TriggerKind` names
- :mod:`.triggers`: PERIOD, SLIDING, the window triggers and the row trigger
- :mod:`.options`: stream options, notification, :class:`EmitPolicy`, and the options of
  TDengine's engine before 3.3.7 (:class:`LegacyOptions`)
- :mod:`.statements`: ``CreateStream`` and the other statements
- :mod:`.names`: the rule for database, table, stream and column names, and names to paths
"""

from __future__ import annotations

from airflow_stream_provider.model.events import EventType, TriggerKind
from airflow_stream_provider.model.options import (
    DEFAULT_RECALCULATE,
    EmitPolicy,
    Fill,
    FillHistory,
    LegacyOptions,
    Notify,
    StreamOptions,
    TriggerMode,
)
from airflow_stream_provider.model.statements import (
    ColumnDefinition,
    CreateDatabase,
    CreateStream,
    CreateSubTable,
    CreateSuperTable,
    CreateTable,
    Delete,
    DropDatabase,
    DropStream,
    DropTable,
    Insert,
    InsertTarget,
    OutputColumn,
    RecalculateStream,
    Select,
    ShowStreams,
    StartStream,
    Statement,
    StopStream,
    TagDefinition,
    UseDatabase,
)
from airflow_stream_provider.model.time import ALL_UNITS, CALENDAR_UNITS, UNIT_MICROS, Duration, TimePoint
from airflow_stream_provider.model.triggers import (
    CountWindow,
    EventWindow,
    IntervalWindow,
    PeriodTrigger,
    RowTrigger,
    SessionWindow,
    SlidingTrigger,
    StateWindow,
    Trigger,
    TrueFor,
)
from airflow_stream_provider.model.types import DataType, Position, SqlExpression, TableName, Value

__all__ = [
    "ALL_UNITS",
    "CALENDAR_UNITS",
    "DEFAULT_RECALCULATE",
    "UNIT_MICROS",
    "ColumnDefinition",
    "CountWindow",
    "CreateDatabase",
    "CreateStream",
    "CreateSubTable",
    "CreateSuperTable",
    "CreateTable",
    "DataType",
    "Delete",
    "DropDatabase",
    "DropStream",
    "DropTable",
    "Duration",
    "EmitPolicy",
    "EventType",
    "EventWindow",
    "Fill",
    "FillHistory",
    "Insert",
    "InsertTarget",
    "IntervalWindow",
    "LegacyOptions",
    "Notify",
    "OutputColumn",
    "PeriodTrigger",
    "Position",
    "RecalculateStream",
    "RowTrigger",
    "Select",
    "SessionWindow",
    "ShowStreams",
    "SlidingTrigger",
    "SqlExpression",
    "StartStream",
    "StateWindow",
    "Statement",
    "StopStream",
    "StreamOptions",
    "TableName",
    "TagDefinition",
    "TimePoint",
    "Trigger",
    "TriggerKind",
    "TriggerMode",
    "TrueFor",
    "UseDatabase",
    "Value",
]
