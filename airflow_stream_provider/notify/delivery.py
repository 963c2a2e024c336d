"""Delivery of a stream's outbox over WebSocket or HTTP POST: in order, at least once, with stable
message ids.

An ``http://`` or ``https://`` receiver gets each message as the body of its own POST
(``Content-Type: application/json``), in order, and has it once it answered 2xx; any other answer,
a redirect included (redirects are not followed), leaves it and the messages after it waiting, as a
WebSocket receiver that did not confirm does.

A ``notifier://<name>`` receiver is an Airflow notifier (any ``BaseNotifier`` subclass: email,
Slack, ...) that the ``[notifiers.<name>]`` table of ``airflow-stream.toml`` names with its
arguments; it has a message once its ``notify`` returned (the lookup the Airflow side registers with
:func:`use_notifiers` builds and calls it; delivery itself never imports Airflow).

A receiver has a message once the WebSocket layer confirmed it: after a run of text frames the
sender sends a ping and waits for its pong, which the receiver's side returns only after reading
every frame before it. Messages not confirmed are sent again (same id, same bytes) on the next
attempt, so a receiver may see a message twice and can drop the second by ``messageId``.

Failures follow the stream's ``NOTIFY_OPTIONS``: by default the messages a receiver could not take
are dropped, logged and counted; with ``ON_FAILURE_PAUSE`` delivery retries with exponential
backoff until they are delivered, and the stream does not move on meanwhile.

A receiver gets little trust: one wall-clock deadline covers connecting, sending a batch and its
confirmation, and the socket is closed when it expires; an incoming frame larger than
:data:`MAX_INCOMING_FRAME` ends the connection (a receiver only ever needs to answer a pong or a
small ack); handshake redirects are not followed, so credentials never move to another host.

Settings (environment, or the ``[notify]`` table of ``airflow-stream.toml``):
``AIRFLOW_STREAM_NOTIFY_TIMEOUT`` (seconds one batch may take, from connecting to its confirmation,
default 10),
``AIRFLOW_STREAM_NOTIFY_MAX_MESSAGE_BYTES`` (default 1 MiB), ``AIRFLOW_STREAM_NOTIFY_MAX_BACKOFF``
(seconds, default 30) and ``AIRFLOW_STREAM_NOTIFY_CONN_IDS`` (Airflow connections of type
``stream_ws`` holding headers and credentials, default ``stream_ws_default``). Connections are read
through the lookup the Airflow side registers with :func:`use_credentials`; without one, naming a
connection is an error.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import websocket
from websocket._abnf import frame_buffer

from airflow_stream_provider import config
from airflow_stream_provider.exceptions import StreamError
from airflow_stream_provider.notify.message import MAX_MESSAGE_BYTES
from airflow_stream_provider.notify.outbox import Outbox, Queued

log = logging.getLogger(__name__)

#: messages sent between two confirmations
CHUNK = 64

#: the largest frame a receiver may send us: pongs and acks are small, and a frame is read whole
MAX_INCOMING_FRAME = 64 * 1024


class ReceiverError(StreamError):
    """A receiver could not be reached or did not confirm what it was sent."""


class CredentialsUnavailable(StreamError):
    """Delivery is to read connections, and no credentials lookup was registered."""


class CredentialsRefused(StreamError):
    """A ``stream_ws`` connection's credentials would go where they must not: to every host (the
    connection names none) or over plaintext ``ws://`` without the connection allowing it."""


class DeliveryPaused(StreamError):
    """ON_FAILURE_PAUSE: messages are still waiting for a receiver; the stream holds until they go."""


def _setting(name: str, default: str) -> str:
    return os.environ.get(f"AIRFLOW_STREAM_NOTIFY_{name.upper()}") or \
        str(config.settings().get("notify", {}).get(name, default))


@dataclass(frozen=True)
class Settings:
    timeout: float = 10.0
    max_message_bytes: int = MAX_MESSAGE_BYTES
    max_backoff: float = 30.0
    conn_ids: tuple[str, ...] = ("stream_ws_default",)

    @classmethod
    def load(cls) -> Settings:
        return cls(timeout=float(_setting("timeout", "10")),
                   max_message_bytes=int(_setting("max_message_bytes", str(MAX_MESSAGE_BYTES))),
                   max_backoff=float(_setting("max_backoff", "30")),
                   conn_ids=tuple(c.strip() for c in _setting("conn_ids", "stream_ws_default").split(",") if c.strip()))


