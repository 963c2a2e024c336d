"""How the stream node's processes log: each message as it is, one a line, to stdout (which
``node start`` sends to ``node/node.log``) and errors to stderr (sent there too), a worker's
messages with its slot before them. Only the node's own loggers (:data:`LOGGER` and those under
it) are configured: what Spark, py4j and the rest log is left as it was.
"""

from __future__ import annotations

import logging
import sys

#: the logger of the node's modules, each logging to its own under it
LOGGER = "airflow_stream_provider.node"


def _below_error(record: logging.LogRecord) -> bool:
    return record.levelno < logging.ERROR


def log_to_console(prefix: str = "") -> None:
    """Send what the node's modules log, from INFO up, to stdout (errors to stderr), each message
    after ``prefix``."""
    formatter = logging.Formatter(prefix.replace("%", "%%") + "%(message)s")
    out = logging.StreamHandler(sys.stdout)
    out.addFilter(_below_error)
    errors = logging.StreamHandler(sys.stderr)
    errors.setLevel(logging.ERROR)
    logger = logging.getLogger(LOGGER)
    for handler in (out, errors):
        handler.setFormatter(formatter)
    logger.handlers = [out, errors]
    logger.setLevel(logging.INFO)
    logger.propagate = False
