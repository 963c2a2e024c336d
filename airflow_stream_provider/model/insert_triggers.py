"""Insert triggers: user Python classes that listen to writes (IoTDB's triggers, reference 004).

A trigger is a class that subclasses :class:`InsertTrigger` and overrides any of its methods::

    from airflow_stream_provider import InsertTrigger, Tablet

    class HighTemperature(InsertTrigger):
        def on_create(self, attributes):
            self.limit = attributes.get_float_or_default("limit", 100.0)

        def fire(self, tablet: Tablet) -> bool:
            for name, values in tablet.columns():
                ...
            return True

It is registered with ``CREATE TRIGGER high BEFORE|AFTER INSERT ON root.ln.** AS 'pkg.mod.HighTemperature'``
and then sees every write whose series match the pattern, one :class:`Tablet` per write.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from airflow_stream_provider.model.series import SeriesPath, SeriesType
from airflow_stream_provider.model.statements import Statement
from airflow_stream_provider.values import EPOCH


class FailureStrategy(StrEnum):
    """What a failed ``fire`` does (004): OPTIMISTIC logs and counts it, the write goes on;
    PESSIMISTIC also stops the triggers after it, and before the insertion refuses the write."""

    OPTIMISTIC = "OPTIMISTIC"
    PESSIMISTIC = "PESSIMISTIC"


class TriggerEvent(StrEnum):
    BEFORE_INSERT = "BEFORE_INSERT"
    AFTER_INSERT = "AFTER_INSERT"


class TriggerType(StrEnum):
    """STATELESS: an instance in each process that writes; STATEFUL: one instance, in the stream node."""

    STATELESS = "STATELESS"
    STATEFUL = "STATEFUL"


class TriggerAttributes(Mapping[str, str]):
    """The ``WITH ("key" = "value", ...)`` of CREATE TRIGGER: every value is a string, read with a
    typed getter (a value that is not of the type raises ``ValueError`` naming the key)."""

    def __init__(self, attributes: Mapping[str, str] | None = None) -> None:
        self._attributes = dict(attributes or {})

    def __getitem__(self, key: str) -> str:
        return self._attributes[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._attributes)

    def __len__(self) -> int:
        return len(self._attributes)

    def __repr__(self) -> str:
        return f"TriggerAttributes({self._attributes!r})"

    def has_attribute(self, key: str) -> bool:
        return key in self._attributes

    def get_attributes(self) -> dict[str, str]:
        return dict(self._attributes)

    def get_string(self, key: str) -> str:
        if key not in self._attributes:
            raise KeyError(f"the trigger has no attribute {key!r}")
        return self._attributes[key]

    def get_int(self, key: str) -> int:
        return self._typed(key, int, "an integer")

    def get_float(self, key: str) -> float:
        return self._typed(key, float, "a number")

    def get_bool(self, key: str) -> bool:
        value = self.get_string(key).strip().lower()
        if value not in ("true", "false"):
            raise ValueError(f"trigger attribute {key!r} must be true or false, not {self._attributes[key]!r}")
        return value == "true"

    def get_string_or_default(self, key: str, default: str) -> str:
        return self._attributes.get(key, default)

    def get_int_or_default(self, key: str, default: int) -> int:
        return self.get_int(key) if key in self._attributes else default

    def get_float_or_default(self, key: str, default: float) -> float:
        return self.get_float(key) if key in self._attributes else default

    def get_bool_or_default(self, key: str, default: bool) -> bool:
        return self.get_bool(key) if key in self._attributes else default

    def _typed(self, key: str, kind: type, what: str):
        value = self.get_string(key)
        try:
            return kind(value.strip())
        except ValueError:
            raise ValueError(f"trigger attribute {key!r} must be {what}, not {value!r}") from None


@dataclass(frozen=True)
class Measurement:
    """One series of a tablet: its measurement name (the last node of its path) and its type."""

    name: str
    type: SeriesType


@dataclass(frozen=True)
class Tablet:
    """The rows of one write to one device, holding only the series a trigger's pattern matches.

    ``timestamps`` are epoch milliseconds, as IoTDB gives them (``times`` has them as UTC
    datetimes, to the microsecond); ``values[i]`` is the column of ``schemas[i]``, ``None`` where
    the row has no point. Everything is immutable: a trigger cannot change what is written.
    """

    device: str
    schemas: tuple[Measurement, ...]
    timestamps: tuple[int, ...]
    values: tuple[tuple[object, ...], ...]
    micros: tuple[int, ...] = ()

    @property
    def row_size(self) -> int:
        return len(self.timestamps)

    @property
    def times(self) -> tuple[datetime, ...]:
        micros = self.micros or tuple(t * 1000 for t in self.timestamps)
        return tuple(EPOCH + timedelta(microseconds=t) for t in micros)

    def columns(self) -> Iterator[tuple[Measurement, tuple[object, ...]]]:
        """Each matched series with its values."""
        return zip(self.schemas, self.values, strict=True)

    def column(self, name: str) -> tuple[object, ...]:
        for schema, values in zip(self.schemas, self.values, strict=True):
            if schema.name == name:
                return values
        raise KeyError(f"the tablet of {self.device} has no measurement {name!r} "
                       f"(it has {', '.join(s.name for s in self.schemas)})")

    def rows(self) -> Iterator[tuple[int, dict[str, object]]]:
        """(timestamp in ms, {measurement: value}) per row, leaving out the series without a point."""
        for i, ts in enumerate(self.timestamps):
            yield ts, {s.name: v[i] for s, v in zip(self.schemas, self.values, strict=True) if v[i] is not None}

    def paths(self) -> list[str]:
        return [f"{self.device}.{s.name}" for s in self.schemas]


class InsertTrigger:
    """The base class of a trigger. Every method is optional; the defaults do nothing and succeed.

    Lifecycle: each instance runs ``validate`` then ``on_create`` once; a stateful instance that the
    stream node re-creates after a restart then runs ``restore``; DROP TRIGGER runs ``on_drop`` once.
    ``fire`` is called synchronously, on the writer's thread, for every matching write: return
    False or raise to fail it, and ``failure_strategy`` says what a failure does.
    """

    def validate(self, attributes: TriggerAttributes) -> None:
        """Check the attributes; raising fails the CREATE TRIGGER, which then registers nothing."""

    def on_create(self, attributes: TriggerAttributes) -> None:
        """Once per instance, after ``validate``: read attributes, open connections or files."""

    def on_drop(self) -> None:
        """Once, at DROP TRIGGER: release resources, persist results."""

    def restore(self) -> None:
        """A stateful trigger's instance re-created when the stream node restarts: reload state."""

    def failure_strategy(self) -> FailureStrategy:
        return FailureStrategy.OPTIMISTIC

    def fire(self, tablet: Tablet) -> bool:
        return True


# --- statements --------------------------------------------------------------------------------


@dataclass(frozen=True)
class CreateInsertTrigger(Statement):
    """CREATE [STATELESS|STATEFUL] TRIGGER name BEFORE|AFTER INSERT ON pattern AS 'pkg.mod.Class'
    [USING URI 'uri'] [WITH ("k" = "v", ...)]."""

    name: str
    type: TriggerType
    event: TriggerEvent
    pattern: SeriesPath
    class_name: str
    uri: str | None = None
    attributes: tuple[tuple[str, str], ...] = ()
    kind = "CREATE TRIGGER"

    @property
    def subject(self) -> str:
        return self.name


@dataclass(frozen=True)
class DropInsertTrigger(Statement):
    name: str
    kind = "DROP TRIGGER"

    @property
    def subject(self) -> str:
        return self.name


@dataclass(frozen=True)
class ShowInsertTriggers(Statement):
    kind = "SHOW TRIGGERS"