# --- receivers ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Access:
    """What a connection adds to a request: headers, and TLS settings for ``wss://``."""

    headers: tuple[str, ...] = ()
    sslopt: dict = field(default_factory=dict)


#: looks up what the first of the connections ``conn_ids`` that serves ``url`` adds to a request to
#: it, or None when none does: ``credentials(url, conn_ids)``
Credentials = Callable[[str, Sequence[str]], Access | None]

_credentials: Credentials | None = None


#: sends one message (its JSON text) to the notifier named ``name``, raising when it could not:
#: ``send(name, text)``
NotifierSender = Callable[[str, str], None]

_notifiers: NotifierSender | None = None


def use_notifiers(sender: NotifierSender | None) -> None:
    """Make ``sender`` the process's way to reach ``notifier://`` receivers (None forgets it)."""
    global _notifiers
    _notifiers = sender


def use_credentials(lookup: Credentials | None) -> None:
    """Make ``lookup`` the process's way to read connections (None forgets it). The Airflow side
    registers one (``airflow_stream_provider.hooks.bind``); delivery itself never imports Airflow."""
    global _credentials
    _credentials = lookup


def access_for(url: str, conn_ids: Sequence[str]) -> Access:
    """Headers and TLS options for ``url`` from the first ``stream_ws`` connection that serves it."""
    found = None
    if conn_ids:
        if _credentials is None:
            raise CredentialsUnavailable(
                f"{_safe(url)}: delivery reads the connections {', '.join(conn_ids)}, but this process "
                "registered no credentials lookup (airflow_stream_provider.hooks.bind() registers Airflow's)")
        found = _credentials(url, conn_ids)
    if found is not None:
        return found
    return Access(sslopt={"cert_reqs": ssl.CERT_REQUIRED} if url.startswith(("wss://", "https://")) else {})


class _CappedFrames(frame_buffer):
    """websocket-client's frame reader, refusing a frame whose announced length passes the cap
    before reading its payload (the stock reader buffers whatever length the peer announces)."""

    def recv_length(self) -> None:
        super().recv_length()
        if self.length is not None and self.length > MAX_INCOMING_FRAME:
            raise websocket.WebSocketPayloadException(
                f"the receiver sent a frame of {self.length} bytes (at most {MAX_INCOMING_FRAME} accepted)")


class _BoundedWebSocket(websocket.WebSocket):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.frame_buffer = _CappedFrames(self._recv, skip_utf8_validation=False)


class _Deadline:
    """Shuts a connection's socket down when the wall-clock deadline passes, which wakes any read
    or write blocked on it; a slow peer that trickles bytes cannot stretch per-read timeouts."""

    def __init__(self, seconds: float, sock: Callable[[], socket.socket | None]) -> None:
        self._sock = sock
        self._lock = threading.Lock()
        self._done = False
        self.expired = False
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def _expire(self) -> None:
        with self._lock:
            if self._done:
                return
            self.expired = True
            sock = self._sock()
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def finish(self) -> None:
        with self._lock:
            self._done = True
        self._timer.cancel()


