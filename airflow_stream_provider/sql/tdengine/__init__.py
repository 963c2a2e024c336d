"""The TDengine 3.3.7 stream language: statements, expressions and the rules of reference 000.

- :mod:`.dialect`: expressions and subqueries on sqlglot, into the tree of :mod:`..ast`
- :mod:`.values`: durations, timestamps, literals, data types, embedded SQL
- :mod:`.streams`: CREATE STREAM and stream management
- :mod:`.tables`: databases, tables, INSERT, DELETE, DROP, USE, SELECT
- :mod:`.parser`: the statement table and :func:`parse`
- :mod:`.validate`: the rules a CREATE STREAM breaks in its text alone
"""

from __future__ import annotations

from airflow_stream_provider.sql.tdengine.parser import Parser, parse

__all__ = ["Parser", "parse"]
