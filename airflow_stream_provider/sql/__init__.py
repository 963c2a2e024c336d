"""Stream languages in, the stream model and Spark SQL out.

:func:`parse` reads statements of a language into :mod:`airflow_stream_provider.model`; every
language lowers to the same model. :func:`to_spark` translates a query tree (:mod:`.ast`) to Spark
SQL.

- :mod:`.grammar`: the lexer, the token cursor and timestamp strings every language reads with
- :mod:`.tdengine`: the TDengine 3.3.7 language
- :mod:`.tdengine_legacy`: TDengine's stream syntax before 3.3.7, beside 3.3.7's
- :mod:`.ast`: placeholder, pseudo-column and window-clause nodes of the query tree
- :mod:`.functions`: the functions of the query language and their Spark SQL equivalents
- :mod:`.spark`: query trees to Spark SQL
"""

from __future__ import annotations

from collections.abc import Callable

from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.sql import tdengine, tdengine_legacy
from airflow_stream_provider.sql.spark import Binding, to_spark

__all__ = ["DEFAULT_LANGUAGE", "LANGUAGES", "Binding", "parse", "to_spark"]

#: language name -> its parser: text in, validated statements out
LANGUAGES: dict[str, Callable[[str], list[m.Statement]]] = {
    # TDengine's statements, with the stream syntax of 3.3.7 and of the engine before it, each
    # recognised by its shape
    "tdengine": tdengine_legacy.parse,
    # the same, with the 3.3.7 stream syntax only
    "tdengine-3.3.7": tdengine.parse,
}
DEFAULT_LANGUAGE = "tdengine"


def parse(text: str, language: str | None = None) -> list[m.Statement]:
    """Parse and validate every statement in ``text``; raises ``StreamDefinitionError``.

    :param language: a key of :data:`LANGUAGES`; TDengine, in either stream syntax, when not given.
    """
    name = DEFAULT_LANGUAGE if language is None else language.lower()
    front_end = LANGUAGES.get(name)
    if front_end is None:
        raise StreamDefinitionError(f"unknown stream language {language!r}; expected one of {', '.join(LANGUAGES)}")
    return front_end(text)
