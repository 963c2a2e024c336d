"""TDengine's stream syntax before 3.3.7 (references 001 and 003), lowered into the shared model.

- :mod:`.streams`: the legacy CREATE STREAM as written, PAUSE and RESUME STREAM
- :mod:`.lower`: the legacy statement as the model, and the rules its text shows
- :mod:`.parser`: the statement table: 3.3.7's, with the legacy stream statements beside it
- :mod:`.migrate`: the nearest 3.3.7 statement, and what it cannot reproduce
"""

from __future__ import annotations

from airflow_stream_provider.sql.tdengine_legacy.parser import Parser, parse

__all__ = ["Parser", "parse"]
