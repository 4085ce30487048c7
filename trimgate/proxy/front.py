"""trimgate's own HTTP/1.1 front: the proxy's hot path without aiohttp's server.

What agents' SDKs send (HTTP/1.1, one Host, a body framed by Content-Length, a proxied
path of plain characters) is parsed here and handed straight to ``Proxy.handle`` as a
``FrontRequest``; the answer's head goes out with its first bytes, in one write where it
can. Anything else hands the connection over to aiohttp's own request handler, with every
byte read so far, and aiohttp serves it exactly as it serves a connection it accepted:
HTTP/1.0, chunked or ``Expect`` bodies, upgrades (the event WebSocket), ``HEAD``, the
admin paths, escaped or unusual targets, oversized bodies, and every head ``parse_head``
does not take. A handed-over connection stays with aiohttp.

``parse_head`` never refuses anything itself, so it can be strict: tests check that
aiohttp's parser reads every head it takes the same way. The cost this saves is in
bench/RESULTS.md; ``server.http_server: aiohttp`` serves every connection with aiohttp.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import socket
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from email.utils import formatdate
from typing import Final, cast

from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy

from trimgate.proxy.h1 import CTL, HEAD_END, TOKEN

log = logging.getLogger("trimgate")

MAX_HEAD: Final = 16 * 1024  # a longer head goes to aiohttp, which refuses it
PIPELINE_LIMIT: Final = 256 * 1024  # read no further while this much waits behind a request
KEEPALIVE: Final = 3630.0  # seconds an idle connection is kept (aiohttp 3.14's default)
STALL: Final = 60.0  # seconds for a started head to end, and between two reads of a body
MAX_LINE: Final = 8000  # a longer line, or more fields than MAX_FIELDS: aiohttp's limits
MAX_FIELDS: Final = 128  # (8190 bytes a line, 128 fields) decide
SHUTDOWN_TIMEOUT: Final = 60.0  # on stop, in-flight answers get this long (aiohttp's default)
METHODS: Final = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_BLANK_LINES: Final = re.compile(rb"(?:\r\n)+")
# origin-form targets of RFC 3986 characters only; anything else is aiohttp's to judge
_REQUEST_LINE: Final = re.compile(r"([A-Z]+) (/[A-Za-z0-9\-._~!$&'()*+,;=:@/?%]*) HTTP/1\.1")
# fields aiohttp refuses to see twice (aiohttp.http_parser.SINGLETON_HEADERS)
_SINGLETONS: Final = (
    "Content-Length",
    "Content-Location",
    "Content-Range",
    "Content-Type",
    "ETag",
    "Host",
    "Max-Forwards",
    "Server",
    "Transfer-Encoding",
    "User-Agent",
)
# framing and connection fields aiohttp's parser acts on: a request with one is aiohttp's
_DELEGATED_FIELDS: Final = (
    "Transfer-Encoding",
    "Expect",
    "Upgrade",
    "Proxy-Connection",
    "Sec-WebSocket-Key1",  # an old WebSocket draft's: aiohttp refuses it
)
_NO_BODY_STATUS: Final = frozenset({204, 304})
_OURS: Final = frozenset({"content-length", "transfer-encoding", "connection", "date", "server"})

Handle = Callable[["FrontRequest"], Awaitable[web.StreamResponse | None]]
# the fronts serving an app: its on_shutdown waits for their answers in flight
FRONTS: Final = web.AppKey("trimgate_fronts", list["Front"])


async def drain_fronts(app: web.Application) -> None:
    """An ``on_shutdown`` handler: every front's answers in flight, and those of the
    connections it handed to aiohttp, within one grace. Waited for one after the other
    (aiohttp's own wait comes after ``on_shutdown``), a shutdown could take twice it;
    aiohttp's later wait then finds no connection left."""
    fronts = app.get(FRONTS, [])
    servers = {id(front.aiohttp_server): front for front in fronts}
    await asyncio.gather(
        *(front.drain() for front in fronts),
        *(front.aiohttp_server.shutdown(front.grace) for front in servers.values()),
    )


class _Date:
    """The Date header's value, formatted once a second."""

    second = -1
    value = ""

    @classmethod
    def now(cls) -> str:
        second = int(time.time())
        if second != cls.second:
            cls.second, cls.value = second, formatdate(second, usegmt=True)
        return cls.value


@dataclass(slots=True)
class Head:
    """A request head this front serves: method, target, headers, body length."""

    method: str
    target: str
    headers: CIMultiDict[str]
    length: int
    keep: bool


def parse_head(head: bytes, *, max_body: int, delegated: Iterable[str]) -> Head | None:
    """The head (without its blank line), or None: aiohttp takes the connection.

    None is never a refusal: it only means aiohttp's parser decides, so this one
    can be strict without ever answering differently from aiohttp.
    """
    text = head.decode("utf-8", "surrogateescape")  # aiohttp's reading of header bytes
    lines = text.split("\r\n")
    breaks = len(lines) - 1
    if breaks > MAX_FIELDS or (
        len(head) > MAX_LINE and any(len(line) > MAX_LINE for line in head.split(b"\r\n"))
    ):
        return None
    if text.count("\n") != breaks or text.count("\r") != breaks or CTL.search(text):
        return None  # a bare CR or LF, or a control character
    line = _REQUEST_LINE.fullmatch(lines[0])
    if line is None:
        return None
    method, target = line.groups()
    path = target.partition("?")[0]
    if method not in METHODS or "%" in path or path in delegated:
        return None  # escapes: aiohttp routes on the decoded path, so it decides
    pairs = []
    for field in lines[1:]:
        name, colon, value = field.partition(":")
        if not colon or not TOKEN.fullmatch(name):
            return None  # also a folded line, or whitespace before the colon
        pairs.append((name, value.strip(" \t")))
    headers = CIMultiDict(pairs)
    if any(name in headers for name in _DELEGATED_FIELDS):
        return None
    if "Host" not in headers:
        return None  # aiohttp refuses an HTTP/1.1 request without a Host
    if len(headers) != len({name.lower() for name, _ in pairs}) and any(
        len(headers.getall(name, ())) > 1 for name in _SINGLETONS
    ):
        return None  # a field aiohttp takes only once, twice
    declared = headers.get("Content-Length")
    length = 0
    if declared is not None:
        if not declared.isdigit() or not declared.isascii() or len(declared) > 18:
            return None
        length = int(declared)
        if length > max_body:
            return None  # aiohttp answers 413 (the proxy's own envelope is for its path)
    keep = True
    if "Connection" in headers:
        joined = ",".join(headers.getall("Connection"))
        tokens = {t.strip(" \t").lower() for t in joined.split(",")}
        if "upgrade" in tokens:
            return None
        keep = "close" not in tokens
    return Head(method, target, headers, length, keep)


class FrontRequest:
    """One request served by the front: the part of ``web.Request`` the proxy reads,
    and the answer's writer (``start``, ``write``, ``write_eof``)."""

    __slots__ = (
        "_chunked",
        "_conn",
        "_pending",
        "body",
        "finished",
        "headers",
        "keep",
        "method",
        "path",
        "raw_path",
        "started",
    )

    def __init__(self, conn: FrontProtocol, head: Head, body: bytes) -> None:
        self._conn = conn
        self.method = head.method
        self.raw_path = head.target
        self.path = head.target.partition("?")[0]  # never escaped: see parse_head
        self.headers = CIMultiDictProxy(head.headers)
        self.keep = head.keep
        self.body = body
        self.started = False
        self.finished = False
        self._chunked = False
        self._pending: bytes | None = None  # the answer's head, sent with its first bytes

    @property
    def transport(self) -> asyncio.Transport | None:
        return self._conn.transport

    async def read(self) -> bytes:
        return self.body

    def start(
        self,
        status: int,
        reason: str | None,
        headers: Iterable[tuple[str, str]],
        length: int | None,
    ) -> None:
        """The answer's status line and headers; ``length`` None: chunked."""
        if self.started:
            raise RuntimeError("the answer has started already")
        parts = [f"HTTP/1.1 {status} {reason or ''}\r\n"]
        for key, value in headers:
            parts.append(f"{key}: {value}\r\n")
        parts.append(f"Date: {_Date.now()}\r\n")
        chunked = False
        if status in _NO_BODY_STATUS or status < 200:
            pass  # never a body, so no framing
        elif length is not None:
            parts.append(f"Content-Length: {length}\r\n")
        else:
            parts.append("Transfer-Encoding: chunked\r\n")
            chunked = True
        if self._conn.closing:
            self.keep = False  # shutting down: this is the connection's last answer
        if not self.keep:
            parts.append("Connection: close\r\n")
        parts.append("\r\n")
        text = "".join(parts)
        if text.count("\n") != len(parts) or text.count("\r") != len(parts):
            raise ValueError("a line break in an answer's status line or header")
        self._pending = text.encode("utf-8", "surrogateescape")
        self._chunked = chunked
        self.started = True

    def _transport(self) -> asyncio.Transport:
        transport = self._conn.transport
        if transport is None or transport.is_closing():
            raise ConnectionResetError("the client has gone away")
        return transport

    async def write(self, data: bytes) -> None:
        if not data:
            return
        transport = self._transport()
        pieces: list[bytes] = []
        if self._pending is not None:
            pieces.append(self._pending)
            self._pending = None
        if self._chunked:
            pieces += (b"%x\r\n" % len(data), data, b"\r\n")
        else:
            pieces.append(data)
        if len(data) < 16384:
            transport.write(b"".join(pieces))
        else:
            transport.writelines(pieces)
        await self._conn.drain()

    async def flush(self) -> None:
        """The answer's head now, not with its first bytes (an answer that may be slow)."""
        if self._pending is not None:
            head, self._pending = self._pending, None
            self._transport().write(head)
            await self._conn.drain()

    async def write_eof(self, data: bytes = b"") -> None:
        if data:
            await self.write(data)
        transport = self._transport()
        end = b"0\r\n\r\n" if self._chunked else b""
        head, self._pending = self._pending, None
        if head is not None or end:
            transport.write(head + end if head is not None else end)
        self.finished = True

    async def send(self, response: web.StreamResponse) -> None:
        """An answer the proxy built whole (its errors, an admin refusal)."""
        if not isinstance(response, web.Response) or response.prepared:
            raise TypeError("the front writes only whole, unprepared web.Response answers")
        body = response.body
        if body is None:
            body = b""
        if not isinstance(body, bytes | bytearray):
            raise TypeError("the front writes only answers with a bytes body")
        headers = [(k, v) for k, v in response.headers.items() if k.lower() not in _OURS]
        if body and "Content-Type" not in response.headers:
            headers.append(("Content-Type", "application/octet-stream"))
        self.start(response.status, response.reason, headers, len(body))
        await self.write_eof(bytes(body))


_HEAD, _BODY, _BUSY, _GONE = range(4)


class FrontProtocol(asyncio.Protocol):
    """One client connection: requests one at a time, kept alive between them."""

    def __init__(self, front: Front) -> None:
        self._front = front
        self._loop = front.loop
        self.transport: asyncio.Transport | None = None
        self._state = _HEAD
        # bytes of the next head (or, while busy, of pipelined requests): the read itself
        # while it is the only one, a bytearray once reads must be joined
        self._buf: bytes | bytearray = b""
        self._scanned = 0
        self._head: Head | None = None
        self._parts: list[bytes] = []  # the body, as it arrives
        self._have = 0
        self._task: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._reading = True
        self._drain: asyncio.Future[None] | None = None
        self._paused = False
        self.closing = False  # close once the request in flight is answered

    # --- asyncio.Protocol --------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport = cast(asyncio.Transport, transport)  # uvloop's is not one
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)  # as aiohttp does
        self._front.connections.add(self)
        if self._front.closing:  # accepted as the listener closed
            self.closing = True
            transport.close()
            return
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._state = _GONE
        self.transport = None
        self._front.forget(self)
        self._disarm()
        if self._task is not None:
            self._task.cancel()  # the client left: the upstream request is cancelled too
        drain, self._drain = self._drain, None
        if drain is not None and not drain.done():
            drain.set_exception(ConnectionResetError("the client has gone away"))

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        drain, self._drain = self._drain, None
        if drain is not None and not drain.done():
            drain.set_result(None)

    def data_received(self, data: bytes) -> None:
        state = self._state
        if state == _HEAD:
            if self._buf:
                self._append(data)
            else:
                self._buf = data
                self._arm(STALL)  # a head has begun: it must end within STALL
            self._on_head()
        elif state == _BODY:
            self._arm(STALL)  # a body in progress: the clock runs from its last bytes
            self._parts.append(data)
            self._have += len(data)
            self._on_body()
        elif state == _BUSY:
            self._append(data)  # pipelined: served once this answer is out
            if len(self._buf) > PIPELINE_LIMIT and self.transport is not None:
                self._reading = False
                self.transport.pause_reading()

    # --- reading requests ----------------------------------------------------

    def _append(self, data: bytes) -> None:
        if isinstance(self._buf, bytes):
            self._buf = bytearray(self._buf)
        self._buf += data  # in place: a head sent byte by byte costs no quadratic copying

    def _on_head(self) -> None:
        buf = self._buf
        if buf[:2] == b"\r\n":  # empty lines before a request are ignored (RFC 9112 §2.2)
            blank = _BLANK_LINES.match(buf)
            assert blank is not None
            buf = self._buf = buf[blank.end() :]
            if not buf:
                self._arm()
                return
        found = HEAD_END.search(buf, self._scanned)
        if found is None:
            if len(buf) > MAX_HEAD:
                self._hand_over()
            else:
                self._scanned = max(0, len(buf) - 3)
            return
        if found.end() - found.start() != 4:
            self._hand_over()  # a blank line of bare LFs: aiohttp's parser decides
            return
        front = self._front
        text = bytes(buf[: found.start()])
        head = parse_head(text, max_body=front.max_body, delegated=front.delegated)
        if head is None:
            self._hand_over()
            return
        self._disarm()
        rest = bytes(buf[found.end() :])
        self._buf = b""
        self._scanned = 0
        self._head = head
        self._parts = [rest] if rest else []
        self._have = len(rest)
        self._state = _BODY
        self._on_body()

    def _on_body(self) -> None:
        head = self._head
        assert head is not None
        if self._have < head.length:
            self._arm(STALL)
            return
        parts = self._parts
        self._parts = []
        extra = self._have - head.length  # pipelined bytes after the body, in the last part
        self._have = 0
        if extra:
            last = parts[-1]
            parts[-1] = last[: len(last) - extra]
            self._buf = last[len(last) - extra :]
        else:
            self._buf = b""
        # the body is copied at most once: joined, or cut from a part that holds more
        body = parts[0] if len(parts) == 1 else b"".join(parts)
        self._head = None
        self._state = _BUSY
        self._disarm()
        request = FrontRequest(self, head, body)
        self._task = self._loop.create_task(self._serve(request))

    def _hand_over(self) -> None:
        """aiohttp serves this connection from here on, from the bytes read so far."""
        transport = self.transport
        assert transport is not None
        self._disarm()
        self._state = _GONE
        self._front.forget(self)
        data, self._buf = self._buf, b""
        handler = self._front.aiohttp_server()
        transport.set_protocol(handler)
        handler.connection_made(transport)
        if data:
            handler.data_received(bytes(data))
        if not self._reading:
            self._reading = True
            transport.resume_reading()

    # --- answering ---------------------------------------------------------------

    async def _serve(self, request: FrontRequest) -> None:
        try:
            response = await self._front.handle(request)
            if response is not None:
                await request.send(response)
        except ConnectionResetError:
            pass  # the client left mid-answer
        except Exception as exc:
            log.exception(
                "a request handler failed",
                extra={"event": "handler_error", "error_type": type(exc).__name__},
            )
            if not request.started and self.transport is not None:
                request.keep = False
                with contextlib.suppress(ConnectionResetError):
                    await request.send(web.json_response({"error": "internal error"}, status=500))
        finally:
            self._task = None
        self._done(request)

    def _done(self, request: FrontRequest) -> None:
        transport = self.transport
        if transport is None:
            return
        if not (request.finished and request.keep) or self.closing:
            transport.close()
            return
        self._state = _HEAD
        self._arm(STALL if self._buf else None)
        if not self._reading:
            self._reading = True
            transport.resume_reading()
        if self._buf:
            self._on_head()  # a pipelined request

    async def drain(self) -> None:
        if not self._paused:
            return
        if self.transport is None:
            raise ConnectionResetError("the client has gone away")
        if self._drain is None:
            self._drain = self._loop.create_future()
        await self._drain

    # --- idle connections ----------------------------------------------------------

    def _arm(self, delay: float | None = None) -> None:
        """The connection is closed if nothing happens for ``delay`` (idle: KEEPALIVE)."""
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._loop.call_later(KEEPALIVE if delay is None else delay, self._idle)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _idle(self) -> None:
        self._timer = None
        if self._state in (_HEAD, _BODY) and self.transport is not None:
            self.transport.close()  # idle too long, or a head or body that stalled

    @property
    def between_requests(self) -> bool:
        return self._state == _HEAD


