"""Streams declared in code: a ``CREATE STREAM`` (or an IoTDB ``CREATE CQ``) kept in the DAG folder,
and what its declaration says to do when it differs from the stream that runs.

Pure decisions, no I/O but reading the declared files: :func:`declare` checks one statement and
names its stream, :func:`read_folder` reads a folder of ``.sql`` files (one statement each),
:func:`same_definition` and :func:`definition_diff` compare a declaration with a stored definition.
The deploy task (:mod:`airflow_stream_provider.streams.declared`) acts on them; parsing a DAG file
only reads.

A ``.sql`` file says what to do on a change in a comment line of its own, before the statement::

    -- on change: recreate
    -- on change: recreate and recalculate from 2025-01-01T00:00:00Z

and how stale its results may be (:mod:`~airflow_stream_provider.plan.freshness`)::

    -- freshness: 5m
    -- freshness: 5m, silent after 3
    -- freshness: 5m, silent after 90s
"""

from __future__ import annotations

import difflib
import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.model.names import DATABASE, STREAM, check_name
from airflow_stream_provider.plan.freshness import SILENT_AFTER, Freshness
from airflow_stream_provider.plan.freshness import of as freshness_of
from airflow_stream_provider.sql import parse

#: the comment line of a ``.sql`` declaration that says what to do when it differs from the stream
DIRECTIVE = re.compile(r"^\s*--\s*on\s+change\s*:\s*(?P<what>.*?)\s*$", re.IGNORECASE)
#: the comment line of a ``.sql`` declaration that says how stale the stream's results may be
FRESHNESS = re.compile(r"^\s*--\s*freshness\s*:\s*(?P<bound>[^,\s]+)\s*(?:,\s*silent\s+after\s+(?P<after>[^\s]+)"
                       r"(?:\s+periods?)?\s*)?$", re.IGNORECASE)
_FRESHNESS_LINE = re.compile(r"^\s*--\s*freshness\s*:", re.IGNORECASE)
_RECALCULATE = re.compile(r"^recreate\s+and\s+recalculate\s+from\s+(?P<at>\S.*)$", re.IGNORECASE)


@dataclass(frozen=True)
class StreamDeclaration:
    """One stream as the code declares it.

    :param db: the stream's database
    :param name: the stream's name
    :param text: the statement, as written (without the directive line)
    :param source: where it is declared (a file, or the DAG file that declared it in Python)
    :param recreate: when the running stream's definition differs, drop it (its output tables are
        kept) and create it anew from this declaration
    :param recalculate_from: with ``recreate``, then recalculate its windows from this instant to now
    :param freshness: how stale its results may be (None: as ``airflow-stream.toml`` says, if it does)
    """

    db: str
    name: str
    text: str
    source: str
    recreate: bool = False
    recalculate_from: datetime | None = None
    freshness: Freshness | None = None

    @property
    def qualified(self) -> str:
        return f"{self.db}.{self.name}"

    @classmethod
    def of(cls, text: str, *, database: str | None = None, recreate: bool = False,
           recalculate_from: datetime | str | None = None, source: str = "<python>",
           freshness: timedelta | str | None = None, silent_after: int | timedelta | str = SILENT_AFTER,
           ) -> StreamDeclaration:
        """The declaration of the stream ``text`` creates, written in Python (:func:`declare`)."""
        return declare(text, database=database, source=source, recreate=recreate, recalculate_from=recalculate_from,
                       freshness=freshness, silent_after=silent_after)

    @property
    def fingerprint(self) -> str:
        """A short hash of the definition (its spacing aside) and of what to do on a change."""
        fresh = f"\n{sorted(self.freshness.to_json().items())}" if self.freshness is not None else ""
        return hashlib.sha256(f"{normalized(self.text)}\n{self.change}{fresh}".encode()).hexdigest()[:16]

    @property
    def change(self) -> str:
        """What the declaration says to do on a change, in the words of a ``.sql`` directive."""
        if self.recalculate_from is not None:
            return f"recreate and recalculate from {self.recalculate_from.isoformat()}"
        return "recreate" if self.recreate else "refuse"


def normalized(text: str) -> str:
    """A definition with its spacing and closing semicolon aside."""
    return " ".join(text.strip().rstrip(";").split())


def same_definition(stored: str, declared: str) -> bool:
    return normalized(stored) == normalized(declared)


def definition_diff(stored: str, declared: str, name: str) -> str:
    """The unified diff from the running definition to the declared one."""
    old = [line.rstrip() for line in stored.strip().rstrip(";").splitlines()]
    new = [line.rstrip() for line in declared.strip().rstrip(";").splitlines()]
    return "\n".join(difflib.unified_diff(old, new, f"running {name}", f"declared {name}", lineterm=""))


