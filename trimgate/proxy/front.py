"""trimgate's own HTTP/1.1 front: the proxy's hot path without aiohttp's server.

What agents' SDKs send (HTTP/1.1, one Host, a body framed by Content-Length, a proxied
path of plain characters) is parsed here and handed straight to ``Proxy.handle`` as a
``FrontRequest``; the answer's head goes out with its first bytes, in one write where it
can. Anything else hands the connection over to aiohttp's own request handler, with every
byte read so far, and aiohttp serves it exactly as it serves a connection it accepted:
HTTP/1.0, chunked or ``Expect`` bodies, upgrades (the event WebSocket), ``HEAD``, the
admin paths, escaped or unusual targets, oversized bodies, and every head
``http11.parse_request_head`` does not take. A handed-over connection stays with aiohttp.

The framing is ``http11.RequestReader``'s (no I/O); this module moves bytes and answers.
``parse_request_head`` never refuses anything itself, so it can be strict: tests check
that aiohttp's parser reads every head it takes the same way. The cost this saves is in
bench/RESULTS.md; ``server.http_server: aiohttp`` serves every connection with aiohttp.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Awaitable, Callable, Iterable
from email.utils import formatdate
from typing import Final, cast

from aiohttp import web
from multidict import CIMultiDictProxy

from trimgate.proxy import http11
from trimgate.proxy.headwatch import HeadWatch

log = logging.getLogger("trimgate")

PIPELINE_LIMIT: Final = 256 * 1024  # read no further while this much waits behind a request
KEEPALIVE: Final = 3630.0  # seconds an idle connection is kept (aiohttp 3.14's default)
STALL: Final = 60.0  # seconds for a started head to end, and between two reads of a body
LINGER: Final = 2.0  # seconds a refused body's rest may take to arrive after the answer
SHUTDOWN_TIMEOUT: Final = 60.0  # on stop, in-flight answers get this long (aiohttp's default)
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


class BodyBudget:
    """The request-body bytes all requests in flight hold in one process
    (``server.max_buffered_bytes``), shared by the front and the proxy. Bytes are counted
    as they arrive, not as a head declares them: a client that declares a large body and
    sends it slowly holds only what it sent."""

    __slots__ = ("held", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0

    def take(self, size: int, owned: int = 0) -> bool:
        """Count ``size`` more bytes for a request that holds ``owned`` already, unless
        that passes the limit (a request alone in the budget is always let through)."""
        if size <= 0:
            return True
        if self.held > owned and self.held + size > self.limit:
            return False
        self.held += size
        return True

    def give(self, size: int) -> None:
        self.held -= size


class FrontRequest:
    """One request served by the front: the part of ``web.Request`` the proxy reads,
    and the answer's writer (``start``, ``write``, ``write_eof``)."""

    __slots__ = (
        "_chunked",
        "_conn",
        "_pending",
        "body",
        "busy",
        "finished",
        "headers",
        "held",
        "keep",
        "method",
        "path",
        "raw_path",
        "started",
    )

    def __init__(self, conn: FrontProtocol, request: http11.Request) -> None:
        self._conn = conn
        self.method = request.method
        self.raw_path = request.target
        self.path = request.target.partition("?")[0]  # never escaped: see parse_request_head
        self.headers = CIMultiDictProxy(request.headers)
        self.keep = request.keep
        self.body = request.body
        self.held = 0  # body bytes the front counted in its BodyBudget (released by it)
        self.busy = False  # over the BodyBudget: the body was not read, the proxy says 503
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
        if self._conn.closing:
            self.keep = False  # shutting down: this is the connection's last answer
        self._pending, chunked = http11.answer_head(
            status, reason, headers, date=_Date.now(), length=length, keep=self.keep
        )
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
            pieces += http11.chunk(data)
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
        end = http11.LAST_CHUNK if self._chunked else b""
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