class Front:
    """What the connections share: the handler, aiohttp's server for hand-overs, limits."""

    def __init__(
        self,
        handle: Handle,
        aiohttp_server: web.Server,
        *,
        max_body: int,
        delegated: frozenset[str],
        grace: float = SHUTDOWN_TIMEOUT,
    ) -> None:
        self.handle = handle
        self.aiohttp_server = aiohttp_server
        self.max_body = max_body
        self.delegated = delegated
        self.grace = grace  # on shutdown, how long answers in flight get
        self.loop = asyncio.get_running_loop()
        self.connections: set[FrontProtocol] = set()
        self.closing = False
        self._gone = asyncio.Event()  # set while no connection is open

    def protocol(self) -> FrontProtocol:
        return FrontProtocol(self)

    def forget(self, conn: FrontProtocol) -> None:
        self.connections.discard(conn)
        if not self.connections:
            self._gone.set()

    def close(self) -> None:
        """Shutting down: close connections between requests now (also those midway
        through a head), the others once their answer is out."""
        self.closing = True
        for conn in list(self.connections):
            conn.closing = True
            if conn.between_requests and conn.transport is not None:
                conn.transport.close()

    async def drain(self) -> None:
        """Wait for the answers in flight, at most ``grace``, then abort what is left."""
        self.close()
        if self.connections:
            self._gone.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._gone.wait(), self.grace)
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.abort()


