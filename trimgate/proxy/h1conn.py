"""One connection of the upstream client (h1.py): its answer, read by http11's reader.

``_Conn`` moves the provider's bytes into an ``http11.AnswerReader`` and acts on its
events: the answer's head resolves the caller's wait, body bytes go to the ``Response``
(reading from the provider pauses while more than HIGH_WATER of them wait unread), the
end or a fault ends it. The pool that owns connections is ``h1.Client``.
"""

from __future__ import annotations

import asyncio
import os
import socket
from typing import TYPE_CHECKING, Any, Final, cast

from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from trimgate.errors import UpstreamConnectError, UpstreamTimeout
from trimgate.proxy import http11

if TYPE_CHECKING:
    from trimgate.proxy.h1 import Client

HIGH_WATER: Final = 256 * 1024  # unread body bytes held before reading from the provider pauses
EARLY_ANSWER_BODY: Final = 64 * 1024  # see Response.release
MAX_HEAD: Final = http11.MAX_ANSWER_HEAD  # status line and headers of one answer

Key = tuple[str, str, int]


class ProtocolError(UpstreamConnectError):
    """The provider's answer is not HTTP/1.1 this client can frame."""


class ClosedBeforeAnswer(UpstreamConnectError):
    """The connection ended before any answer: on a reused one, maybe an idle-close race."""


def _expire(waiter: asyncio.Future[Any], what: str) -> None:
    if not waiter.done():
        waiter.set_exception(UpstreamTimeout(f"upstream timed out {what}"))


class Response:
    """One answer: status and headers at once, the body as it arrives.

    ``release()`` (always, in a ``finally``) hands a fully read connection back
    to the pool and closes any other; ``close()`` closes it in any case.
    """

    __slots__ = (
        "_conn",
        "_done",
        "_error",
        "_pieces",
        "_released",
        "_waiter",
        "headers",
        "reason",
        "status",
        "version",
    )

    def __init__(
        self, conn: _Conn, status: int, reason: str, version: int, headers: CIMultiDict[str]
    ) -> None:
        self._conn = conn
        self.status = status
        self.reason = reason
        self.version = version  # minor version: 0 or 1
        self.headers: CIMultiDictProxy[str] = CIMultiDictProxy(headers)
        self._pieces: list[bytes] = []
        self._done = False
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._released = False

    # --- fed by the connection ---------------------------------------------

    def _push(self, data: bytes) -> None:
        self._pieces.append(data)
        self._wake()

    def _end(self) -> None:
        self._done = True
        self._wake()

    def _fail(self, exc: BaseException) -> None:
        if not self._done and self._error is None:
            self._error = exc
            self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # --- read by the caller -------------------------------------------------

    async def readany(self) -> bytes:
        """The body bytes that have arrived (waiting for some), or b"" at its end."""
        while True:
            pieces = self._pieces
            if pieces:
                data = pieces[0] if len(pieces) == 1 else b"".join(pieces)
                pieces.clear()
                conn = self._conn
                conn.unread = 0
                if conn.paused:
                    conn.resume()
                return data
            if self._error is not None:
                raise self._error
            if self._done:
                self.release()  # read to the end: the connection can serve the next request
                return b""
            await self._wait()

    async def read(self) -> bytes:
        chunks = []
        while chunk := await self.readany():
            chunks.append(chunk)
        return b"".join(chunks)

    async def _wait(self) -> None:
        conn = self._conn
        loop = conn.loop
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiter = waiter
        timer = loop.call_later(conn.read_timeout, _expire, waiter, "mid-answer")
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiter = None

    def release(self) -> None:
        """Pool the connection if this answer was read to its end and the request was
        written whole; otherwise close it. Idempotent: called at the body's end and by
        the caller. An answer can come before the request body is sent (an early 413):
        over TLS the transport cannot tell what is still queued, so after an error
        answer to a body of more than EARLY_ANSWER_BODY bytes the connection is closed."""
        if self._released:
            return
        self._released = True
        conn = self._conn
        transport = conn.transport
        if (
            self._done
            and self._error is None
            and not self._pieces
            and conn.keep
            and transport is not None
            and not transport.get_write_buffer_size()
            and (self.status < 400 or conn.sent <= EARLY_ANSWER_BODY)
        ):
            conn.client.put_back(conn)
        else:
            conn.close()
        conn.client.slot_free()

    def close(self) -> None:
        if not self._released:
            self._conn.keep = False
            self.release()


