"""Sphinx configuration of the documentation site: MyST pages, the furo theme, autodoc of the public
API. Built by dev/docs with warnings as errors and without network."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# importing the API for autodoc must not start Spark or need a home: the modules open nothing at import
os.environ.setdefault("AIRFLOW_STREAM_HOME", str(ROOT / "docs" / "_build" / "home"))

import airflow_stream_provider  # noqa: E402

project = "airflow-stream-provider"
author = "airflow-stream-provider contributors"
copyright = "the airflow-stream-provider contributors"  # noqa: A001
release = version = airflow_stream_provider.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinxarg.ext",
]
# no network at build time: no intersphinx
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
myst_enable_extensions = ["colon_fence"]
myst_heading_anchors = 3
suppress_warnings = ["myst.header"]

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"show-inheritance": True}

html_theme = "furo"
html_title = f"airflow-stream-provider {release}"
html_static_path: list[str] = []