class FrontProtocol(asyncio.Protocol):
    """One client connection: requests one at a time, kept alive between them."""

    def __init__(self, front: Front) -> None:
        self._front = front
        self._loop = front.loop
        self.transport: asyncio.Transport | None = None
        self._reader = http11.RequestReader(max_body=front.max_body, delegated=front.delegated)
        self._held = 0  # bytes of the body in progress counted in front.bodies
        self._unread = 0  # bytes still to come of a body refused midway: read and dropped
        self._gone = False  # closed, or handed over to aiohttp
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
        if self._held and self._front.bodies is not None:
            self._front.bodies.give(self._held)  # a body that never arrived whole
            self._held = 0
        self._gone = True
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
        if self._unread:  # the rest of a refused body: dropped, never held
            self._unread = max(0, self._unread - len(data))
            if not self._unread and self._task is None and self.transport is not None:
                self.transport.close()  # answered already, and now read to its end
            return
        reader = self._reader
        state = reader.state
        if state == http11.DONE:
            reader.receive_data(data)  # pipelined: served once this answer is out
            if reader.buffered > PIPELINE_LIMIT and self.transport is not None:
                self._reading = False
                self.transport.pause_reading()
            return
        if state == http11.IDLE or state == http11.BODY:
            # a head has begun: it must end within STALL; a body in progress: the clock
            # runs from its last bytes
            self._arm(STALL)
        elif state == http11.DELEGATED:
            return
        reader.receive_data(data)
        self._next()

    # --- reading requests ----------------------------------------------------

    def _next(self) -> None:
        if self._reader.state == http11.BODY and not self._count_body():
            return
        event = self._reader.next_event()
        if type(event) is http11.Request:
            self._disarm()
            request = FrontRequest(self, event)
            request.held, self._held = self._held, 0
            self._task = self._loop.create_task(self._serve(request))
        elif type(event) is http11.Delegate:
            self._hand_over(event.data)
        elif self._reader.state == http11.BODY:
            if self._count_body():  # the body bytes that came with the head
                self._arm(STALL)
        elif self._reader.state == http11.IDLE:
            self._arm()  # blank lines only: still idle

    def _count_body(self) -> bool:
        """Count the body bytes arrived since last counted; past the budget the request
        gets a 503 and nothing more of its body is read (False)."""
        if self._task is not None:  # refused already: the 503 is on its way
            return False
        pending, bodies = self._reader.pending, self._front.bodies
        if pending is None or bodies is None:
            return True
        arrived = min(self._reader.received, pending.length)
        if arrived > self._held:
            if not bodies.take(arrived - self._held, self._held):
                self._refuse_body(pending)
                return False
            self._held = arrived
        return True

    def _hand_over(self, data: bytes) -> None:
        """aiohttp serves this connection from here on, from the bytes read so far."""
        transport = self.transport
        assert transport is not None
        self._disarm()
        self._gone = True
        self._front.forget(self)
        # aiohttp's handler gives a head no deadline: the head handed over (a long one, or
        # one still arriving), and every later one, must end within STALL, as here
        HeadWatch(self._front.aiohttp_server(), STALL, KEEPALIVE).take_over(transport, data)
        if not self._reading:
            self._reading = True
            transport.resume_reading()

    def _refuse_body(self, pending: http11.Request) -> None:
        """Over the body budget: the proxy answers 503 (in the provider's envelope) without
        the body. What arrived of it is let go and the rest is read and dropped, so that
        the client, still sending, gets the answer rather than a reset; the connection
        closes once the body is through, or LINGER after the answer."""
        self._disarm()
        self._unread = pending.length - min(self._reader.received, pending.length)
        self._reader.drop_body()
        if self._held and self._front.bodies is not None:
            self._front.bodies.give(self._held)
            self._held = 0
        head = http11.Request(pending.method, pending.target, pending.headers, 0, False)
        request = FrontRequest(self, head)
        request.busy = True
        self._task = self._loop.create_task(self._serve(request))

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
            if request.held and self._front.bodies is not None:
                self._front.bodies.give(request.held)
        self._done(request)

    def _done(self, request: FrontRequest) -> None:
        transport = self.transport
        if transport is None:
            return
        if self._unread:  # a refused body still arriving: it has LINGER to end
            self._timer = self._loop.call_later(LINGER, transport.close)
            return
        if not (request.finished and request.keep) or self.closing:
            transport.close()
            return
        reader = self._reader
        reader.start_next()
        self._arm(STALL if reader.buffered else None)
        if not self._reading:
            self._reading = True
            transport.resume_reading()
        if reader.buffered:
            self._next()  # a pipelined request

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
        if not self._gone and self._reader.state <= http11.BODY and self.transport is not None:
            self.transport.close()  # idle too long, or a head or body that stalled

    @property
    def between_requests(self) -> bool:
        return not self._gone and self._reader.state <= http11.HEAD


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
        bodies: BodyBudget | None = None,
    ) -> None:
        self.handle = handle
        self.bodies = bodies  # request bodies counted before they are read, when given
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
        bodies: BodyBudget | None = None,
    ) -> None:
        super().__init__(runner, backlog=backlog)
        self._listen_backlog = backlog
        self._host = host
        self._port = port
        self._reuse_port = reuse_port
        server = runner.server
        assert server is not None
        self._front = Front(
            handle, server, max_body=max_body, delegated=delegated, grace=grace, bodies=bodies
        )
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
