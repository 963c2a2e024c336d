"""A WebSocket receiver of stream notifications: ``airflow-stream receive``.

It accepts every connection (or, with ``--token``, those whose handshake carries
``Authorization: Bearer <token>``), and for each text message received prints a one-line summary
(or the JSON) and appends the message as one line to ``--out``, flushed at once. Messages larger
than ``--max-size`` (default :data:`MAX_SIZE`) close the connection. It is what the demo listens
with, and a reference for writing a receiver: de-duplicate on ``messageId``, because delivery is at
least once.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import signal
import ssl
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from airflow_stream_provider.notify.message import MAX_MESSAGE_BYTES

#: the largest message accepted by default: room above what a sender builds by default
MAX_SIZE = 4 * MAX_MESSAGE_BYTES


def _when(value: object) -> str:
    """An epoch time of the message as UTC time of day, its unit told by its digits (ms, us, ns)."""
    if not isinstance(value, int) or isinstance(value, bool):
        return str(value)
    digits = len(str(abs(value)))
    scale = 1_000 if digits <= 13 else 1_000_000 if digits <= 16 else 1_000_000_000
    at = datetime.fromtimestamp(value / scale, UTC)
    return at.strftime("%H:%M:%S.%f")[: -3 if scale == 1_000 else None]


def describe(text: str) -> str:
    """One line per event: stream, event type, window (UTC times of day) or instant, and the result."""
    try:
        body = json.loads(text)
    except ValueError:
        return f"(not JSON) {text[:200]}"
    lines = []
    for stream in body.get("streams", []):
        for ev in stream.get("events", []):
            span = _when(ev.get("windowStart", ev.get("eventTime")))
            if "windowEnd" in ev:
                span = f"{span}..{_when(ev['windowEnd'])}"
            extra = f" result={json.dumps(ev['result'])}" if "result" in ev else ""
            kind = ev.get("triggerType", ev.get("windowType"))  # the 3.3.7 format, or 3.3.6's
            lines.append(f"{stream.get('streamName')}: {ev.get('eventType')} {kind} "
                         f"{ev.get('tableName')} [{span}]{extra}")
    return "\n".join(lines) or f"(no events) {text[:200]}"


def authorized(header: str | None, token: str | None) -> bool:
    """Whether an ``Authorization`` header presents ``token`` as a bearer token (any, without one)."""
    if token is None:
        return True
    scheme, _, given = (header or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


async def serve(host: str, port: int, out: TextIO | None, echo: TextIO | None, raw: bool = False,
                tls: ssl.SSLContext | None = None, max_size: int = MAX_SIZE, token: str | None = None) -> None:
    from http import HTTPStatus

    from websockets.asyncio.server import ServerConnection
    from websockets.asyncio.server import serve as ws_serve

    def check(connection: ServerConnection, request: Any) -> Any:
        if authorized(request.headers.get("Authorization"), token):
            return None
        return connection.respond(HTTPStatus.UNAUTHORIZED, "a bearer token is required\n")

    async def handler(ws: ServerConnection) -> None:
        async for message in ws:
            text = message if isinstance(message, str) else message.decode("utf-8", "replace")
            if out is not None:
                out.write(text.replace("\n", " ") + "\n")
                out.flush()
            if echo is not None:
                echo.write((text if raw else describe(text)) + "\n")
                echo.flush()

    stop = asyncio.get_running_loop().create_future()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set_result, None)
    async with ws_serve(handler, host, port, max_size=max_size, ssl=tls, close_timeout=2, process_request=check):
        if echo is not None:
            echo.write(f"receiving notifications on {'wss' if tls else 'ws'}://{host}:{port}\n")
            echo.flush()
        await stop


def main(host: str, port: int, out: str | None, quiet: bool, raw: bool, tls_cert: str | None = None,
         tls_key: str | None = None, max_size: int = MAX_SIZE, token: str | None = None) -> int:
    tls = None
    if tls_cert:
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(tls_cert, tls_key)
    with contextlib.ExitStack() as stack:
        handle = stack.enter_context(Path(out).open("a", encoding="utf-8")) if out else None
        asyncio.run(serve(host, port, handle, None if quiet else sys.stdout, raw, tls, max_size, token))
    return 0
