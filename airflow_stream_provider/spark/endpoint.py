"""Where the stream node of this home is: its folder, port and, when it runs, its Spark Connect URL.

The node program (:mod:`airflow_stream_provider.node.server`) writes ``node.json`` into
:func:`folder`; anything that submits Spark work reads it here without importing the node.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from airflow_stream_provider import config

DEFAULT_PORT = 15002
HOST = "127.0.0.1"
#: the module the node process runs, as it appears in its command line
NODE_MODULE = "airflow_stream_provider.node.server"


def folder() -> Path:
    return config.home() / "node"


def default_port() -> int:
    value = os.environ.get("AIRFLOW_STREAM_NODE_PORT") or config.settings().get("node", {}).get("port")
    return int(value) if value else DEFAULT_PORT


@dataclass(frozen=True)
class NodeInfo:
    pid: int
    port: int
    started: datetime

    @property
    def url(self) -> str:
        return f"sc://{HOST}:{self.port}"


def alive(pid: int) -> bool:
    """True when ``pid`` runs this module (a recycled pid running something else does not count)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    if Path(f"/proc/{pid}/stat").read_text().split(") ")[-1].startswith("Z"):
        return False
    return NODE_MODULE.encode() in cmdline


def running() -> NodeInfo | None:
    """The node of this home when it runs."""
    try:
        data = json.loads((folder() / "node.json").read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    info = NodeInfo(int(data["pid"]), int(data["port"]), datetime.fromisoformat(data["started"]))
    return info if alive(info.pid) else None


def running_url() -> str | None:
    info = running()
    return info.url if info else None