class FrontSite(web.BaseSite):
    """A TCP listener serving the proxy app through the front (see the module's doc)."""

    __slots__ = ("_front", "_host", "_listen_backlog", "_port", "_reuse_port")

    def __init__(
        self,
        runner: web.AppRunner,
        host: str | None = None,
        port: int | None = None,
        *,
        handle: Handle,
        max_body: int,
        delegated: frozenset[str],
        reuse_port: bool = False,
        backlog: int = 128,
        grace: float = SHUTDOWN_TIMEOUT,
    ) -> None:
        super().__init__(runner, backlog=backlog)
        self._listen_backlog = backlog
        self._host = host
        self._port = port
        self._reuse_port = reuse_port
        server = runner.server
        assert server is not None
        self._front = Front(handle, server, max_body=max_body, delegated=delegated, grace=grace)
        runner.app[FRONTS].append(self._front)

    @property
    def name(self) -> str:
        return f"http://{self._host}:{self._port}"

    async def start(self) -> None:
        await super().start()
        self._server = await asyncio.get_running_loop().create_server(
            self._front.protocol,
            self._host,
            self._port or 0,
            backlog=self._listen_backlog,
            reuse_address=True,
            reuse_port=self._reuse_port or None,
        )

    async def stop(self) -> None:
        """No new connections, and none kept between requests. The answers in flight are
        waited for in the app's ``on_shutdown`` (``FRONTS``), after aiohttp has closed
        its idle connections and the event streams have ended, alongside aiohttp's own."""
        await super().stop()
        self._front.close()