class Receiver:
    """One persistent connection to one URL."""

    def __init__(self, url: str, access: Access, timeout: float) -> None:
        self.url = url
        self.access = access
        self.timeout = timeout
        self._ws: websocket.WebSocket | None = None
        self._connecting: websocket.WebSocket | None = None
        self._lock = threading.Lock()

    def _connect(self) -> websocket.WebSocket:
        if self._ws is None or not self._ws.connected:
            # the object exists before its handshake, so the deadline can shut a slow handshake down
            ws = self._connecting = _BoundedWebSocket(sslopt=dict(self.access.sslopt), enable_multithread=True)
            ws.settimeout(self.timeout)
            ws.connect(self.url, header=list(self.access.headers), redirect_limit=0)
            self._ws = ws
        return self._ws

    def _socket(self) -> socket.socket | None:
        ws = self._ws or self._connecting
        return ws.sock if ws is not None else None

    def send(self, texts: Sequence[str]) -> None:
        """Send ``texts`` in order and wait until the receiver confirmed all of them, all within
        ``timeout`` seconds of wall-clock time."""
        with self._lock:
            deadline = _Deadline(self.timeout, self._socket)
            try:
                ws = self._connect()
                for text in texts:
                    ws.send(text)
                self._confirm(ws)
            except (OSError, websocket.WebSocketException) as err:
                self._abort()
                if deadline.expired:
                    raise ReceiverError(f"{_safe(self.url)}: no confirmation within {self.timeout:g}s "
                                        "(AIRFLOW_STREAM_NOTIFY_TIMEOUT); connection closed") from None
                raise ReceiverError(f"{_safe(self.url)}: {type(err).__name__}: {err}") from None
            finally:
                deadline.finish()
                self._connecting = None
            if deadline.expired:  # confirmed just as the deadline passed: the socket is gone anyway
                self._abort()

    def _confirm(self, ws: websocket.WebSocket) -> None:
        token = os.urandom(8).hex().encode()
        ws.ping(token)
        while True:  # bounded by the deadline, which closes the socket
            frame = ws.recv_frame()  # one frame at a time: fragments are never gathered
            if frame.opcode == websocket.ABNF.OPCODE_PONG and frame.data == token:
                return
            if frame.opcode == websocket.ABNF.OPCODE_PING:
                ws.pong(frame.data)
            elif frame.opcode == websocket.ABNF.OPCODE_CLOSE:
                raise websocket.WebSocketConnectionClosedException("the receiver closed the connection")

    def _abort(self) -> None:
        """Drop the connection at once, without a closing handshake the peer could stall."""
        ws, self._ws = self._ws, None
        for one in (ws, self._connecting):
            if one is not None:
                with contextlib.suppress(OSError, websocket.WebSocketException):
                    one.shutdown()

    def close(self) -> None:
        """Close with a closing handshake, which a peer trickling a frame cannot stretch past 1 s."""
        ws, self._ws = self._ws, None
        if ws is not None:
            deadline = _Deadline(1.0, lambda: ws.sock)
            with contextlib.suppress(OSError, websocket.WebSocketException):
                ws.close(timeout=1)
            deadline.finish()


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # a 3xx answer is an error: credentials never move to another host


class HttpReceiver:
    """An HTTP endpoint that takes each message as a POST."""

    def __init__(self, url: str, access: Access, timeout: float) -> None:
        self.url = url
        self.access = access
        self.timeout = timeout
        context = ssl.create_default_context(cafile=access.sslopt.get("ca_certs"))
        if access.sslopt.get("cert_reqs") == ssl.CERT_NONE:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        self._opener = urllib.request.build_opener(_NoRedirects, urllib.request.HTTPSHandler(context=context))
        self._lock = threading.Lock()

    def send(self, texts: Sequence[str]) -> None:
        """POST ``texts`` one by one, in order, all within ``timeout`` seconds of wall-clock time."""
        with self._lock:
            deadline = time.monotonic() + self.timeout
            for text in texts:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ReceiverError(f"{_safe(self.url)}: not all taken within {self.timeout:g}s "
                                        "(AIRFLOW_STREAM_NOTIFY_TIMEOUT)")
                request = urllib.request.Request(self.url, data=text.encode(), method="POST")
                request.add_header("Content-Type", "application/json")
                for header in self.access.headers:
                    name, _, value = header.partition(":")
                    request.add_header(name.strip(), value.strip())
                try:
                    with self._opener.open(request, timeout=left) as answer:
                        answer.read(MAX_INCOMING_FRAME)
                except urllib.error.HTTPError as err:
                    raise ReceiverError(f"{_safe(self.url)}: HTTP {err.code}") from None
                except (urllib.error.URLError, OSError) as err:
                    raise ReceiverError(f"{_safe(self.url)}: {getattr(err, 'reason', err)}") from None

    def close(self) -> None:
        """Nothing stays open between messages."""


class NotifierReceiver:
    """An Airflow notifier, handed each message in order (``notifier://<name>``)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.name = urlsplit(url).hostname or ""

    def send(self, texts: Sequence[str]) -> None:
        if _notifiers is None:
            raise ReceiverError(f"{self.url}: this process registered no notifier lookup "
                                "(airflow_stream_provider.hooks.bind() registers Airflow's)")
        for text in texts:
            try:
                _notifiers(self.name, text)
            except Exception as err:  # whatever the notifier raised: the message waits, as the outbox says
                raise ReceiverError(f"{self.url}: {type(err).__name__}: {err}") from None

    def close(self) -> None:
        """Nothing stays open between messages."""


def _safe(url: str) -> str:
    """A URL fit for errors and logs: without user and password, and without its query string,
    which may carry a key."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return f"{parts.scheme}://{host}{parts.path}"


_POOL: dict[str, Receiver | HttpReceiver | NotifierReceiver] = {}
_POOL_LOCK = threading.Lock()


