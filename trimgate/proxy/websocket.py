"""The WebSocket relay: an ``Upgrade: websocket`` request on a proxied path, relayed.

Rules of this module:
- The upgrade is routed, refused and filtered like an HTTP request (routing.py,
  upstream.py); trimgate connects to the routed upstream itself (ws:// or wss://) and
  answers the client only once the upstream has answered: a refusal goes back with its
  status, headers and body, a success as a 101 with the upstream's end-to-end headers.
- ``Sec-WebSocket-*`` is negotiated hop by hop so that both sides agree: the client's
  subprotocols and its offer of ``permessage-deflate`` are offered upstream, and the
  client is granted what the upstream granted.
- Frames go both ways as they come (text, binary, ping/pong, close code and reason), one
  at a time: a side is read only once the previous frame was written to the other (the
  writers wait for the socket to drain), so neither side can outrun the other.
- On the Responses path every ``response.create`` is examined like ``POST /v1/responses``
  (``ResponsesMode``); every other path (Realtime) is relayed untouched.
- Either side closing closes the other with the same code and reason; so does
  ``server.ws_idle_timeout`` without a frame, and trimgate's shutdown (1001).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import re
import time
from collections import deque
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Final, Literal

import aiohttp
import orjson
from aiohttp import WSMsgType, web
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from trimgate.providers.overflow import (
    OUTPUT,
    Overflow,
    detect_unspent_stop,
    stream_event_output,
)
from trimgate.providers.registry import CODECS
from trimgate.proxy import h1, relay
from trimgate.proxy import upstream as up
from trimgate.proxy.answers import error_response
from trimgate.proxy.examine import Chat, InflatedTooLarge
from trimgate.proxy.relay import Attempt
from trimgate.proxy.retry import replan, send_with_retries, unresolved
from trimgate.proxy.routing import Route
from trimgate.proxy.signals import Outcome, attribution, record
from trimgate.trimming.pipeline import TrimReport
from trimgate.trimming.policy import may_retry, next_attempt

if TYPE_CHECKING:
    from trimgate.proxy.forward import Proxy

log = logging.getLogger("trimgate")

_IDS = random.Random()
RESPONSES_PATHS: Final = frozenset({"/v1/responses", "/responses"})
# Negotiated by trimgate on each hop, never copied from one hop to the other
SEC_WEBSOCKET: Final = (
    "sec-websocket-key",
    "sec-websocket-version",
    "sec-websocket-extensions",
    "sec-websocket-protocol",
    "sec-websocket-accept",
)
CLOSE_TIMEOUT: Final = 10.0  # seconds a side gets to answer a close frame
QUEUE_FRAMES: Final = 32  # client frames waiting behind a response being examined
HOLD_BYTES: Final = 1024 * 1024  # events held before a response's first output event
MAX_OPEN: Final = 16  # responses created on a connection whose end is not yet seen
_UNSENDABLE_CODES: Final = frozenset({0, 1005, 1006, 1015})  # never sent in a close frame


def is_upgrade(headers: Mapping[str, str]) -> bool:
    """An ``Upgrade: websocket`` request (``Connection: upgrade`` among its tokens)."""
    if headers.get("Upgrade", "").strip().lower() != "websocket":
        return False
    return "upgrade" in {t.strip().lower() for t in headers.get("Connection", "").split(",")}


# --- the handshake --------------------------------------------------------------------


class _Refused(Exception):
    """The upstream answered the upgrade with something other than 101."""

    def __init__(self, resp: aiohttp.ClientResponse) -> None:
        super().__init__(resp.status)
        self.resp = resp


@dataclass(slots=True)
class _Handshake:
    headers: CIMultiDictProxy[str] | None = None  # the upstream's 101


_HANDSHAKE: ContextVar[_Handshake | None] = ContextVar("trimgate_ws_handshake", default=None)


async def _handshake_middleware(
    request: aiohttp.ClientRequest, handler: aiohttp.ClientHandlerType
) -> aiohttp.ClientResponse:
    """Keeps the upstream's 101 headers, and turns any other answer (redirects included:
    none is followed) into ``_Refused``, its body unread, to be relayed as it is."""
    resp = await handler(request)
    if resp.status != 101:
        raise _Refused(resp)
    holder = _HANDSHAKE.get()
    if holder is not None:
        holder.headers = resp.headers
    return resp


def _offered(headers: CIMultiDictProxy[str], name: str) -> list[str]:
    return [t.strip() for v in headers.getall(name, ()) for t in v.split(",") if t.strip()]


def _handshake_failed(route: Route, request_id: str, exc: Exception) -> web.Response:
    """The client's answer when the upstream's handshake failed: 504 on a timeout, else 502."""
    timeout = isinstance(exc, TimeoutError)
    log.warning(
        "a WebSocket handshake could not be relayed",
        extra={
            "event": "ws_handshake_failed",
            "request_id": request_id,
            "upstream": route.name,
            "path": route.path,
            "error_type": type(exc).__name__,
        },
    )
    status = 504 if timeout else 502
    message = "upstream timed out" if timeout else "upstream WebSocket handshake failed"
    return error_response(route.upstream.provider, status, message, request_id)


class WebSocketRelay:
    """Relays upgrades for one ``Proxy``; owns the client session WebSockets go out on."""

    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy
        self.server = proxy.config.server
        self._session: aiohttp.ClientSession | None = None
        self.links: set[_Link] = set()

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            s = self.server
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=s.max_connections, ttl_dns_cache=300),
                timeout=aiohttp.ClientTimeout(
                    total=None, connect=s.connect_timeout, sock_read=s.read_timeout
                ),
                auto_decompress=False,  # a refusal's body is relayed as it came
                skip_auto_headers=("User-Agent", "Accept-Encoding", "Accept"),
                cookie_jar=aiohttp.DummyCookieJar(),
                middlewares=(_handshake_middleware,),
            )
        return self._session

    async def shutdown(self) -> None:
        """Close every relayed WebSocket (1001), then the session."""
        for link in list(self.links):
            link.stop()
        if self.links:
            await asyncio.gather(*(link.done.wait() for link in list(self.links)))
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def relay(
        self, request: web.Request, route: Route, request_id: str
    ) -> web.StreamResponse:
        provider = route.upstream.provider
        probe = web.WebSocketResponse()
        if not probe.can_prepare(request).ok:
            return error_response(provider, 400, "not a valid WebSocket handshake", request_id)
        s = self.server
        url = URL(route.url(request.raw_path.partition("?")[2]), encoded=True)
        headers = up.request_headers(request.headers, drop=SEC_WEBSOCKET)
        protocols = _offered(request.headers, "Sec-WebSocket-Protocol")
        extensions = _offered(request.headers, "Sec-WebSocket-Extensions")
        deflate = any(e.lower().startswith("permessage-deflate") for e in extensions)
        holder = _Handshake()
        token = _HANDSHAKE.set(holder)
        started = time.perf_counter()
        try:
            upstream = await self._client().ws_connect(
                url,
                protocols=protocols,
                headers=headers,
                compress=15 if deflate else 0,
                max_msg_size=s.max_ws_frame_bytes,
                autoclose=False,
                autoping=False,
                ssl=h1.default_ssl_context() if url.scheme == "https" else True,
                decode_text=False,
                timeout=aiohttp.ClientWSTimeout(ws_receive=None, ws_close=CLOSE_TIMEOUT),
            )
        except _Refused as exc:
            return await self._refused(request, exc.resp, request_id)
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            return _handshake_failed(route, request_id, exc)
        finally:
            _HANDSHAKE.reset(token)
        self.proxy.metrics.for_upstream(route.name)[1].observe(time.perf_counter() - started)
        client = self._client_side(upstream, holder.headers, request_id)
        try:
            await client.prepare(request)
        except BaseException:
            await upstream.close(code=1001)
            raise
        link = _Link(self, client, upstream, route, request, request_id)
        self.links.add(link)
        try:
            await link.run()
        finally:
            self.links.discard(link)
            link.done.set()
        return client

    def _client_side(
        self,
        upstream: UpstreamSide,
        answer: CIMultiDictProxy[str] | None,
        request_id: str,
    ) -> ClientSide:
        """The client's side of the link, granted what the upstream granted, with the
        end-to-end headers of the upstream's 101 (``answer``)."""
        client: ClientSide = web.WebSocketResponse(
            protocols=(upstream.protocol,) if upstream.protocol else (),
            compress=upstream.compress > 0,
            max_msg_size=self.server.max_ws_frame_bytes,
            autoclose=False,
            autoping=False,
            timeout=CLOSE_TIMEOUT,
            decode_text=False,
        )
        answer = answer if answer is not None else CIMultiDictProxy(CIMultiDict())
        ours = {"x-trimgate-request-id": request_id}
        for key, value in up.response_headers(answer, ours):
            if key.lower() not in SEC_WEBSOCKET:
                client.headers.add(key, value)
        return client

    async def _refused(
        self, request: web.Request, resp: aiohttp.ClientResponse, request_id: str
    ) -> web.StreamResponse:
        """The upstream's refusal, status, headers and body as they came."""
        try:
            out = web.StreamResponse(status=resp.status, reason=resp.reason)
            out.headers.extend(
                up.response_headers(resp.headers, {"x-trimgate-request-id": request_id})
            )
            length = resp.headers.get("Content-Length")
            if length is not None and length.isdigit() and "Transfer-Encoding" not in resp.headers:
                out.content_length = int(length)
            await out.prepare(request)
            try:
                while chunk := await resp.content.readany():
                    await out.write(chunk)
            except (aiohttp.ClientError, OSError, TimeoutError):
                if request.transport is not None:
                    request.transport.close()  # a truncated answer must not look whole
                return out
            await out.write_eof()
            return out
        finally:
            resp.close()


