"""Stream languages in, the stream model and Spark SQL out.

:func:`parse` reads statements of a language into :mod:`airflow_stream_provider.model`; every
language lowers to the same model. :func:`to_spark` translates a query tree (:mod:`.ast`) to Spark
SQL.

- :mod:`.grammar`: the lexer, the token cursor and timestamp strings every language reads with
- :mod:`.tdengine`: the TDengine 3.3.7 language
- :mod:`.tdengine_legacy`: TDengine's stream syntax before 3.3.7, beside 3.3.7's
- :mod:`.iotdb`: Apache IoTDB's SQL: series paths, queries, continuous queries
- :mod:`.ast`: placeholder, pseudo-column and window-clause nodes of the query tree
- :mod:`.functions`: the functions of the query language and their Spark SQL equivalents
- :mod:`.spark`: query trees to Spark SQL
"""

from __future__ import annotations

from collections.abc import Callable

from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.sql import iotdb, tdengine, tdengine_legacy
from airflow_stream_provider.sql.iotdb.route import statement_spans
from airflow_stream_provider.sql.spark import Binding, to_spark
from airflow_stream_provider.sql.tdengine.fast_insert import parse_insert

__all__ = ["DEFAULT_LANGUAGE", "LANGUAGES", "Binding", "parse", "to_spark"]

FrontEnd = Callable[[str, tuple[int, int] | None], list[m.Statement]]


def _any_language(text: str, span: tuple[int, int] | None = None) -> list[m.Statement]:
    """TDengine's and IoTDB's statements, each recognised by its shape: consecutive statements of
    one language are parsed together, positions staying those of the whole text."""
    runs: list[tuple[FrontEnd, int, int]] = []
    for start, end in statement_spans(text):
        front_end: FrontEnd = iotdb.parse if iotdb.recognises(text[start:end]) else tdengine_legacy.parse
        if runs and runs[-1][0] is front_end:
            runs[-1] = (front_end, runs[-1][1], end)
        else:
            runs.append((front_end, start, end))
    if not runs:  # nothing but blanks and comments: the parser says so as it always has
        return tdengine_legacy.parse(text)
    return [stmt for front_end, start, end in runs for stmt in front_end(text, (start, end))]


def _fast_insert(front_end: FrontEnd) -> FrontEnd:
    """``front_end``, reading an INSERT of the common shape by :func:`.tdengine.fast_insert.parse_insert`
    first: the same statement, sooner; anything else, errors included, goes to ``front_end``."""

    def parse_text(text: str, span: tuple[int, int] | None = None) -> list[m.Statement]:
        found = parse_insert(text) if span is None else None
        return found if found is not None else front_end(text, span)

    return parse_text


#: language name -> its parser: text (and the span of it to read) in, validated statements out
LANGUAGES: dict[str, FrontEnd] = {
    # TDengine's statements, with the stream syntax of 3.3.7 and of the engine before it, and
    # IoTDB's, each recognised by its shape
    "auto": _fast_insert(_any_language),
    # TDengine's statements, with the stream syntax of 3.3.7 and of the engine before it
    "tdengine": _fast_insert(tdengine_legacy.parse),
    # the same, with the 3.3.7 stream syntax only
    "tdengine-3.3.7": _fast_insert(tdengine.parse),
    # IoTDB's statements only
    "iotdb": iotdb.parse,
}
DEFAULT_LANGUAGE = "auto"


def parse(text: str, language: str | None = None) -> list[m.Statement]:
    """Parse and validate every statement in ``text``; raises ``StreamDefinitionError``.

    :param language: a key of :data:`LANGUAGES`; when not given, TDengine (in either stream syntax)
        and IoTDB, each statement recognised by its shape.
    """
    name = DEFAULT_LANGUAGE if language is None else language.lower()
    front_end = LANGUAGES.get(name)
    if front_end is None:
        raise StreamDefinitionError(f"unknown stream language {language!r}; expected one of {', '.join(LANGUAGES)}")
    return front_end(text, None)