def unread_waiting(transport: asyncio.BaseTransport | None) -> bool:
    """Whether a pooled connection's socket holds bytes not yet read, or the peer's close:
    bytes that arrived after a complete answer but before the event loop delivered them
    (a busy loop runs a waiting request's reuse first). Peeked on a duplicate of the
    socket, so nothing is consumed; a socket that cannot be peeked counts as waiting.
    Plain connections only: under TLS the socket also carries records that are no answer
    (a TLS 1.3 server's session tickets), and what TLS delivers is counted as it comes."""
    if transport is None or transport.get_extra_info("ssl_object") is not None:
        return False
    sock = transport.get_extra_info("socket")
    if sock is None:
        return False
    try:
        with socket.socket(fileno=os.dup(sock.fileno())) as peek:
            peek.setblocking(False)
            peek.recv(1, socket.MSG_PEEK)  # data, or b"" for the peer's close
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True
    return True


class _Conn(asyncio.Protocol):
    """One connection: moves the provider's bytes through its ``AnswerReader``."""

    def __init__(self, client: Client, key: Key) -> None:
        self.client = client
        self.key = key
        self.loop = asyncio.get_running_loop()
        self.read_timeout = client.read_timeout
        self.transport: asyncio.Transport | None = None
        self.alive = True
        self.keep = True  # may carry another request after this answer
        self.idle_since = 0.0
        self.paused = False
        self.unread = 0
        self.sent = 0  # body bytes of the request in flight
        self.reused = False  # carried a request before this one
        self._reader = http11.AnswerReader()
        self._head_waiter: asyncio.Future[Response] | None = None
        self.resp: Response | None = None

    # --- asyncio callbacks --------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        if self._head_waiter is not None or self._reader.in_body:
            self._reader.receive_data(data)
            self._pump()
        else:  # bytes nobody asked for: this connection cannot be trusted again
            self.keep = False
            self.close()

    def eof_received(self) -> bool | None:
        self._ended(None)
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._ended(exc)
        self.alive = False
        self.client.forget(self)

    def _ended(self, exc: Exception | None) -> None:
        self.keep = False
        self._reader.receive_eof(clean=exc is None)
        self._pump()

    # --- one exchange -------------------------------------------------------

    def begin(self, no_body: bool) -> asyncio.Future[Response]:
        waiter: asyncio.Future[Response] = self.loop.create_future()
        self._head_waiter = waiter
        self._reader.expect(no_body)
        self.resp = None
        return waiter

    def _pump(self) -> None:
        """Act on the reader's events until it needs more bytes."""
        reader = self._reader
        while True:
            try:
                event = reader.next_event()
            except http11.ProtocolError as exc:
                self._protocol_error(str(exc))
                return
            if not reader.reusable:
                self.keep = False
            if event is http11.NEED_DATA:
                return
            if type(event) is http11.Data:
                self._deliver(event.data)
            elif event is http11.END:
                if self.resp is not None:
                    self.resp._end()
            elif type(event) is http11.Answer:
                if not self._answer(event):
                    return
            elif type(event) is http11.Closed:
                self._closed(event.started)

    def _answer(self, answer: http11.Answer) -> bool:
        resp = Response(self, answer.status, answer.reason, answer.version, answer.headers)
        self.resp = resp
        waiter, self._head_waiter = self._head_waiter, None
        if waiter is None or waiter.done():  # the caller gave up
            self.keep = False
            self.close()
            return False
        waiter.set_result(resp)
        return True

    def _closed(self, started: bool) -> None:
        waiter, self._head_waiter = self._head_waiter, None
        if waiter is not None:
            if not waiter.done():
                # with part of a head in, the provider was answering: not an idle-close race
                kind = UpstreamConnectError if started else ClosedBeforeAnswer
                waiter.set_exception(kind("upstream closed the connection before answering"))
        elif self.resp is not None:
            self.resp._fail(UpstreamConnectError("upstream closed the connection mid-answer"))

    def _deliver(self, data: bytes) -> None:
        resp = self.resp
        assert resp is not None
        resp._push(data)
        self.unread += len(data)
        if self.unread > HIGH_WATER and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()

    def _protocol_error(self, why: str) -> None:
        exc = ProtocolError(f"upstream sent invalid HTTP: {why}")
        self.keep = False
        waiter, self._head_waiter = self._head_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)
        elif self.resp is not None:
            self.resp._fail(exc)
        self.close()

    # --- flow control and end -------------------------------------------------

    def resume(self) -> None:
        self.paused = False
        if self.transport is not None and self.alive:
            self.transport.resume_reading()

    def close(self) -> None:
        self.keep = False
        if self.transport is not None and self.alive:
            self.alive = False
            self.transport.close()
        self.client.forget(self)


def request_head(method: str, url: URL, headers: CIMultiDict[str], length: int) -> bytes:
    """The request line and headers; a header that would split the head is refused."""
    host = url.host_port_subcomponent or ""
    try:
        return http11.request_head(method, url.raw_path_qs, host, headers.items(), length)
    except ValueError as exc:
        raise UpstreamConnectError(str(exc)) from None
