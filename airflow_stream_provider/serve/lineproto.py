"""InfluxDB line protocol as TDengine's schemaless writing reads it: ``measurement,tag_set
field_set [timestamp]``, with TDengine's escapes (a backslash before a comma, an equal sign or a
space in names and tag values; before a double quote or a backslash inside a string field).

The parser keeps each field value in a raw form that :mod:`.schemaless` types column by column:
a string field as ``"`` followed by its text (``L"`` for NCHAR), anything else as written.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


class ProtocolError(ValueError):
    """Input that the protocol does not accept; ``line`` is 1-based (0: not about one line)."""

    def __init__(self, message: str, line: int = 0) -> None:
        self.message = message
        self.line = line
        super().__init__(f"line {line}: {message}" if line else message)


@dataclass
class Measurement:
    """The rows of one measurement, column by column (``None`` where a row has no value)."""

    name: str
    lines: list[int] = field(default_factory=list)
    times: list[str | None] = field(default_factory=list)
    tags: dict[str, list[str | None]] = field(default_factory=dict)
    fields: dict[str, list[str | None]] = field(default_factory=dict)

    def add(self, line: int, time: str | None, tags: list[tuple[str, str]], fields: list[tuple[str, str]]) -> None:
        row = len(self.lines)
        self.lines.append(line)
        self.times.append(time)
        for columns, pairs, kind in ((self.tags, tags, "tag"), (self.fields, fields, "field")):
            seen = set()
            for key, value in pairs:
                if key in seen:
                    raise ProtocolError(f"{kind} {key!r} appears twice", line)
                seen.add(key)
                column = columns.get(key)
                if column is None:
                    column = columns[key] = [None] * row
                column.append(value)
            for column in columns.values():
                if len(column) == row:
                    column.append(None)

    def extend(self, lines: list[int], times: list[str | None], tags: dict[str, list[str | None]],
               fields: dict[str, list[str | None]]) -> None:
        """Add rows that all have the same tag and field keys."""
        before, count = len(self.lines), len(lines)
        self.lines.extend(lines)
        self.times.extend(times)
        for columns, given in ((self.tags, tags), (self.fields, fields)):
            for key, column in columns.items():
                column.extend(given.get(key) or [None] * count)
            for key, values in given.items():
                if key not in columns:
                    padded: list[str | None] = [None] * before
                    columns[key] = padded + values

    def restore_order(self) -> None:
        """Put the rows back in the order of their lines (rows added by shape come grouped)."""
        order = sorted(range(len(self.lines)), key=self.lines.__getitem__)
        if order == list(range(len(order))):
            return
        self.lines = [self.lines[i] for i in order]
        self.times = [self.times[i] for i in order]
        for columns in (self.tags, self.fields):
            for key, column in columns.items():
                columns[key] = [column[i] for i in order]

    @property
    def rows(self) -> int:
        return len(self.lines)


def parse(text: str) -> dict[str, Measurement]:
    """The rows of ``text`` by measurement, in the order they came; raises :class:`ProtocolError`
    naming the first bad line (nothing is returned then)."""
    if "\\" not in text and '"' not in text:
        found = _one_shape(text)
        if found is None:
            found = _columnar(text)
        if found is not None:
            return found
    return _by_line(text)


def _one_shape(text: str) -> dict[str, Measurement] | None:
    """The rows of a body whose lines all have the first line's shape (measurement, tag keys, field
    keys, all with a time or all without), with no blank line, comment or blank at a line's ends,
    cut into columns by Arrow's string splits; None for any other body (:func:`_columnar` then
    reads it)."""
    body = text[:-1] if text.endswith("\n") else text
    first = body.split("\n", 1)[0].split(" ")
    if not body or len(first) not in (2, 3):
        return None
    name, *tag_items = first[0].split(",")
    tag_keys = [item.partition("=")[0] for item in tag_items]
    field_keys = [item.partition("=")[0] for item in first[1].split(",")]
    if not name or name.startswith("#") or not all(tag_keys) or not all(field_keys) \
            or len(set(tag_keys)) < len(tag_keys) or len(set(field_keys)) < len(field_keys):
        return None
    lines = pc.list_flatten(pc.split_pattern(pa.array([body], pa.string()), "\n"))
    if not pc.all(pc.equal(pc.utf8_trim_whitespace(lines), lines)).as_py():
        return None  # a blank line, or blanks at the ends of one
    parts = _cut(lines, " ", len(first))
    if parts is None:
        return None
    head = _cut(parts[0], ",", 1 + len(tag_keys))
    fields = _cut(parts[1], ",", len(field_keys))
    if head is None or fields is None or not pc.all(pc.equal(head[0], name)).as_py():
        return None
    tags = _after_keys(head[1:], tag_keys)
    values = _after_keys(fields, field_keys)
    if tags is None or values is None:
        return None
    count = len(lines)
    times = parts[2].to_pylist() if len(first) == 3 else [None] * count
    return {name: Measurement(name, list(range(1, count + 1)), times, tags, values)}


def _cut(pieces: pa.Array, separator: str, count: int) -> list[pa.Array] | None:
    """The ``count`` non-empty parts of every piece split at ``separator``, as one array a part;
    None when a piece has another number of parts or an empty one."""
    split = pc.split_pattern(pieces, separator)
    if not pc.all(pc.equal(pc.list_value_length(split), count)).as_py():
        return None
    flat = pc.list_flatten(split)
    if pc.any(pc.equal(flat, "")).as_py():
        return None
    if count == 1:
        return [flat]
    every = np.arange(0, len(flat), count)
    return [pc.take(flat, every + i) for i in range(count)]


def _after_keys(items: list[pa.Array], keys: list[str]) -> dict[str, list[str | None]] | None:
    """The values of ``key=value`` items, the key of each array given; None when one has another key
    or no value."""
    out = {}
    for key, array in zip(keys, items, strict=True):
        if not pc.all(pc.starts_with(array, key + "=")).as_py():
            return None
        values = pc.utf8_slice_codeunits(array, len(key) + 1)
        if pc.any(pc.equal(values, "")).as_py():
            return None
        out[key] = values.to_pylist()
    return out


#: a line without escapes or strings: its measurement and tags, its fields, and its time
_LINE = r"^(?P<head>[^ ]+) (?P<fields>[^ ]+)(?: (?P<time>[^ ]+))?$"
_KEYS = r"=[^,]*"


def _columnar(text: str) -> dict[str, Measurement] | None:
    """The rows of a body without escapes or strings, cut into columns by Arrow's string kernels:
    lines of one shape (measurement, tag keys, field keys) at a time. None when a line does not
    fit the shape of a correct line (the line-by-line reading then says what is wrong with it)."""
    numbers, kept = [], []
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.strip()
        if line and not line.startswith("#"):
            numbers.append(number)
            kept.append(line)
    if not kept:
        return {}
    parts = pc.extract_regex(pa.array(kept, pa.string()), _LINE)
    if parts.null_count:
        return None
    head, fields, times = (parts.field(name) for name in ("head", "fields", "time"))
    shapes = pa.table({"head": pc.replace_substring_regex(head, _KEYS, ""),
                       "fields": pc.replace_substring_regex(fields, _KEYS, ""),
                       "row": pa.array(range(len(kept)), pa.int64())})
    groups = shapes.group_by(["head", "fields"], use_threads=False).aggregate([("row", "list")])
    out: dict[str, Measurement] = {}
    for head_shape, field_shape, rows in zip(*(groups.column(i).to_pylist() for i in range(3)), strict=True):
        name, *tag_keys = head_shape.split(",")
        field_keys = field_shape.split(",")
        if not name or not all(tag_keys) or not all(field_keys) or len(set(tag_keys)) < len(tag_keys) \
                or len(set(field_keys)) < len(field_keys):
            return None
        take = pa.array(rows, pa.int64())
        tags = _values(pc.take(head, take), tag_keys, 1)
        values = _values(pc.take(fields, take), field_keys, 0)
        if tags is None or values is None:
            return None
        stamps = pc.take(times, take).to_pylist()
        found = out.setdefault(name, Measurement(name))
        found.extend([numbers[r] for r in rows], [t or None for t in stamps], tags, values)
    for found in out.values():
        found.restore_order()
    return out


def _values(pieces: pa.Array, keys: list[str], skip: int) -> dict[str, list[str | None]] | None:
    """The value of each key of comma-separated ``key=value`` pieces (after ``skip`` leading items)."""
    split = pc.split_pattern(pieces, ",")
    out = {}
    for index, key in enumerate(keys, start=skip):
        values = pc.utf8_slice_codeunits(pc.list_element(split, index), len(key) + 1)
        if pc.any(pc.equal(values, "")).as_py():
            return None
        out[key] = values.to_pylist()
    return out


def _by_line(text: str) -> dict[str, Measurement]:
    out: dict[str, Measurement] = {}
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if "\\" in line or '"' in line:
            name, tags, fields, time = _scan(line, number)
        else:
            name, tags, fields, time = _split(line, number)
        found = out.get(name)
        if found is None:
            found = out[name] = Measurement(name)
        found.add(number, time, tags, fields)
    return out


def _split(line: str, number: int) -> tuple[str, list[tuple[str, str]], list[tuple[str, str]], str | None]:
    """A line without escapes or strings: split on its spaces, commas and equal signs."""
    parts = line.split()
    if len(parts) not in (2, 3):
        raise ProtocolError("expected `measurement[,tags] fields [timestamp]`", number)
    head = parts[0].split(",")
    name = head[0]
    if not name:
        raise ProtocolError("the measurement name is empty", number)
    tags = [_pair(item, number, "tag") for item in head[1:]]
    fields = [_pair(item, number, "field") for item in parts[1].split(",")]
    return name, tags, fields, parts[2] if len(parts) == 3 else None


def _pair(item: str, number: int, kind: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key or not value:
        raise ProtocolError(f"{kind} {item!r} is not key=value", number)
    return key, value


class _Scanner:
    """A line with escapes or string fields, read character by character."""

    def __init__(self, line: str, number: int) -> None:
        self.line, self.number, self.i = line, number, 0

    def at(self, chars: str) -> bool:
        return self.i < len(self.line) and self.line[self.i] in chars

    def token(self, stops: str) -> str:
        line, out = self.line, []
        while self.i < len(line) and line[self.i] not in stops:
            if line[self.i] == "\\" and self.i + 1 < len(line) and line[self.i + 1] in ",= \\":
                self.i += 1
            out.append(line[self.i])
            self.i += 1
        return "".join(out)

    def string(self) -> str:
        """A double-quoted field value from its opening quote on; ``\\"`` and ``\\\\`` are escapes."""
        line, out = self.line, []
        self.i += 1
        while self.i < len(line):
            char = line[self.i]
            if char == "\\" and self.i + 1 < len(line) and line[self.i + 1] in '"\\':
                out.append(line[self.i + 1])
                self.i += 2
                continue
            if char == '"':
                self.i += 1
                return "".join(out)
            out.append(char)
            self.i += 1
        raise ProtocolError("a string field has no closing double quote", self.number)

    def field_value(self) -> str:
        line = self.line
        if self.at('"'):
            return '"' + self.string()
        if self.at("LlGgBb") and self.i + 1 < len(line) and line[self.i + 1] == '"':
            prefix = line[self.i].upper()
            self.i += 1
            return prefix + '"' + self.string()
        return self.token(", ")


