"""Apache IoTDB's SQL (reference 004): series paths, queries, continuous queries.

- :mod:`.lexer`: IoTDB's numbers, durations (``1d2h``, ``500ms``) and unquoted timestamps
- :mod:`.expressions`: paths, patterns and expressions
- :mod:`.parser`: the statements
- :mod:`.validate`: the rules of a query and of a continuous query, and CREATE CQ as a stream
- :mod:`.route`: which statements of a text are IoTDB's
"""

from airflow_stream_provider.sql.iotdb.parser import parse
from airflow_stream_provider.sql.iotdb.route import recognises
from airflow_stream_provider.sql.iotdb.validate import CQ_NAMESPACE

__all__ = ["CQ_NAMESPACE", "parse", "recognises"]