def receiver(url: str, settings: Settings) -> Receiver | HttpReceiver | NotifierReceiver:
    """The process's connection to ``url``, reused by every delivery (persistent connections)."""
    with _POOL_LOCK:
        found = _POOL.get(url)
        if found is None:
            scheme = urlsplit(url).scheme
            if scheme == "notifier":
                found = _POOL[url] = NotifierReceiver(url)
            else:
                kind = HttpReceiver if scheme in ("http", "https") else Receiver
                found = _POOL[url] = kind(url, access_for(url, settings.conn_ids), settings.timeout)
        return found


@atexit.register
def close_all() -> None:
    with _POOL_LOCK:
        for rec in _POOL.values():
            rec.close()
        _POOL.clear()


# --- delivering an outbox -------------------------------------------------------------------


@dataclass
class DeliveryReport:
    sent_messages: int = 0
    sent_events: int = 0
    dropped_messages: int = 0
    dropped_events: int = 0
    retries: int = 0

    def summary(self) -> str:
        text = f"{self.sent_events} event(s) in {self.sent_messages} message(s) delivered"
        if self.dropped_events:
            text += f", {self.dropped_events} event(s) dropped"
        if self.retries:
            text += f", {self.retries} retr{'y' if self.retries == 1 else 'ies'}"
        return text


def deliver(outbox: Outbox, *, pause: bool, settings: Settings | None = None, give_up_after: float | None = None,
            say: Callable[[str], None] | None = None, sleep: Callable[[float], None] = time.sleep) -> DeliveryReport:
    """Deliver everything waiting in ``outbox`` to each of its receivers.

    :param pause: ON_FAILURE_PAUSE: retry until delivered (or ``give_up_after`` seconds, then raise
        :class:`DeliveryPaused` with the messages still waiting); otherwise drop what fails.
    """
    settings = settings or Settings.load()
    say = say or log.info
    report = DeliveryReport()
    started = time.monotonic()
    backoff = 0.5
    with outbox.delivering():
        waiting = list(outbox.targets)
        while waiting:
            still = []
            for url in waiting:
                if not _deliver_to(outbox, url, pause, settings, report, say):
                    still.append(url)
            waiting = still
            if not waiting:
                break
            if give_up_after is not None and time.monotonic() - started + backoff > give_up_after:
                pending = sum(len(outbox.pending(u)) for u in waiting)
                raise DeliveryPaused(f"{pending} message(s) wait for {', '.join(_safe(u) for u in waiting)} "
                                     "(ON_FAILURE_PAUSE); the stream holds until they are delivered")
            say(f"ON_FAILURE_PAUSE: retrying {', '.join(_safe(u) for u in waiting)} in {backoff:.1f}s")
            sleep(backoff)
            report.retries += 1
            backoff = min(backoff * 2, settings.max_backoff)
    return report


def _deliver_to(outbox: Outbox, url: str, pause: bool, settings: Settings, report: DeliveryReport,
                say: Callable[[str], None]) -> bool:
    """Send ``url`` its pending messages; False when some must wait (ON_FAILURE_PAUSE)."""
    pending = outbox.pending(url)
    rec = receiver(url, settings)
    i = 0
    while i < len(pending):
        chunk = _chunk(pending, i, settings.max_message_bytes)
        try:
            try:
                rec.send([m.text for m in chunk])
            except ReceiverError:
                rec.send([m.text for m in chunk])  # a stale connection: one fresh try
        except ReceiverError as err:
            outbox.mark(url, [], delivered=False, error=str(err))
            if pause:
                log.warning("notification to %s failed, will retry: %s", _safe(url), err)
                return False
            rest = pending[i:]
            outbox.mark(url, rest, delivered=False)
            report.dropped_messages += len(rest)
            report.dropped_events += sum(m.events for m in rest)
            say(f"dropped {sum(m.events for m in rest)} event(s) for {_safe(url)}: {err}")
            return True
        outbox.mark(url, chunk, delivered=True)
        report.sent_messages += len(chunk)
        report.sent_events += sum(m.events for m in chunk)
        i += len(chunk)
    return True


def _chunk(pending: list[Queued], start: int, max_bytes: int) -> list[Queued]:
    """Messages from ``start``: at most CHUNK of them and about ``max_bytes`` (at least one)."""
    out: list[Queued] = []
    size = 0
    for m in pending[start:start + CHUNK]:
        if out and size + len(m.text) > max_bytes:
            break
        out.append(m)
        size += len(m.text)
    return out
