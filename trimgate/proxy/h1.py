"""A lean HTTP/1.1 client for the one hop trimgate makes: to the provider.

It does what that hop needs and nothing else: pooled keep-alive connections
(LIFO, so the warmest is reused), TLS with the system's trust store, a limit on
connections in use, bodies framed by Content-Length, chunked coding or the
connection's end, 1xx answers skipped, a connect timeout and a timeout between
two reads, and reading paused while a slow client lets the body pile up. No
redirects, cookies, proxies, auth or decompression: the caller's bytes and the
provider's bytes pass as they are.

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
import re
import socket
import ssl
import time
from typing import Any, Final, cast

import aiohappyeyeballs
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from trimgate.errors import UpstreamConnectError, UpstreamTimeout

MAX_HEAD: Final = 64 * 1024  # status line and headers of one answer
MAX_LINE: Final = 8 * 1024  # a chunk-size line or a trailer line
MAX_TRAILERS: Final = 64 * 1024
HIGH_WATER: Final = 256 * 1024  # unread body bytes held before reading from the provider pauses
EARLY_ANSWER_BODY: Final = 64 * 1024  # see Response.release
HEX_DIGITS: Final = b"0123456789abcdefABCDEF"

# how a body is framed (RFC 9112 §6.3)
_NONE: Final = 0  # no body, or the body is complete
_LENGTH: Final = 1
_CHUNKED: Final = 2
_UNTIL_CLOSE: Final = 3
# where a chunked body's parser is
_SIZE: Final = 0
_DATA: Final = 1
_DATA_END: Final = 2
_TRAILER: Final = 3

_NO_BODY_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
_IDEMPOTENT: Final = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"})
# also read by the front (front.py): one definition of what a head is made of
HEAD_END: Final = re.compile(rb"\r?\n\r?\n")
TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # a field name (RFC 9110 §5.1)
CTL: Final = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # never in a head passed on

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


class _Conn(asyncio.Protocol):
    """One connection and the parser of the answer arriving on it."""

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
        self._head = bytearray()
        self._scanned = 0  # how far the head has been searched for its end
        self._head_waiter: asyncio.Future[Response] | None = None
        self._no_body = False  # the request was HEAD
        self.resp: Response | None = None
        self._mode = _NONE
        self._remaining = 0
        self._cstate = _SIZE
        self._line = bytearray()
        self._trailers = 0

    # --- asyncio callbacks --------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        if self._mode != _NONE:
            self._body(data)
        elif self._head_waiter is not None:
            self._head += data
            self._parse_head()
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
        if self._mode == _UNTIL_CLOSE and exc is None:
            self._finish()
        elif self._mode != _NONE:
            self._mode = _NONE
            if self.resp is not None:
                self.resp._fail(UpstreamConnectError("upstream closed the connection mid-answer"))
        elif self._head_waiter is not None:
            waiter, self._head_waiter = self._head_waiter, None
            if not waiter.done():
                # with part of a head in, the provider was answering: not an idle-close race
                kind = UpstreamConnectError if self._head else ClosedBeforeAnswer
                waiter.set_exception(kind("upstream closed the connection before answering"))

    # --- one exchange -------------------------------------------------------

    def begin(self, no_body: bool) -> asyncio.Future[Response]:
        waiter: asyncio.Future[Response] = self.loop.create_future()
        self._head_waiter = waiter
        self._head.clear()
        self._scanned = 0
        self._no_body = no_body
        self.resp = None
        return waiter

    def _parse_head(self) -> None:
        while True:
            buf = self._head
            found = HEAD_END.search(buf, self._scanned)  # the first blank line, LF or CRLF
            if found is None:
                if len(buf) > MAX_HEAD:
                    self._protocol_error("the answer's headers are too large")
                else:  # a blank line may straddle this read and the next
                    self._scanned = max(0, len(buf) - 3)
                return
            end = found.start()
            if end > MAX_HEAD:
                self._protocol_error("the answer's headers are too large")
                return
            head = bytes(buf[:end])
            rest = bytes(buf[found.end() :])
            try:
                status, reason, version, headers = _parse_head(head)
            except ValueError as exc:
                self._protocol_error(str(exc))
                return
            if 100 <= status < 200:
                if status == 101:
                    self._protocol_error("the upstream switched protocols")
                    return
                del buf[: found.end()]  # an interim answer (100, 103): the real one follows
                self._scanned = 0
                continue
            buf.clear()
            self._start_body(status, reason, version, headers, rest)
            return

    def _start_body(
        self, status: int, reason: str, version: int, headers: CIMultiDict[str], rest: bytes
    ) -> None:
        connection = headers.get("Connection", "").lower()
        if (version == 0 and "keep-alive" not in connection) or "close" in connection:
            self.keep = False
        mode = _NONE
        if not (self._no_body or status in (204, 304)):
            if "Transfer-Encoding" in headers:
                coding = ",".join(headers.getall("Transfer-Encoding"))
                if "Content-Length" in headers:
                    # a confused framing (RFC 9112 §6.3): the coding wins, the length is
                    # never passed on, the connection is not reused
                    headers.popall("Content-Length")
                    self.keep = False
                if coding.rpartition(",")[2].strip().lower() == "chunked":
                    mode = _CHUNKED
                    self._cstate = _SIZE
                    self._line.clear()
                    self._trailers = 0
                else:
                    mode = _UNTIL_CLOSE
            elif "Content-Length" in headers:
                length = _content_length(headers.getall("Content-Length"))
                if length is None:
                    self._protocol_error("the answer's Content-Length is invalid")
                    return
                if length:
                    mode = _LENGTH
                    self._remaining = length
            else:
                mode = _UNTIL_CLOSE
        if mode == _UNTIL_CLOSE:
            self.keep = False
        resp = Response(self, status, reason, version, headers)
        self.resp = resp
        self._mode = mode
        waiter, self._head_waiter = self._head_waiter, None
        if waiter is None or waiter.done():  # the caller gave up
            self.keep = False
            self.close()
            return
        waiter.set_result(resp)
        if mode == _NONE:
            resp._end()
            if rest:
                self._stray()
        elif rest:
            self._body(rest)

    # --- the body -----------------------------------------------------------

    def _body(self, data: bytes) -> None:
        mode = self._mode
        resp = self.resp
        assert resp is not None
        if mode == _LENGTH:
            remaining = self._remaining
            n = len(data)
            if n < remaining:
                self._remaining = remaining - n
                self._deliver(resp, data)
                return
            self._deliver(resp, data if n == remaining else data[:remaining])
            self._finish()
            if n > remaining:
                self._stray()
        elif mode == _CHUNKED:
            self._chunked(resp, data)
        else:
            self._deliver(resp, data)

    def _deliver(self, resp: Response, data: bytes) -> None:
        if not data:
            return
        resp._push(data)
        self.unread += len(data)
        if self.unread > HIGH_WATER and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()

    def _chunked(self, resp: Response, data: bytes) -> None:
        out: list[bytes] = []
        pos = 0
        n = len(data)
        while pos < n:
            if self._cstate == _DATA:
                take = min(self._remaining, n - pos)
                out.append(data if take == n else data[pos : pos + take])
                pos += take
                self._remaining -= take
                if self._remaining == 0:
                    self._cstate = _DATA_END
                continue
            nl = data.find(b"\n", pos)
            if nl < 0:
                self._line += data[pos:]
                if len(self._line) > MAX_LINE:
                    self._protocol_error("a chunk line is too long")
                    return
                break
            if self._line:
                self._line += data[pos:nl]
                line = bytes(self._line)
                self._line.clear()
            else:
                line = data[pos:nl]
            pos = nl + 1
            if line[-1:] == b"\r":
                line = line[:-1]
            if len(line) > MAX_LINE:
                self._protocol_error("a chunk line is too long")
                return
            state = self._cstate
            if state == _SIZE:
                digits = line.partition(b";")[0].strip(b" \t")
                if not digits or len(digits) > 16 or digits.strip(HEX_DIGITS):
                    self._protocol_error("a chunk size is invalid")
                    return
                size = int(digits, 16)
                if size:
                    self._remaining = size
                    self._cstate = _DATA
                else:
                    self._cstate = _TRAILER
            elif state == _DATA_END:
                if line:
                    self._protocol_error("a chunk does not end where its size says")
                    return
                self._cstate = _SIZE
            elif line:  # a trailer field: read and dropped
                self._trailers += len(line)
                if self._trailers > MAX_TRAILERS:
                    self._protocol_error("the answer's trailers are too large")
                    return
            else:
                if out:
                    self._deliver(resp, b"".join(out) if len(out) > 1 else out[0])
                self._finish()
                if pos < n:
                    self._stray()
                return
        if out:
            self._deliver(resp, b"".join(out) if len(out) > 1 else out[0])

    def _finish(self) -> None:
        self._mode = _NONE
        if self.resp is not None:
            self.resp._end()

    def _stray(self) -> None:
        """Bytes after the end of an answer: pipelining is never used, so the framing is off."""
        self.keep = False

    def _protocol_error(self, why: str) -> None:
        exc = ProtocolError(f"upstream sent invalid HTTP: {why}")
        self.keep = False
        self._mode = _NONE
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


def _parse_head(head: bytes) -> tuple[int, str, int, CIMultiDict[str]]:
    """Status, reason, minor version and headers. Values are UTF-8 with undecodable
    bytes kept as surrogates (aiohttp's reading), so they pass on byte for byte."""
    text = head.decode("utf-8", "surrogateescape")
    if CTL.search(text):
        raise ValueError("a control character in the answer's head")
    lines = text.split("\n")
    version, _, rest = lines[0].rstrip("\r").partition(" ")
    if version == "HTTP/1.1":
        minor = 1
    elif version == "HTTP/1.0":
        minor = 0
    else:
        raise ValueError("not an HTTP/1.x status line")
    code, _, reason = rest.partition(" ")
    if "\r" in reason:
        raise ValueError("a bare CR in the answer's head")
    if len(code) != 3 or not code.isdigit() or not code.isascii():
        raise ValueError("the status code is invalid")
    pairs: list[tuple[str, str]] = []
    for line in lines[1:]:
        if line[-1:] == "\r":
            line = line[:-1]
        if not line:
            continue
        if "\r" in line:
            raise ValueError("a bare CR in the answer's head")
        if line[0] in " \t":  # an obsolete folded continuation: joined with a space
            if not pairs:
                raise ValueError("a header line continues nothing")
            name, value = pairs[-1]
            pairs[-1] = (name, value + " " + line.strip(" \t"))
            continue
        name, sep, value = line.partition(":")
        if not sep or TOKEN.fullmatch(name) is None:
            raise ValueError("a header line is invalid")
        pairs.append((name, value.strip(" \t")))
    return int(code), reason if reason.isascii() else "", minor, CIMultiDict(pairs)


def _content_length(values: list[str]) -> int | None:
    lengths = {v.strip() for value in values for v in value.split(",")}
    if len(lengths) != 1:
        return None
    (length,) = lengths
    if not length.isdigit() or not length.isascii() or len(length) > 18:
        return None
    return int(length)


def request_head(method: str, url: URL, headers: CIMultiDict[str], length: int) -> bytes:
    """The request line and headers; a header that would split the head is refused."""
    target = url.raw_path_qs
    parts = [method, " ", target, " HTTP/1.1\r\nHost: ", url.host_port_subcomponent or "", "\r\n"]
    lines = 3  # the request line, Host and the blank line that ends the head
    for key, value in headers.items():
        parts += (key, ": ", value, "\r\n")
        lines += 1
    if length or method not in _NO_BODY_METHODS:
        parts += ("Content-Length: ", str(length), "\r\n")
        lines += 1
    parts.append("\r\n")
    text = "".join(parts)
    if text.count("\n") != lines or text.count("\r") != lines or "\0" in text or " " in target:
        raise UpstreamConnectError("a request header or the path holds a line break or NUL")
    return text.encode("utf-8", "surrogateescape")


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
            if conn.alive and conn.keep and now - conn.idle_since < self.keepalive:
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
        except (OSError, ssl.SSLError) as exc:
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
