"""A deadline for every request head aiohttp's server reads.

aiohttp's request handler gives a head no deadline of its own: a client that starts a head
and sends the rest a byte a minute holds the connection until the keep-alive timeout (an
hour), and many such clients hold that many sockets. ``HeadWatch`` sits between the
transport and the handler and closes the connection when a head begun on an idle
connection is not whole within ``stall`` seconds, as the front does for the heads it reads
itself. It serves the connections the front hands over (long heads, anything the front's
parser does not take) and every connection of a listener aiohttp serves whole
(``server.http_server: aiohttp``, the admin listener).

What it reads of the handler: ``_request_count`` (heads read so far) and ``_waiter`` (set
while the handler waits for a head); tests/proxy/test_aiohttp_pins.py checks both. Bytes
that arrive while a request is being served (its body, or a pipelined head behind it) are
the handler's: a body has no deadline here, and a head pipelined behind a busy request is
bounded by the keep-alive timeout, as aiohttp bounds it.
"""

from __future__ import annotations

import asyncio

from aiohttp import web, web_protocol


class HeadWatch(asyncio.Protocol):
    """aiohttp's handler for one connection, with a deadline on every head it waits for."""

    __slots__ = (
        "_handler",
        "_head",
        "_idle_first",
        "_loop",
        "_stall",
        "_timer",
        "_transport",
        "_watched",
    )

    def __init__(self, handler: web_protocol.RequestHandler, stall: float, idle: float) -> None:
        self._handler = handler
        self._stall = stall  # a started head must end within this
        self._idle_first = idle  # a new connection that sends nothing is closed after this
        self._loop = asyncio.get_running_loop()
        self._timer: asyncio.TimerHandle | None = None
        self._transport: asyncio.Transport | None = None
        self._watched = -1  # the head count when the deadline was armed
        self._head = False  # the deadline armed is a started head's (not a silent start's)

    def _idle(self) -> bool:
        """The handler waits for a head: every byte now is one (or a blank line)."""
        handler = self._handler
        if handler._request_count == 0:
            return True
        waiter = handler._waiter
        return waiter is not None and not waiter.done() and not handler._messages

    def _arm(self, delay: float, *, head: bool) -> None:
        self._disarm()
        self._watched = self._handler._request_count
        self._head = head
        self._timer = self._loop.call_later(delay, self._expire)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expire(self) -> None:
        self._timer = None
        transport = self._transport
        if (
            transport is not None
            and not transport.is_closing()
            and self._handler._request_count == self._watched
        ):
            transport.close()  # a head that did not end in time

    def take_over(self, transport: asyncio.Transport, data: bytes) -> None:
        """A connection the front read ``data`` of: the head in it must end in time."""
        transport.set_protocol(self)
        self._transport = transport
        self._handler.connection_made(transport)
        if data:
            self._handler.data_received(data)
        if self._handler._request_count == 0:
            self._arm(self._stall, head=True)

    # --- asyncio.Protocol, forwarded to the handler ----------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's is not one
        self._handler.connection_made(transport)
        self._arm(self._idle_first, head=False)

    def data_received(self, data: bytes) -> None:
        handler = self._handler
        before = handler._request_count
        idle = self._idle()
        handler.data_received(data)
        if handler._request_count != before:
            self._disarm()  # a head is whole: what follows it is the handler's
        elif idle and not (self._head and self._timer is not None) and data.strip(b"\r\n"):
            self._arm(self._stall, head=True)  # a head has begun: it must end in time

    def eof_received(self) -> None:
        self._handler.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._transport = None
        self._handler.connection_lost(exc)

    def pause_writing(self) -> None:
        self._handler.pause_writing()

    def resume_writing(self) -> None:
        self._handler.resume_writing()


class WatchedSite(web.TCPSite):
    """``web.TCPSite`` with every connection's heads under a deadline (``HeadWatch``)."""

    __slots__ = ("_idle", "_stall")

    def __init__(
        self,
        runner: web.AppRunner,
        host: str | None,
        port: int | None,
        *,
        stall: float,
        idle: float,
        reuse_port: bool = False,
        backlog: int = 128,
    ) -> None:
        super().__init__(runner, host, port, reuse_port=reuse_port, backlog=backlog)
        self._stall = stall
        self._idle = idle

    async def start(self) -> None:
        await web.BaseSite.start(self)
        server = self._runner.server
        assert server is not None
        stall, idle = self._stall, self._idle
        self._server = await asyncio.get_running_loop().create_server(
            lambda: HeadWatch(server(), stall, idle),
            self._host,
            self._port,
            backlog=self._backlog,
            reuse_address=self._reuse_address,
            reuse_port=self._reuse_port,
        )
        sockets = self._server.sockets
        self._bound_port = sockets[0].getsockname()[1] if sockets else self._port
