"""Where the stream node of this home is: its folder, port, token and, when it runs, its Spark Connect URL.

The node program (:mod:`airflow_stream_provider.node.server`) writes ``node.json`` into
:func:`folder`; anything that submits Spark work reads it here without importing the node.
The node's Spark Connect refuses clients without the pre-shared token kept in ``node/token``
(mode 0600: only the node's user may read it, and so connect).
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from urllib.parse import quote

from airflow_stream_provider import config

DEFAULT_PORT = 15002
HOST = "127.0.0.1"
#: the variable both Spark's Connect server and pyspark's client read the token from
TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"
#: the module the node process runs, as it appears in its command line
NODE_MODULE = "airflow_stream_provider.node.server"


def folder() -> Path:
    return config.home() / "node"


def token_path() -> Path:
    return folder() / "token"


def new_token() -> str:
    """A fresh token for the node's Spark Connect, written to :func:`token_path` with mode 0600:
    random, or ``SPARK_CONNECT_AUTHENTICATE_TOKEN`` when set (a deployment shares it with its clients
    that way, as ``docker/compose.yaml`` does)."""
    value = os.environ.get(TOKEN_ENV) or secrets.token_urlsafe(32)
    path = token_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)  # a new file, created 0600, whatever mode an old one had
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(value)
    return value


def token() -> str | None:
    """The token of this home's node, when one was generated."""
    try:
        return token_path().read_text(encoding="utf-8").strip() or None
    except FileNotFoundError:
        return None


def serving_token() -> str:
    """The token a starting node serves with: ``SPARK_CONNECT_AUTHENTICATE_TOKEN`` when set, else the
    one in :func:`token_path`, else a new one; :func:`token_path` holds it afterwards."""
    current = token()
    return new_token() if os.environ.get(TOKEN_ENV) or current is None else current


def with_token(url: str, secret: str | None) -> str:
    """``url`` with the ``token`` parameter pyspark sends as a bearer token (unchanged when it has one)."""
    if not secret or ";token=" in url:
        return url
    param = f"token={quote(secret, safe='')}"
    return f"{url};{param}" if ";" in url else f"{url.rstrip('/')}/;{param}"


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
        """The node's address, for display: without the token."""
        return f"sc://{HOST}:{self.port}"

    @property
    def connect_url(self) -> str:
        """The URL a client of this home connects with: the address and the node's token."""
        return with_token(self.url, token())


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
    """The node's address when it runs (for display: :func:`running_connect_url` carries the token)."""
    info = running()
    return info.url if info else None


def running_connect_url() -> str | None:
    """The URL, token included, that local clients (the CLI, tests, local Airflow tasks) connect with."""
    info = running()
    return info.connect_url if info else None
