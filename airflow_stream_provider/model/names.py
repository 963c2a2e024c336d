"""The rule for database, table, stream and column names, and the one way a name becomes a path.

TDengine accepts any text between backquotes as a name except ``.`` (it separates a database from
a table), within a length in bytes: 64 for a database, 192 for a table or a stream, 64 for a column
or a tag. Here a database, table or stream name is also a folder or file name under the home
(``warehouse/<db>/<table>``, ``streams/<db>/<name>.sql``, ``state/<db>/<name>/``), so such a name
must in addition not be empty and hold no ``/``, ``\\``, NUL or other control character; with no
``.``, it is never ``.``/``..`` nor a hidden file (those hold the catalog's own records). Spaces,
CJK and emoji stay legal. Column and tag names are not paths: they obey the ``.``, length and
control-character rules, and ``tbname`` is reserved for the subtable name column.

The rule is checked where a statement is parsed (with the name's position), and again wherever a
name is turned into a path (:func:`path_under`), because names also arrive from stored files, URLs
and data values.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from pathlib import Path

from airflow_stream_provider.exceptions import StreamError

#: the column of a supertable holding each row's subtable name
TBNAME = "tbname"
#: the namespace of IoTDB's continuous queries (``root.<cq_id>`` in SHOW STREAMS, STOP/START STREAM and
#: their DAGs): no database takes this name, so a stream named ``root.<name>`` is always a CQ
CQ_NAMESPACE = "root"
RESERVED_DATABASE = ("is reserved: continuous queries are the streams of the namespace root (root.<cq_id>), "
                     "and root is the first node of every IoTDB path; choose another name")


class InvalidName(StreamError, ValueError):
    """A name breaks the name rule, or a path derived from names leaves its root."""


@dataclass(frozen=True)
class NameKind:
    """What a name names, and so which limits it has."""

    label: str
    max_bytes: int
    path: bool  # the name becomes a folder or file name
    reserved: tuple[str, ...] = ()


DATABASE = NameKind("database", 64, path=True)
TABLE = NameKind("table", 192, path=True)
STREAM = NameKind("stream", 192, path=True)
COLUMN = NameKind("column", 64, path=False, reserved=(TBNAME,))
TAG = NameKind("tag", 64, path=False, reserved=(TBNAME,))


def bad_character(name: str, kind: NameKind) -> str | None:
    """The first character of ``name`` that a name of ``kind`` cannot hold, or None; a ``.`` only
    when no other character is wrong, so that a message names the worse one."""
    for char in name:
        if kind.path and char in "/\\":
            return char
        if unicodedata.category(char) in ("Cc", "Cs"):  # control characters (NUL among them), lone surrogates
            return char
    return "." if "." in name else None


def name_problem(name: str, kind: NameKind) -> str | None:
    """What is wrong with ``name`` as a name of ``kind``, or None when it is a valid name."""
    if not name:
        return "is empty"
    char = bad_character(name, kind)
    if char == "." and name.startswith("."):
        return "starts with '.', which a name cannot"
    if char == ".":
        return "contains '.', which TDengine keeps out of names (it separates a database from a table)"
    if char is not None:
        return f"contains {char!r}, which a {kind.label} name cannot hold"
    size = max(len(name.encode("utf-8", "surrogatepass")), len(name.lower().encode("utf-8", "surrogatepass")))
    if size > kind.max_bytes:
        return f"is {size} bytes long; a {kind.label} name has at most {kind.max_bytes}"
    if name.lower() in kind.reserved:
        return "is reserved for the subtable name column"
    return None


def shown(name: str) -> str:
    """``name`` quoted for a message, cut short when it is long."""
    return repr(name) if len(name) <= 60 else repr(name[:60]) + "..."


def check_name(name: str, kind: NameKind) -> str:
    """``name`` in lower case, as it is stored; raises :class:`InvalidName` when it breaks the rule."""
    problem = name_problem(name, kind)
    if problem is not None:
        raise InvalidName(f"{kind.label} name {shown(name)} {problem}")
    return name.lower()


def path_under(root: Path, *parts: str) -> Path:
    """``root / parts``, once it is known to lie strictly inside ``root``; raises
    :class:`InvalidName` otherwise. Callers check each name with :func:`check_name` first: this is
    the second line, for names no rule saw and for symbolic links.

    The path is resolved the cheap way, since this runs on every lookup: each part must be one
    plain path component (not empty, ``.`` or ``..``, no separator or NUL), and each component that
    is a symbolic link must resolve to a place inside the resolved ``root``. A path that passes has
    the same place inside ``root`` as its full resolution."""
    if not parts:
        raise InvalidName(f"no place inside {root} was named")
    for part in parts:
        if part in ("", ".", "..") or any(c in part for c in "/\\\0"):
            raise InvalidName(f"{shown(part)} is not a name of a folder or file inside {root}")
    path = Path(root)
    for part in parts:
        path = path / part
        if path.is_symlink():
            target, base = path.resolve(), Path(root).resolve()
            if target == base or not target.is_relative_to(base):
                raise InvalidName(f"{shown('/'.join(parts))} leads out of {root} through the link {path}")
    return path
