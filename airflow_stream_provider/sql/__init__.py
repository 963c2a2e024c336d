"""The stream language: parse TDengine statements into the model, translate queries to Spark SQL."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_stream_provider.model import Statement

__all__ = ["parse", "to_spark"]


def parse(text: str) -> list[Statement]:
    """Parse and validate every statement in ``text``; raises ``StreamDefinitionError``."""
    # Imported here: the model imports the dialect from this package, and the parser the model.
    from airflow_stream_provider.sql.parser import parse as _parse

    return _parse(text)


def to_spark(tree: Any, **kwargs: Any) -> str:
    """Spark SQL for a TDengine expression tree; see :func:`.translate.to_spark`."""
    from airflow_stream_provider.sql.translate import to_spark as _to_spark

    return _to_spark(tree, **kwargs)
