"""A lean HTTP/1.1 client for the one hop trimgate makes: to the provider.

It does what that hop needs and nothing else: pooled keep-alive connections
(LIFO, so the warmest is reused), TLS with the system's trust store, a limit on
connections in use, bodies framed by Content-Length, chunked coding or the
connection's end, 1xx answers skipped, a connect timeout and a timeout between
two reads, and reading paused while a slow client lets the body pile up. No
redirects, cookies, proxies, auth or decompression: the caller's bytes and the
provider's bytes pass as they are. This module is the pool (``Client``); one
connection's exchange is h1conn.py, its framing http11.py (no I/O).

Why not aiohttp's ``ClientSession``: building its request and response objects
costs about 100 µs more CPU per small request than this does (bench/RESULTS.md),
the largest share of what trimgate adds to a request. ``server.upstream_client:
aiohttp`` switches back to it.

Errors are trimgate's own: ``UpstreamConnectError`` (502) for refused, reset or
malformed, ``UpstreamTimeout`` (504) for slow. A request is never retried here:
chat calls are POSTs, and a POST that may have reached the provider is not
resent behind the caller's back.
"""

from __future__ import annotations

import asyncio
import functools
import os
import socket
import ssl
import time
from typing import Final

import aiohappyeyeballs
from multidict import CIMultiDict
from yarl import URL

from trimgate.errors import UpstreamConnectError, UpstreamTimeout
from trimgate.proxy.h1conn import (
    EARLY_ANSWER_BODY,
    HIGH_WATER,
    MAX_HEAD,
    ClosedBeforeAnswer,
    Key,
    ProtocolError,
    Response,
    _Conn,
    _expire,
    request_head,
    unread_waiting,
)

__all__ = [
    "EARLY_ANSWER_BODY",
    "HIGH_WATER",
    "MAX_HEAD",
    "Client",
    "ClosedBeforeAnswer",
    "ProtocolError",
    "Response",
    "default_ssl_context",
    "request_head",
]

_IDEMPOTENT: Final = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"})