def _scan(line: str, number: int) -> tuple[str, list[tuple[str, str]], list[tuple[str, str]], str | None]:
    scan = _Scanner(line, number)
    name = scan.token(", ")
    if not name:
        raise ProtocolError("the measurement name is empty", number)
    tags = []
    while scan.at(","):
        scan.i += 1
        key = scan.token("=, ")
        if not key or not scan.at("="):
            raise ProtocolError(f"tag {key!r} has no value", number)
        scan.i += 1
        value = scan.token(", ")
        if not value:
            raise ProtocolError(f"tag {key!r} has no value", number)
        tags.append((key, value))
    if not scan.at(" "):
        raise ProtocolError("expected a space before the fields", number)
    while scan.at(" "):
        scan.i += 1
    fields = []
    while True:
        key = scan.token("=, ")
        if not key or not scan.at("="):
            raise ProtocolError(f"field {key!r} has no value", number)
        scan.i += 1
        value = scan.field_value()
        if not value:
            raise ProtocolError(f"field {key!r} has no value", number)
        fields.append((key, value))
        if not scan.at(","):
            break
        scan.i += 1
    rest = line[scan.i:].strip()
    if rest and (" " in rest or not rest.lstrip("-").isdigit()):
        raise ProtocolError(f"the timestamp {rest!r} is not an integer", number)
    return name, tags, fields, rest or None