# --- the link: two sockets, frames both ways ------------------------------------------

ClientSide = web.WebSocketResponse[Literal[False]]
UpstreamSide = aiohttp.ClientWebSocketResponse[Literal[False]]
Socket = ClientSide | UpstreamSide


@dataclass(frozen=True, slots=True)
class _End:
    code: int
    reason: bytes
    source: Socket | None  # the side that ended, None: trimgate's own decision


def _sendable(code: int) -> int:
    return 1000 if code in _UNSENDABLE_CODES or not 1000 <= code < 5000 else code


class _Link:
    def __init__(
        self,
        relay: WebSocketRelay,
        client: ClientSide,
        upstream: UpstreamSide,
        route: Route,
        request: web.Request,
        request_id: str,
    ) -> None:
        self.client = client
        self.upstream = upstream
        self.request_id = request_id  # of the handshake
        self.idle = relay.server.ws_idle_timeout
        self.loop = asyncio.get_running_loop()
        self.last = self.loop.time()
        self.done = asyncio.Event()
        self._stopped: asyncio.Future[_End] = self.loop.create_future()
        self.mode: ResponsesMode | None = None
        self.ending: _End | None = None  # the first end a pump read
        if route.path in RESPONSES_PATHS:
            self.mode = ResponsesMode(self, relay.proxy, route, request.headers, request_id)

    def stop(self, code: int = 1001, reason: bytes = b"server shutting down") -> None:
        if not self._stopped.done():
            self._stopped.set_result(_End(code, reason, None))

    async def run(self) -> None:
        tasks: list[asyncio.Task[Any]] = [
            self.loop.create_task(self._pump(self.client, self.upstream)),
            self.loop.create_task(self._pump(self.upstream, self.client)),
            self.loop.create_task(self._watchdog()),
        ]
        worker = self.mode.start() if self.mode is not None else None
        if worker is not None:
            tasks.append(worker)
        waiting: set[asyncio.Future[Any]] = {*tasks, self._stopped}
        try:
            done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            end = _End(1011, b"relay failed", None)
            for finished in done:
                if not finished.cancelled() and finished.exception() is None:
                    result = finished.result()
                    if isinstance(result, _End):
                        end = result
                        break
                elif not finished.cancelled():
                    exc = finished.exception()
                    log.warning(
                        "a WebSocket relay failed",
                        extra={
                            "event": "ws_relay_error",
                            "request_id": self.request_id,
                            "error_type": type(exc).__name__,
                        },
                    )
            if self.mode is not None and worker is not None and end.source is self.upstream:
                # what the provider sent before it closed (an error event held while a
                # create was decided) reaches the client before the close
                worker.cancel()
                await asyncio.gather(worker, return_exceptions=True)
                with contextlib.suppress(Exception):
                    await self.mode.flush()
            await self._close(end)
        except asyncio.CancelledError:
            # the client's connection is gone (aiohttp cancels its handler): the upstream
            # gets the close the client sent, if one was read, else 1001
            await self._close(self.ending or _End(1001, b"", self.client))
            raise
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _close(self, end: _End) -> None:
        """Close the other side with ``end``'s code and reason, then the side that ended."""
        code, reason = _sendable(end.code), end.reason[:123]
        order = (self.upstream, self.client) if end.source is not self.upstream else (self.client,)
        for ws in order:
            if not ws.closed:
                with contextlib.suppress(Exception):
                    await ws.close(code=code, message=reason)
        if end.source is self.upstream and not self.upstream.closed:
            with contextlib.suppress(Exception):
                await self.upstream.close(code=code)

    async def _watchdog(self) -> _End:
        while True:
            wait = self.last + self.idle - self.loop.time()
            if wait <= 0:
                return _End(1001, b"idle timeout", None)
            await asyncio.sleep(wait)

    async def _pump(self, src: Socket, dst: Socket) -> _End:
        """Frames from ``src`` to ``dst`` until ``src`` ends; how it ended."""
        end = await self._frames(src, dst)
        if self.ending is None:
            self.ending = end
        return end

    async def _frames(self, src: Socket, dst: Socket) -> _End:
        to_upstream = dst is self.upstream
        mode = self.mode
        while True:
            msg = await src.receive()
            kind = msg.type
            self.last = self.loop.time()
            if kind is WSMsgType.TEXT:
                data: bytes = msg.data
                if mode is None:
                    await dst.send_frame(data, WSMsgType.TEXT)
                elif to_upstream:
                    await mode.from_client(data)
                else:
                    await mode.from_upstream(data)
            elif kind is WSMsgType.BINARY:
                await dst.send_frame(msg.data, WSMsgType.BINARY)
            elif kind is WSMsgType.PING:
                await dst.ping(msg.data)
            elif kind is WSMsgType.PONG:
                await dst.pong(msg.data)
            elif kind is WSMsgType.CLOSE:
                reason = msg.extra.encode() if isinstance(msg.extra, str) else b""
                return _End(msg.data, reason, src)
            elif kind is WSMsgType.ERROR:
                exc = msg.data
                code = 1009 if "size" in str(exc).lower() else 1002
                if isinstance(exc, aiohttp.WebSocketError):
                    code = exc.code
                return _End(code, b"", src)
            else:  # CLOSING / CLOSED: the side went away without a close frame
                return _End(1011 if src is self.upstream else 1001, b"", src)

    # what ResponsesMode sends
    async def to_upstream(self, data: bytes) -> None:
        await self.upstream.send_frame(data, WSMsgType.TEXT)

    async def to_client(self, data: bytes) -> None:
        await self.client.send_frame(data, WSMsgType.TEXT)


