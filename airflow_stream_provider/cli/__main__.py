"""``python -m airflow_stream_provider.cli``: the same as ``airflow-stream``."""

import sys

from airflow_stream_provider.cli.commands import main

sys.exit(main())