class Client:
    """Pooled connections to any number of upstreams; one per trimgate process."""

    def __init__(
        self,
        *,
        limit: int,
        connect_timeout: float,
        read_timeout: float,
        keepalive: float = 60.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.keepalive = keepalive
        self._ssl = ssl_context
        self._limit = limit
        self._slots: asyncio.Semaphore | None = None
        self._idle: dict[Key, list[_Conn]] = {}
        self._open: set[_Conn] = set()
        self._closed = False
        self._sweeper: asyncio.TimerHandle | None = None

    @property
    def closed(self) -> bool:
        return self._closed

    def idle_count(self) -> int:
        return sum(len(conns) for conns in self._idle.values())

    async def request(
        self, method: str, url: URL, headers: CIMultiDict[str], body: bytes
    ) -> Response:
        """Send, and return once the answer's status and headers are in."""
        if self._closed:
            raise UpstreamConnectError("the upstream client is closed")
        head = request_head(method, url, headers, len(body))
        key: Key = (url.scheme, url.raw_host or "", url.port or 0)
        slots = self._slots
        if slots is None:
            slots = self._slots = asyncio.Semaphore(self._limit)
        if slots.locked():  # every connection busy: wait, as long as a connect may take
            try:
                async with asyncio.timeout(self.connect_timeout):
                    await slots.acquire()
            except TimeoutError as exc:
                raise UpstreamTimeout("upstream timed out waiting for a free connection") from exc
        else:
            await slots.acquire()
        try:
            conn = self._reuse(key) or await self._connect(key)
            while True:
                try:
                    return await self._exchange(conn, method, head, body)
                except ClosedBeforeAnswer:
                    conn.close()
                    if not (conn.reused and method in _IDEMPOTENT):
                        raise
                except BaseException:
                    conn.close()
                    raise
                # A reused connection the provider closed as this request went out: an
                # idempotent request is sent once more on a new one (RFC 9112 §9.3.1);
                # a new connection is not ``reused``, so this happens at most once.
                conn = await self._connect(key)
        except BaseException:
            slots.release()
            raise

    async def _exchange(self, conn: _Conn, method: str, head: bytes, body: bytes) -> Response:
        waiter = conn.begin(method == "HEAD")
        conn.sent = len(body)
        transport = conn.transport
        assert transport is not None
        if body:
            transport.writelines((head, body))
        else:
            transport.write(head)
        if waiter.done():
            return waiter.result()
        timer = conn.loop.call_later(self.read_timeout, _expire, waiter, "waiting for the answer")
        try:
            return await waiter
        finally:
            timer.cancel()

    def _reuse(self, key: Key) -> _Conn | None:
        conns = self._idle.get(key)
        if not conns:
            return None
        now = time.monotonic()
        while conns:
            conn = conns.pop()
            fresh = now - conn.idle_since < self.keepalive
            if conn.alive and conn.keep and fresh and not unread_waiting(conn.transport):
                conn.reused = True
                return conn
            conn.close()
        return None

    def _sweep(self) -> None:
        """Close connections idle longer than ``keepalive`` (the oldest are at the bottom)."""
        self._sweeper = None
        deadline = time.monotonic() - self.keepalive
        for conns in list(self._idle.values()):
            while conns and conns[0].idle_since <= deadline:
                conns[0].close()  # forget() takes it off the list
        if self.idle_count():
            self._sweeper = asyncio.get_running_loop().call_later(self.keepalive, self._sweep)

    async def _connect(self, key: Key) -> _Conn:
        scheme, host, port = key
        context: ssl.SSLContext | None = None
        if scheme == "https":
            context = self._ssl
            if context is None:
                context = self._ssl = default_ssl_context()
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.connect_timeout):
                infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
                sock = await aiohappyeyeballs.start_connection(infos, happy_eyeballs_delay=0.25)
                try:
                    _, conn = await loop.create_connection(
                        lambda: _Conn(self, key),
                        sock=sock,
                        ssl=context,
                        server_hostname=host if context is not None else None,
                    )
                except BaseException:
                    sock.close()
                    raise
        except TimeoutError as exc:
            raise UpstreamTimeout("upstream timed out connecting") from exc
        except (OSError, ssl.SSLError, UnicodeError) as exc:  # UnicodeError: a host name
            # DNS cannot carry (a label over 63 bytes), refused before any lookup
            raise UpstreamConnectError(f"upstream unreachable: {type(exc).__name__}") from exc
        if self._closed:
            conn.close()
            raise UpstreamConnectError("the upstream client is closed")
        self._open.add(conn)
        return conn

    # --- called by connections and answers ------------------------------------

    def put_back(self, conn: _Conn) -> None:
        if self._closed or not conn.alive:
            conn.close()
            return
        conn.idle_since = time.monotonic()
        conn.resp = None
        self._idle.setdefault(conn.key, []).append(conn)
        if self._sweeper is None:
            self._sweeper = conn.loop.call_later(self.keepalive, self._sweep)

    def slot_free(self) -> None:
        if self._slots is not None:
            self._slots.release()

    def forget(self, conn: _Conn) -> None:
        self._open.discard(conn)
        conns = self._idle.get(conn.key)
        if conns and conn in conns:
            conns.remove(conn)

    async def close(self) -> None:
        self._closed = True
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for conn in list(self._open):
            conn.close()
        self._idle.clear()
        await asyncio.sleep(0)  # let the transports' close callbacks run


def default_ssl_context() -> ssl.SSLContext:
    """The system's trust store (honours SSL_CERT_FILE / SSL_CERT_DIR), HTTP/1.1 by ALPN.

    Loading the store reads files: made once per pair of those variables, and made
    off the event loop at start-up (see app.py) when an upstream uses https."""
    return _ssl_context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


@functools.lru_cache(maxsize=4)
def _ssl_context(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.set_alpn_protocols(["http/1.1"])
    return context
