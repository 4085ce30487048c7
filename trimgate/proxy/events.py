"""EventHub: the history_trimmed event stream (docs/reference.md, "Events").

A bounded ring buffer keeps recent events for ``/api/events/history`` and for
SSE resumption with ``Last-Event-ID``. Each subscriber has a bounded queue;
publishing never waits: when a subscriber's queue is full the event is
dropped for that subscriber and counted, so a slow reader never slows a
request. ``close`` ends every open stream, so that a server shutdown does not
wait for connected dashboards.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import WSCloseCode, WSMsgType, web

from trimgate.proxy.metrics import Metrics
from trimgate.sse import encode_comment, encode_event, encode_retry

BUFFER_SIZE = 1000
QUEUE_SIZE = 256
KEEPALIVE_SECONDS = 15.0


@dataclass(frozen=True, slots=True)
class Event:
    id: int
    payload: dict[str, Any]
    data: bytes  # the payload as JSON, serialised once for every subscriber


class Subscriber:
    __slots__ = ("dropped", "queue")

    def __init__(self, size: int) -> None:
        # None: the end of the stream (EventHub.close)
        self.queue: asyncio.Queue[Event | None] = asyncio.Queue(maxsize=size)
        self.dropped = 0


class EventHub:
    def __init__(
        self,
        metrics: Metrics,
        *,
        buffer_size: int = BUFFER_SIZE,
        queue_size: int = QUEUE_SIZE,
        keepalive: float = KEEPALIVE_SECONDS,
        start_id: int = 1,
    ) -> None:
        self._metrics = metrics
        self._buffer: deque[Event] = deque(maxlen=buffer_size)
        self._subscribers: set[Subscriber] = set()
        self._ids = itertools.count(start_id)
        self._queue_size = queue_size
        self.keepalive = keepalive
        # With several workers, events go to the supervisor, which numbers them
        # and sends them back to every worker's ``deliver``. Returns False when
        # the supervisor cannot take it: the event is then delivered here.
        self.relay: Callable[[dict[str, Any]], bool] | None = None

    def publish(self, payload: dict[str, Any]) -> None:
        if self.relay is not None and self.relay(payload):
            return
        self.deliver(next(self._ids), payload)

    def deliver(self, event_id: int, payload: dict[str, Any]) -> None:
        event = Event(event_id, payload, orjson.dumps(payload))
        self._buffer.append(event)
        for sub in self._subscribers:
            try:
                sub.queue.put_nowait(event)
            except asyncio.QueueFull:
                sub.dropped += 1
                self._metrics.events_dropped.inc()

    def close(self) -> None:
        """End every subscriber's stream (the server is shutting down)."""
        for sub in self._subscribers:
            if sub.queue.full():
                sub.queue.get_nowait()  # make room for the end mark
            sub.queue.put_nowait(None)

    def history(self) -> list[dict[str, Any]]:
        return [e.payload for e in self._buffer]

    def since(self, last_id: int) -> list[Event]:
        return [e for e in self._buffer if e.id > last_id]

    @contextlib.contextmanager
    def subscribe(self) -> Iterator[Subscriber]:
        sub = Subscriber(self._queue_size)
        self._subscribers.add(sub)
        self._metrics.event_subscribers.inc()
        try:
            yield sub
        finally:
            self._subscribers.discard(sub)
            self._metrics.event_subscribers.dec()

    # --- endpoints -------------------------------------------------------

    async def handle_history(self, request: web.Request) -> web.Response:
        body = orjson.dumps({"events": self.history()})
        return web.Response(body=body, content_type="application/json")

    async def handle_sse(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
                "X-Accel-Buffering": "no",
            }
        )
        last = _last_event_id(request)
        with self.subscribe() as sub:
            await resp.prepare(request)
            await resp.write(encode_retry(3000))
            seen = 0
            if last is not None:
                for event in self.since(last):
                    await resp.write(encode_event(event.data, id=event.id))
                    seen = event.id
            while True:
                try:
                    live = await asyncio.wait_for(sub.queue.get(), self.keepalive)
                except TimeoutError:
                    await resp.write(encode_comment("keep-alive"))
                    continue
                if live is None:
                    return resp  # the server is shutting down
                if live.id <= seen:
                    continue  # already replayed from the buffer
                await resp.write(encode_event(live.data, id=live.id))

    async def handle_ws(self, request: web.Request) -> web.WebSocketResponse:
        acp = request.query.get("format") == "acp"
        ws = web.WebSocketResponse(heartbeat=self.keepalive)
        with self.subscribe() as sub:  # before the handshake, as for SSE: no event missed
            await ws.prepare(request)
            reader = asyncio.ensure_future(_drain(ws))
            try:
                while not ws.closed:
                    getter = asyncio.ensure_future(sub.queue.get())
                    done, _ = await asyncio.wait(
                        {getter, reader}, return_when=asyncio.FIRST_COMPLETED
                    )
                    if getter not in done:
                        getter.cancel()
                        break
                    event = getter.result()
                    if event is None:  # the server is shutting down
                        await ws.close(code=WSCloseCode.GOING_AWAY)
                        break
                    text = orjson.dumps(_acp(event.payload)) if acp else event.data
                    await ws.send_str(text.decode())
            finally:
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reader
        return ws


async def _drain(ws: web.WebSocketResponse) -> None:
    async for msg in ws:
        if msg.type in (WSMsgType.CLOSE, WSMsgType.ERROR):
            break


def _last_event_id(request: web.Request) -> int | None:
    raw = request.headers.get("Last-Event-ID") or request.query.get("last_event_id")
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        return None


def _acp(payload: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "_trimgate/history_trimmed",
        "params": {
            "sessionId": payload.get("session_id"),
            "droppedMessages": payload["dropped_messages"],
            "keptTurns": payload["kept_turns"],
            "reason": payload["reason"],
        },
    }