def instant(value: datetime | str, *, source: str = "") -> datetime:
    """``value`` as a UTC instant (ISO 8601 text without an offset is UTC)."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip().strip("'\""))
        except ValueError:
            raise StreamDefinitionError(f"{source}: recalculate from {value!r}: not an ISO 8601 instant",
                                        clause="on change") from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def declare(text: str, *, database: str | None = None, source: str = "<python>", recreate: bool = False,
            recalculate_from: datetime | str | None = None, language: str | None = None,
            freshness: timedelta | str | float | None = None,
            silent_after: int | timedelta | str = SILENT_AFTER) -> StreamDeclaration:
    """The declaration of the one stream ``text`` creates; StreamDefinitionError when it does not
    parse, is not one CREATE STREAM / CREATE CQ, or names no database.

    :param database: the stream's database when the statement does not name one.
    :param freshness: the bound of its realtime lag (``"5m"``, a timedelta); ``silent_after`` the
        expected periods (or the time) rows may arrive with no window fired.
    """
    statements = parse(text, language)
    if len(statements) != 1 or not isinstance(statements[0], m.CreateStream):
        raise StreamDefinitionError(f"{source}: a stream declaration holds one CREATE STREAM (or CREATE CQ), "
                                    f"not {len(statements)} statement(s)")
    stmt = statements[0]
    db = stmt.name.db or database
    if not db:
        raise StreamDefinitionError(f"{source}: stream {stmt.name.name} names no database: write db.name or "
                                    "give the declarations a database", clause="CREATE STREAM")
    if recalculate_from is not None and not recreate:
        raise StreamDefinitionError(f"{source}: recalculate from needs recreate", clause="on change")
    try:
        bound = freshness_of(freshness, silent_after) if freshness is not None else None
    except StreamDefinitionError as err:
        raise StreamDefinitionError(f"{source}: {err}", clause="freshness") from None
    return StreamDeclaration(check_name(db, DATABASE).lower(), check_name(stmt.name.name, STREAM).lower(),
                             stmt.text, source, recreate,
                             instant(recalculate_from, source=source) if recalculate_from is not None else None,
                             bound)


def read_file(path: Path, *, database: str | None = None, language: str | None = None) -> StreamDeclaration:
    """The declaration in a ``.sql`` file, with its ``-- on change:`` directive."""
    lines, recreate, start = [], False, None
    freshness: str | None = None
    silent_after: int | str = SILENT_AFTER
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if _FRESHNESS_LINE.match(line):
            bound = FRESHNESS.match(line)
            if bound is None:
                raise StreamDefinitionError(f"{path}: {line.strip()!r}: expected -- freshness: <duration>[, silent "
                                            "after <periods or duration>]", line=number, clause="freshness")
            freshness, after = bound["bound"], bound["after"]
            silent_after = SILENT_AFTER if after is None else int(after) if after.isdigit() else after
            try:
                freshness_of(freshness, silent_after)
            except StreamDefinitionError as err:
                raise StreamDefinitionError(f"{path}: {err.args[0]}", line=number, clause="freshness") from None
            lines.append("")  # positions in the statement stay those of the file
            continue
        found = DIRECTIVE.match(line)
        if found is None:
            lines.append(line)
            continue
        what = found["what"]
        again = _RECALCULATE.match(what)
        if again is not None:
            recreate, start = True, again["at"]
        elif what.lower() == "recreate":
            recreate = True
        else:
            raise StreamDefinitionError(f"{path}: on change: {what!r}: expected recreate, or recreate and "
                                        "recalculate from <instant>", line=number, clause="on change")
        lines.append("")  # positions in the statement stay those of the file
    return declare("\n".join(lines), database=database, source=str(path), recreate=recreate,
                   recalculate_from=start, language=language, freshness=freshness,
                   silent_after=silent_after)


def read_folder(folder: Path, *, database: str | None = None,
                language: str | None = None) -> tuple[list[StreamDeclaration], dict[str, str]]:
    """The declarations of every ``.sql`` file under ``folder`` (a file in a subfolder takes the
    subfolder's name as its database), and the files that could not be read with why.
    StreamDefinitionError when two files declare one stream."""
    found: dict[tuple[str, str], StreamDeclaration] = {}
    broken: dict[str, str] = {}
    for path in sorted(folder.rglob("*.sql")):
        relative = path.relative_to(folder).parts
        db = relative[0] if len(relative) > 1 else database
        try:
            declaration = read_file(path, database=db, language=language)
        except StreamDefinitionError as err:
            broken[str(path)] = str(err)
            continue
        key = (declaration.db, declaration.name)
        if key in found:
            raise StreamDefinitionError(f"{path} and {found[key].source} both declare stream {declaration.qualified}")
        found[key] = declaration
    return list(found.values()), broken
