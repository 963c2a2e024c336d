"""Where the stream node of this home is: its folder, port, token and, when it runs, its Spark Connect URL.

The node program (:mod:`airflow_stream_provider.node.server`) writes ``node.json`` into
:func:`folder`; anything that submits Spark work reads it here without importing the node.
The node's Spark Connect refuses clients without the pre-shared token kept in ``node/token``
(mode 0600: only the node's user may read it, and so connect).

A node is this home's node only while it holds the ``flock`` on ``node/node.lock`` and runs with
the random instance id that ``node.json`` records: a copy of the home (its lock held by no one),
a stale ``node.json`` or a recycled pid never count as a running node, so nothing stops them.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from urllib.parse import quote

from airflow_stream_provider import config
from airflow_stream_provider.files import hold_lock, lock_held, make_dirs

DEFAULT_PORT = 15002
HOST = "127.0.0.1"
#: the variable both Spark's Connect server and pyspark's client read the token from
TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"
#: the module the node process runs, as it appears in its command line
NODE_MODULE = "airflow_stream_provider.node.server"


def folder() -> Path:
    return config.home() / "node"


def lock_path() -> Path:
    """The file the node holds an exclusive ``flock`` on for as long as it runs."""
    return folder() / "node.lock"


def held() -> bool:
    """True when a process holds this home's node lock. The check takes a shared lock for an instant:
    checkers never block each other, and a starting node retries."""
    return lock_held(lock_path())


def token_path() -> Path:
    return folder() / "token"


def new_token() -> str:
    """A fresh token for the node's Spark Connect, written to :func:`token_path` with mode 0600:
    random, or ``SPARK_CONNECT_AUTHENTICATE_TOKEN`` when set (a deployment shares it with its clients
    that way, as ``docker/compose.yaml`` does)."""
    value = os.environ.get(TOKEN_ENV) or secrets.token_urlsafe(32)
    path = token_path()
    make_dirs(path.parent)
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
    instance: str

    @property
    def url(self) -> str:
        """The node's address, for display: without the token."""
        return f"sc://{HOST}:{self.port}"

    @property
    def connect_url(self) -> str:
        """The URL a client of this home connects with: the address and the node's token."""
        return with_token(self.url, token())


def alive(pid: int, instance: str) -> bool:
    """True when ``pid`` is the node process started as ``instance`` (its command line says both):
    a recycled pid, or another program that merely names the module, does not count."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if Path(f"/proc/{pid}/stat").read_text().split(") ")[-1].startswith("Z"):
            return False
    except OSError:
        return False
    if NODE_MODULE.encode() not in cmdline or b"--instance" not in cmdline:
        return False
    at = cmdline.index(b"--instance")
    return at + 1 < len(cmdline) and cmdline[at + 1] == instance.encode()


def home_key() -> str:
    """This home, as ``node.json`` records it."""
    return str(config.home().resolve())


def running() -> NodeInfo | None:
    """The node of this home when it runs: ``node.json`` names this home, the lock is held, and its
    pid runs the node with the recorded instance id."""
    try:
        data = json.loads((folder() / "node.json").read_text(encoding="utf-8"))
        info = NodeInfo(int(data["pid"]), int(data["port"]), datetime.fromisoformat(data["started"]),
                        str(data["instance"]))
        home = data["home"]
    except (OSError, ValueError, KeyError, TypeError):  # absent, being replaced, or not the node's
        return None
    if home != home_key() or not held() or not alive(info.pid, info.instance):
        return None
    return info


@contextlib.contextmanager
def control() -> Iterator[None]:
    """Serialize starting and stopping this home's node (``node/control.lock``)."""
    with hold_lock(make_dirs(folder()) / "control.lock"):
        yield


def running_url() -> str | None:
    """The node's address when it runs (for display: :func:`running_connect_url` carries the token)."""
    info = running()
    return info.url if info else None


def running_connect_url() -> str | None:
    """The URL, token included, that local clients (the CLI, tests, local Airflow tasks) connect with."""
    info = running()
    return info.connect_url if info else None