# --- the Responses WebSocket mode ------------------------------------------------------

_TYPE = re.compile(rb'"type"\s*:\s*"([A-Za-z0-9_.\-]{1,96})"')
_LIFECYCLE: Final = frozenset({"response.created", "response.in_progress", "response.queued"})
_FAILED: Final = frozenset({"error", "response.failed"})
_TERMINAL: Final = frozenset(
    {"error", "response.completed", "response.failed", "response.incomplete", "response.cancelled"}
)


def event_type(frame: bytes) -> str:
    """The event's ``type`` (the first ``type`` key: OpenAI puts it first), or ""."""
    m = _TYPE.search(frame, 0, 512)
    return m.group(1).decode() if m else ""


class _Turn:
    """One attempt of a response: its events held until its first output event decides
    whether it overflowed. Also the ``Answer`` of an ``Attempt`` for retry.py."""

    __slots__ = (
        "decided",
        "dropped",
        "held",
        "held_bytes",
        "released",
        "status",
        "timer",
        "uncapped",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.decided: asyncio.Future[Overflow | None] = loop.create_future()
        self.released = asyncio.Event()
        self.held: deque[bytes] = deque()
        self.held_bytes = 0
        self.status = 200
        self.dropped = False
        self.uncapped = False  # a create with no max_output_tokens, its first attempt
        # as on HTTP, events are held STREAM_HOLD_SECONDS at most before the first output
        self.timer = loop.call_later(relay.STREAM_HOLD_SECONDS, self.decide, None)

    def hold(self, frame: bytes) -> None:
        if not self.dropped:
            self.held.append(frame)
            self.held_bytes += len(frame)

    def decide(self, overflow: Overflow | None) -> None:
        self.timer.cancel()
        if not self.decided.done():
            self.decided.set_result(overflow)

    # up.Answer, as retry.py reads it
    reason: str | None = None

    @property
    def headers(self) -> CIMultiDictProxy[str]:
        return CIMultiDictProxy(CIMultiDict())

    async def readany(self) -> bytes:
        return b""

    def release(self) -> None:
        return None

    def close(self) -> None:
        """Replaced by a retry: its events are never relayed."""
        self.dropped = True
        self.held.clear()
        self.released.set()


@dataclass(slots=True)
class _Node:
    """One response of the chain on this connection: its own input items and its
    output, as JSON array contents (no brackets), to rebuild a whole history."""

    parent: str | None
    input: bytes
    output: bytes = b""
    completed: bool = False
    size: int = 0


@dataclass(slots=True)
class _Chain:
    limit: int
    nodes: dict[str, _Node] = field(default_factory=dict)
    size: int = 0
    gave_up: bool = False

    def add(self, response_id: str, node: _Node) -> None:
        if self.gave_up:
            return
        node.size = len(node.input) + len(node.output) + len(response_id)
        self.size += node.size
        if self.size > self.limit:  # beyond the cap: no recovery on this connection
            self.gave_up = True
            self.nodes.clear()
            return
        self.nodes[response_id] = node

    def history(self, response_id: str) -> list[bytes] | None:
        """The whole input and output ``response_id`` stands for, or None if any link of
        its chain was not seen (or did not complete) on this connection."""
        parts: list[bytes] = []
        current: str | None = response_id
        while current is not None:
            node = self.nodes.get(current)
            if node is None or not node.completed:
                return None
            parts.append(node.output)
            parts.append(node.input)
            current = node.parent
            if len(parts) > 2 * len(self.nodes):  # a cycle cannot be a chain
                return None
        return [p for p in reversed(parts) if p]


def _items(value: Any) -> bytes | None:
    """A create's ``input`` as JSON array contents, or None when it is not readable."""
    if isinstance(value, str):
        value = [{"role": "user", "content": value}]
    if not isinstance(value, list):
        return None
    return orjson.dumps(value)[1:-1]


class ResponsesMode:
    """``response.create`` events examined, trimmed and retried like ``POST /v1/responses``.

    Client text frames go through one ordered queue (a create waits until the response
    before it has been decided); upstream events of a response are held until its first
    output event, so an overflow can be retried on the same connection unseen.
    """

    def __init__(
        self,
        link: _Link,
        proxy: Proxy,
        route: Route,
        headers: CIMultiDictProxy[str],
        request_id: str,
    ) -> None:
        self.link = link
        self.proxy = proxy
        self.route = replace(route, wire_format="openai-responses")
        self.headers = headers
        self.attribution = attribution(headers)
        self.codec = CODECS["openai-responses"]
        self.patterns = route.upstream.compiled_overflow_patterns
        self.queue: asyncio.Queue[bytes] = asyncio.Queue(QUEUE_FRAMES)
        self.turn: _Turn | None = None
        self.chain = _Chain(proxy.config.server.max_ws_history_bytes)
        self.node: _Node | None = None  # of the response being created
        self.open: dict[str, _Node] = {}  # created, not yet completed
        self.streaming = False  # a response's events are being relayed, its end not yet

    def start(self) -> asyncio.Task[None]:
        return self.link.loop.create_task(self._worker())

    async def from_client(self, frame: bytes) -> None:
        await self.queue.put(frame)

    async def _worker(self) -> None:
        while True:
            frame = await self.queue.get()
            if event_type(frame) == "response.create":
                await self._create(frame)
            else:
                await self.link.to_upstream(frame)

    # --- upstream events ---------------------------------------------------------------

    async def from_upstream(self, frame: bytes) -> None:
        turn = self.turn
        if turn is None:
            self._observe(frame)
            await self.link.to_client(frame)
            return
        if turn.decided.done():  # decided, not yet relayed: behind the held events
            turn.hold(frame)
            if turn.held_bytes > HOLD_BYTES:
                await turn.released.wait()  # stop reading the upstream meanwhile
            return
        kind = event_type(frame)
        turn.hold(frame)
        if kind in _FAILED:
            turn.status = _status(frame)
            block = _block(kind, frame)
            turn.decide(None if block is None else self._overflow(block))
        elif kind.startswith("response.") and kind not in _LIFECYCLE:
            self._judge(turn, kind, frame)
        elif turn.held_bytes > HOLD_BYTES:
            turn.decide(None)

    def _judge(self, turn: _Turn, kind: str, frame: bytes) -> None:
        """A response event before any output, as on HTTP: one that states an overflow
        (a response that failed, whatever its event's name); an empty item (an opener, an
        empty part) held on; for a create with no ``max_output_tokens`` (the first
        attempt's), the response left incomplete for it with nothing produced is the
        window's stop (``detect_unspent_stop``); anything else is output or the end."""
        block = _block(kind, frame)
        found = None if block is None else self._overflow(block)
        if block is None or found is not None:
            turn.decide(found)
        elif turn.uncapped and kind in _TERMINAL and detect_unspent_stop(block) is not None:
            turn.decide(Overflow(None, None))
        elif kind in _TERMINAL or stream_event_output(block) == OUTPUT:
            turn.decide(None)  # output (or the end): it did not overflow
        elif turn.held_bytes > HOLD_BYTES:
            turn.decide(None)

    def _overflow(self, block: bytes) -> Overflow | None:
        return self.codec.detect_stream_event_overflow(
            block, output_started=False, patterns=self.patterns
        )

    def _observe(self, frame: bytes) -> None:
        """Whether a response is streaming, and the chain's bookkeeping, from the events
        relayed to the client."""
        kind = event_type(frame)
        if kind == "response.created":
            self.streaming = True
        elif kind in _TERMINAL:
            self.streaming = False
        if self.chain.gave_up or self.chain.limit == 0:
            return
        if kind == "response.created":
            node, self.node = self.node, None
            rid = _response_id(frame)
            if node is not None and rid is not None:
                if len(self.open) >= MAX_OPEN:  # responses that never ended: forgotten
                    self.open.pop(next(iter(self.open)))
                self.open[rid] = node
        elif kind in _TERMINAL and kind != "error":
            try:
                response = orjson.loads(frame).get("response")
            except (orjson.JSONDecodeError, AttributeError):
                return
            if not isinstance(response, dict):
                return
            rid = response.get("id")
            node = self.open.pop(rid, None) if isinstance(rid, str) else None
            if node is None or kind != "response.completed":
                return
            output = _items(response.get("output") or [])
            if output is None:
                return
            node.output, node.completed = output, True
            assert isinstance(rid, str)
            self.chain.add(rid, node)

    # --- a create --------------------------------------------------------------------------

    async def _send(self, body: bytes, *, uncapped: bool = False) -> Attempt:
        """One attempt: the frame sent, its events held until they tell an overflow;
        ``uncapped`` for a create's first attempt that set no ``max_output_tokens``."""
        turn = _Turn(self.link.loop)
        turn.uncapped = uncapped
        self.turn = turn
        await self.link.to_upstream(body)
        overflow = await turn.decided
        return Attempt(turn, b"", overflow)

    async def flush(self) -> None:
        """The events held for the response being decided, to the client (the upstream
        has gone: nothing will be retried)."""
        turn = self.turn
        if turn is not None and not turn.dropped:
            await self._release(turn)

    async def _release(self, turn: _Turn) -> None:
        """The held events to the client, then the rest as they come."""
        try:
            while turn.held:
                frame = turn.held.popleft()
                self._observe(frame)
                await self.link.to_client(frame)
        finally:
            if self.turn is turn:
                self.turn = None
            turn.released.set()

    async def _create(self, frame: bytes) -> None:
        request_id = f"{_IDS.getrandbits(64):016x}"
        started = time.perf_counter()
        try:
            event = orjson.loads(frame)
        except orjson.JSONDecodeError:
            event = None
        if not isinstance(event, dict):
            await self.link.to_upstream(frame)  # the upstream answers it
            return
        prev = event.get("previous_response_id")
        own = _items(event.get("input"))
        self.node = None
        if own is not None and (prev is None or isinstance(prev, str)):
            self.node = _Node(prev if isinstance(prev, str) else None, own)
        if self.streaming:
            # sent while the response before it still streams: its events cannot be told
            # apart from that one's, so it is not held (trimmed when needed, not retried)
            await self._unheld(frame, None if prev else request_id, started)
            return
        if prev:
            # only new items: forwarded as they are; an overflow is recovered from the
            # chain when all of it was seen here
            attempt = await self._send(frame, uncapped=event.get("max_output_tokens") is None)
            history = self.chain.history(prev) if isinstance(prev, str) else None
            if attempt.overflow is None or history is None or own is None:
                self._count("other", _turn(attempt).status)
                await self._release(_turn(attempt))
                return
            await self._recover(event, history, own, attempt, request_id, started)
            return
        chat, _ = await self._examine(frame, request_id)
        if chat is None:
            attempt = await self._send(frame)
            self._count("other", _turn(attempt).status)
            await self._release(_turn(attempt))
            return
        self._overhead(started)
        await self._send_chat(chat, request_id)

    async def _unheld(self, frame: bytes, request_id: str | None, started: float) -> None:
        """A create sent at once, examined (``request_id`` given) but not held."""
        chat = (await self._examine(frame, request_id))[0] if request_id is not None else None
        if chat is None or request_id is None:
            self._count("other", 200)
            await self.link.to_upstream(frame)
            return
        self._overhead(started)
        await self.link.to_upstream(chat.send_body)
        report = chat.report
        reason = "preemptive" if report.trimmed else None
        self._record(chat, request_id, report, reason, 0, 0, 200, unresolved=None)

    async def _examine(self, body: bytes, request_id: str) -> tuple[Chat | None, str | None]:
        # as on HTTP: the windows overflows taught, large events in a worker thread
        try:
            return await self.proxy.examine(self.headers, self.route, body, request_id)
        except InflatedTooLarge:  # the upgrade said Content-Encoding: frames are not that
            return None, "compressed-body"

    async def _send_chat(
        self, chat: Chat, request_id: str, *, retries: int = 0, overflows: int = 0
    ) -> None:
        proxy = self.proxy

        async def send(body: bytes) -> Attempt:
            uncapped, chat.uncapped = chat.uncapped, False  # the first answer only
            return await self._send(body, uncapped=uncapped)

        final, state = await send_with_retries(
            chat,
            send,
            request_id,
            sleep=proxy._sleep,
            learn=proxy._learn,
            max_body=proxy.config.server.max_body_bytes,
            offload=proxy.offload,
        )
        turn = _turn(final)
        report = state.report
        retries += state.retries
        reason = None
        if report.trimmed:
            reason = "reactive" if retries else "preemptive"
        overflows += state.overflows
        why = unresolved(final, report)
        self._record(chat, request_id, report, reason, retries, overflows, turn.status, why)
        await self._release(turn)

    def _record(
        self,
        chat: Chat,
        request_id: str,
        report: TrimReport,
        reason: str | None,
        retries: int,
        overflows: int,
        status: int,
        unresolved: str | None,
    ) -> None:
        """The request's metrics, event and log lines, as for an HTTP request."""
        outcome = Outcome(
            request_id=request_id,
            upstream=chat.route.name,
            provider=chat.route.upstream.provider,
            wire_format=chat.codec.wire_format,
            model=chat.model,
            model_label=chat.label,
            report=report,
            reason=reason,
            retries=retries,
            overflows=overflows,
            unresolved=unresolved,
            shadow=chat.shadow,
            attribution=dict(self.attribution),
        )
        self._count(chat.label, status)
        try:
            record(outcome, self.proxy.metrics, self.proxy.hub, status=status)
        except Exception as exc:
            log.exception(
                "recording a request's signals failed",
                extra={
                    "event": "record_error",
                    "request_id": request_id,
                    "error_type": type(exc).__name__,
                },
            )

    async def _recover(
        self,
        event: dict[str, Any],
        history: list[bytes],
        own: bytes,
        attempt: Attempt,
        request_id: str,
        started: float,
    ) -> None:
        """The chain's whole history, trimmed, sent without ``previous_response_id``."""
        overflow = attempt.overflow
        assert overflow is not None
        body = {k: v for k, v in event.items() if k != "previous_response_id"}
        body["input"] = orjson.Fragment(b"[" + b",".join([*history, own]) + b"]")
        rebuilt = orjson.dumps(body)
        chat, _ = await self._examine(rebuilt, request_id)
        turn = _turn(attempt)
        if chat is not None:
            chat.uncapped = False  # a retry: the first answer alone is read so
        if chat is None or not may_retry(chat.settings, chat.report, shadow=chat.shadow):
            self._count(chat.label if chat else "other", turn.status)
            await self._release(turn)
            return
        if not chat.report.trimmed:  # the plan kept it all: the overflow says it is too long
            policy = next_attempt(
                chat.policy, chat.report, overflow.real, overflow.maximum, whole=overflow.whole
            )
            max_body = self.proxy.config.server.max_body_bytes
            try:
                chat.report, chat.send_body = await replan(
                    chat, policy, max_body, self.proxy.offload
                )
            except Exception:
                log.exception(
                    "planning a retry failed",
                    extra={"event": "retry_error", "request_id": request_id},
                )
                self._count(chat.label, turn.status)
                await self._release(turn)
                return
        turn.close()  # the failed attempt is never relayed
        self._overhead(started)
        log.info(
            "a WebSocket response chain is resent whole",
            extra={
                "event": "ws_chain_rebuilt",
                "request_id": request_id,
                "items_bytes": len(rebuilt),
            },
        )
        await self._send_chat(chat, request_id, retries=1, overflows=1)

    # --- measures ------------------------------------------------------------------------

    def _count(self, label: str, status: int) -> None:
        r = self.route
        self.proxy.metrics.count_request(r.name, r.upstream.provider, label, status)

    def _overhead(self, started: float) -> None:
        elapsed = max(0.0, time.perf_counter() - started)
        self.proxy.metrics.for_upstream(self.route.name)[0].observe(elapsed)


def _turn(attempt: Attempt) -> _Turn:
    resp = attempt.resp
    assert isinstance(resp, _Turn)
    return resp


def _response_id(frame: bytes) -> str | None:
    try:
        response = orjson.loads(frame).get("response")
    except (orjson.JSONDecodeError, AttributeError):
        return None
    rid = response.get("id") if isinstance(response, dict) else None
    return rid if isinstance(rid, str) else None


def _block(kind: str, frame: bytes) -> bytes | None:
    """An event frame as the SSE event block the stream readers take (its JSON on one
    line); None for a frame that is not JSON."""
    if b"\n" in frame or b"\r" in frame:
        try:
            frame = orjson.dumps(orjson.loads(frame))
        except orjson.JSONDecodeError:
            return None
    return b"event: " + kind.encode() + b"\ndata: " + frame + b"\n\n"


def _status(frame: bytes) -> int:
    """An error event's HTTP-like status (400 when it states none)."""
    try:
        status = orjson.loads(frame).get("status")
    except (orjson.JSONDecodeError, AttributeError):
        return 400
    return status if isinstance(status, int) and 400 <= status < 600 else 400
