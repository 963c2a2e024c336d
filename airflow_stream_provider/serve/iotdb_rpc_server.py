"""The TCP server of IoTDB's session protocol: Thrift over a framed transport (a 4-byte big-endian
length before each message), the binary protocol, or the compact one when the client opened its
session with ``enable_rpc_compression`` (told apart by the first byte of each message: 0x80 binary,
0x82 compact). A thread per connection, each with its own sessions; a frame over the body limit
closes the connection; :meth:`RpcServer.stop` ends the idle connections and waits for the calls
in flight.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import socketserver
import struct
import threading
import time

from iotdb.thrift.rpc.IClientRPCService import Processor
from thrift.protocol import TBinaryProtocol, TCompactProtocol
from thrift.transport import TTransport

from airflow_stream_provider.serve.iotdb_session import SessionService

log = logging.getLogger(__name__)
access = logging.getLogger("airflow_stream_provider.serve.server.access")

_PROTOCOLS = {0x80: TBinaryProtocol.TBinaryProtocolAcceleratedFactory(),
              0x82: TCompactProtocol.TCompactProtocolAcceleratedFactory()}
IDLE_TIMEOUT_S = 600  # a session's connection is held between its calls, unlike an HTTP request


class _Connection(socketserver.BaseRequestHandler):
    server: RpcServer

    def handle(self) -> None:
        conn: socket.socket = self.request
        conn.settimeout(IDLE_TIMEOUT_S)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.opened(conn)
        processor = Processor(self.server.service.handler())
        peer = self.client_address[0]
        try:
            while True:
                frame = self._frame(conn)
                if frame is None:
                    return
                factory = _PROTOCOLS.get(frame[0]) if frame else None
                if factory is None:
                    log.warning("%s: a message of neither Thrift protocol; connection closed", peer)
                    return
                started = time.perf_counter()
                incoming, outgoing = TTransport.TMemoryBuffer(frame), TTransport.TMemoryBuffer()
                name = _method(frame)
                processor.process(factory.getProtocol(incoming), factory.getProtocol(outgoing))
                answer = outgoing.getvalue()
                conn.sendall(struct.pack(">i", len(answer)) + answer)
                access.info("%s RPC %s %d %.1fms", peer, name, len(frame), (time.perf_counter() - started) * 1000)
        except (OSError, TTransport.TTransportException, EOFError) as err:
            log.debug("%s: connection ended: %s", peer, err)
        finally:
            self.server.closed(conn)

    def _frame(self, conn: socket.socket) -> bytes | None:
        head = _read(conn, 4)
        if head is None:
            return None
        (size,) = struct.unpack(">i", head)
        if size < 0 or size > self.server.max_frame:
            log.warning("%s: a frame of %d bytes is over the limit of %d; connection closed", self.client_address[0],
                        size, self.server.max_frame)
            return None
        return _read(conn, size)


def _read(conn: socket.socket, size: int) -> bytes | None:
    parts, left = [], size
    while left:
        part = conn.recv(min(left, 1 << 20))
        if not part:
            return None
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def _method(frame: bytes) -> str:
    """The called method's name, for the access log (binary: after the version word; compact: after
    the type byte and the varint sequence id)."""
    with contextlib.suppress(Exception):
        if frame[0] == 0x80:
            (length,) = struct.unpack(">i", frame[4:8])
            return frame[8:8 + length].decode()
        at = 2
        while frame[at] & 0x80:
            at += 1
        at += 1
        length, shift = 0, 0
        while True:
            byte = frame[at]
            length |= (byte & 0x7F) << shift
            at += 1
            shift += 7
            if not byte & 0x80:
                break
        return frame[at:at + length].decode()
    return "?"


class RpcServer(socketserver.ThreadingTCPServer):
    daemon_threads = False
    block_on_close = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], service: SessionService, max_frame: int) -> None:
        self.service = service
        self.max_frame = max_frame
        self._connections: set[socket.socket] = set()
        self._lock = threading.Lock()
        super().__init__(address, _Connection)

    def opened(self, conn: socket.socket) -> None:
        with self._lock:
            self._connections.add(conn)

    def closed(self, conn: socket.socket) -> None:
        with self._lock:
            self._connections.discard(conn)

    def hang_up(self) -> None:
        """End the reading side of every connection: idle ones end at once, a call being answered
        still sends its answer."""
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RD)
