"""The history_trimmed event stream (docs/reference.md, "Events"): payload, history, SSE, WebSocket.

SSE is read with a real SSE client (httpx + httpx-sse) and, for the wire format, as
raw bytes; WebSocket with aiohttp's client. Slow subscribers lose events (counted),
never slow publishing or the proxy.
"""

from __future__ import annotations

import asyncio
import re
import socket
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import httpx
import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer
from httpx_sse import ServerSentEvent, aconnect_sse
from prometheus_client import CollectorRegistry

from tests.fakes import FakeProvider, json_reply, openai_ok
from tests.proxy.bodies import openai_chat
from tests.proxy.conftest import MakeStack, Stack, config_for, no_sleep
from trimgate.proxy.app import HUB, Shared, create_app
from trimgate.proxy.events import EventHub
from trimgate.proxy.metrics import Metrics

TIMEOUT = 5.0  # bound on every wait; the happy path takes milliseconds

BASE_KEYS = {
    "type",
    "dropped_messages",
    "dropped_turns",
    "kept_turns",
    "tokens_before",
    "tokens_after",
    "budget",
    "reason",
    "provider",
    "upstream",
    "model",
    "request_id",
    "timestamp",
    "shadow",
}
ATTRIBUTION_HEADERS = {
    "x-trimgate-agent": "coder",
    "x-trimgate-channel": "slack",
    "x-trimgate-turn-id": "turn-42",
    "x-trimgate-session": "sess-1",
}
RFC3339_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")


def fake_without_usage() -> FakeProvider:
    # no usage in the answers: calibration keeps the estimate, so every request trims alike
    return FakeProvider(lambda r: json_reply(openai_ok()))


async def trim(stack: Stack, headers: dict[str, str] | None = None) -> str:
    """One chat request that gets trimmed; returns its request id."""
    resp = await stack.client.post(
        "/v1/chat/completions", json=openai_chat(8, model="small-1"), headers=headers or {}
    )
    assert resp.status == 200
    assert resp.headers["x-trimgate-trimmed"] == "true"
    await resp.read()
    return resp.headers["x-trimgate-request-id"]


async def eventually(check: Callable[[], bool]) -> None:
    """Wait (at most TIMEOUT) until ``check()`` holds: a server notices a disconnect soon."""
    for _ in range(int(TIMEOUT / 0.01)):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"still false after {TIMEOUT} s")


def subscribers(stack: Stack) -> float:
    return stack.metric("trimgate_event_subscribers")


def sse_client(stack: Stack) -> httpx.AsyncClient:
    # trust_env=False: loopback only, whatever proxy variables the machine has
    return httpx.AsyncClient(base_url=stack.base, trust_env=False, timeout=TIMEOUT)


async def next_message(events: AsyncIterator[ServerSentEvent]) -> ServerSentEvent:
    """The next SSE message with data (the stream opens with a bare ``retry:`` field)."""

    async def read() -> ServerSentEvent:
        async for sse in events:
            if sse.data:
                return sse
        raise AssertionError("the event stream ended")

    return await asyncio.wait_for(read(), TIMEOUT)


# --- the event payload ------------------------------------------------------------


async def test_trim_publishes_one_event_with_every_field(make_stack: MakeStack) -> None:
    stack = await make_stack(fake_without_usage())
    resp = await stack.client.post(
        "/v1/chat/completions",
        json=openai_chat(8, model="small-1"),
        headers=ATTRIBUTION_HEADERS,
    )
    assert resp.status == 200
    h = resp.headers
    assert h["x-trimgate-trimmed"] == "true"
    (event,) = stack.events()
    assert set(event) == BASE_KEYS | {"agent_alias", "channel", "turn_id", "session_id"}
    assert event["type"] == "history_trimmed"
    assert event["reason"] == "preemptive" == h["x-trimgate-reason"]
    assert event["dropped_messages"] == int(h["x-trimgate-dropped-messages"]) > 0
    assert event["dropped_turns"] == int(h["x-trimgate-dropped-turns"]) > 0
    assert event["kept_turns"] == int(h["x-trimgate-kept-turns"]) > 0
    assert event["tokens_before"] == int(h["x-trimgate-tokens-before"])
    assert event["tokens_after"] == int(h["x-trimgate-tokens-after"])
    assert event["budget"] == int(h["x-trimgate-budget"]) == 1000
    assert event["tokens_after"] <= event["budget"] < event["tokens_before"]
    assert event["provider"] == "openai" and event["upstream"] == "openai"
    assert event["model"] == "small-1"  # the request's model, not the catalog entry "small-*"
    assert event["request_id"] == h["x-trimgate-request-id"]
    assert event["shadow"] is False
    assert event["agent_alias"] == "coder"
    assert event["channel"] == "slack"
    assert event["turn_id"] == "turn-42"
    assert event["session_id"] == "sess-1"
    stamp = event["timestamp"]
    assert RFC3339_UTC.match(stamp), stamp
    parsed = datetime.fromisoformat(stamp)
    assert parsed.utcoffset() == timedelta(0)
    assert abs(datetime.now(UTC) - parsed) < timedelta(minutes=1)
    # and every field is plain JSON
    assert orjson.loads(orjson.dumps(event)) == event


async def test_event_without_attribution_has_no_attribution_keys(make_stack: MakeStack) -> None:
    stack = await make_stack(fake_without_usage())
    request_id = await trim(stack)
    (event,) = stack.events()
    assert set(event) == BASE_KEYS
    assert event["request_id"] == request_id


async def test_model_is_the_requests_model(make_stack: MakeStack) -> None:
    stack = await make_stack(fake_without_usage())
    resp = await stack.client.post(
        "/v1/chat/completions", json=openai_chat(8, model="small-2024-preview")
    )
    assert resp.headers["x-trimgate-trimmed"] == "true"
    (event,) = stack.events()
    assert event["model"] == "small-2024-preview"


async def test_untrimmed_request_publishes_no_event(make_stack: MakeStack) -> None:
    stack = await make_stack(fake_without_usage())
    resp = await stack.client.post(
        "/v1/chat/completions",
        json=openai_chat(2, size=10, model="small-1"),
        headers=ATTRIBUTION_HEADERS,
    )
    assert resp.status == 200 and resp.headers["x-trimgate-trimmed"] == "false"
    assert stack.events() == []
    history = await (await stack.client.get("/api/events/history")).json()
    assert history == {"events": []}


async def test_history_endpoint_lists_buffered_events_in_order(make_stack: MakeStack) -> None:
    stack = await make_stack(fake_without_usage())
    first = await trim(stack, {"x-trimgate-session": "a"})
    second = await trim(stack)
    resp = await stack.client.get("/api/events/history")
    assert resp.status == 200
    assert resp.content_type == "application/json"
    body = await resp.json()
    assert list(body) == ["events"]
    assert [e["request_id"] for e in body["events"]] == [first, second]
    assert body["events"][0]["session_id"] == "a"
    assert body["events"] == stack.events()


# --- SSE ------------------------------------------------------------------------------


async def test_sse_delivers_live_events_as_data_only_frames(make_stack: MakeStack) -> None:
    stack = await make_stack(fake_without_usage())
    async with sse_client(stack) as http, aconnect_sse(http, "GET", "/api/events") as source:
        assert source.response.status_code == 200
        assert source.response.headers["content-type"].startswith("text/event-stream")
        assert source.response.headers["cache-control"] == "no-cache"
        # the server subscribes before it answers: once the headers are here, nothing is missed
        assert subscribers(stack) == 1
        events = source.aiter_sse()
        request_id = await trim(stack, ATTRIBUTION_HEADERS)
        sse = await next_message(events)
        assert sse.event == "message"  # no `event:` line
        assert sse.id == "1"
        assert sse.json() == stack.events()[0]
        assert sse.json()["request_id"] == request_id
        await trim(stack)
        sse = await next_message(events)
        assert sse.id == "2" and sse.json() == stack.events()[1]
    await eventually(lambda: subscribers(stack) == 0)


async def test_sse_resumes_after_last_event_id_without_duplicates(make_stack: MakeStack) -> None:
    stack = await make_stack(fake_without_usage())
    async with sse_client(stack) as http:
        async with aconnect_sse(http, "GET", "/api/events") as source:
            events = source.aiter_sse()
            await trim(stack)
            last_seen = (await next_message(events)).id
        assert last_seen == "1"
        # missed while disconnected
        missed = [await trim(stack), await trim(stack), await trim(stack)]
        async with aconnect_sse(
            http, "GET", "/api/events", headers={"Last-Event-ID": last_seen}
        ) as source:
            events = source.aiter_sse()
            replayed = [await next_message(events) for _ in missed]
            assert [s.id for s in replayed] == ["2", "3", "4"]
            assert [s.json()["request_id"] for s in replayed] == missed
            live = await trim(stack)  # then live, once
            sse = await next_message(events)
            assert sse.id == "5" and sse.json()["request_id"] == live
            # nothing else pending: the next message is the next event, not a duplicate
            stack.app[HUB].publish({"type": "marker"})
            assert (await next_message(events)).id == "6"


async def test_sse_resume_via_query_parameter(make_stack: MakeStack) -> None:
    stack = await make_stack(fake_without_usage())
    for _ in range(3):
        await trim(stack)
    async with (
        sse_client(stack) as http,
        aconnect_sse(http, "GET", "/api/events", params={"last_event_id": "2"}) as source,
    ):
        sse = await next_message(source.aiter_sse())
        assert sse.id == "3" and sse.json() == stack.events()[2]


async def test_sse_event_published_during_replay_is_sent_once(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An event published after subscribing but before the replay is in both the buffer and
    the subscriber's queue: the stream sends it once."""
    stack = await make_stack(fake_without_usage())
    hub = stack.app[HUB]
    await trim(stack)
    real_since = hub.since

    def since_racing(last_id: int) -> Any:
        hub.publish({"type": "raced"})  # lands in the queue and the buffer
        return real_since(last_id)

    monkeypatch.setattr(hub, "since", since_racing)
    async with (
        sse_client(stack) as http,
        aconnect_sse(http, "GET", "/api/events", headers={"Last-Event-ID": "0"}) as source,
    ):
        events = source.aiter_sse()
        got = [await next_message(events) for _ in range(2)]
        assert [s.id for s in got] == ["1", "2"]
        assert got[1].json() == {"type": "raced"}
        monkeypatch.undo()
        hub.publish({"type": "after"})
        sse = await next_message(events)
        assert sse.id == "3" and sse.json() == {"type": "after"}


async def test_sse_ids_are_the_ids_events_were_delivered_with(make_stack: MakeStack) -> None:
    """With several workers the supervisor numbers events (EventHub.deliver): SSE ids and
    Last-Event-ID resumption use those numbers."""
    stack = await make_stack(fake_without_usage())
    hub = stack.app[HUB]
    hub.deliver(41, {"type": "history_trimmed", "n": 41})
    hub.deliver(42, {"type": "history_trimmed", "n": 42})
    async with (
        sse_client(stack) as http,
        aconnect_sse(http, "GET", "/api/events", headers={"Last-Event-ID": "41"}) as source,
    ):
        events = source.aiter_sse()
        sse = await next_message(events)
        assert sse.id == "42" and sse.json()["n"] == 42
        hub.deliver(43, {"type": "history_trimmed", "n": 43})
        sse = await next_message(events)
        assert sse.id == "43" and sse.json()["n"] == 43


async def test_sse_wire_format_and_keepalive_comments(make_stack: MakeStack) -> None:
    stack = await make_stack(fake_without_usage())
    stack.app[HUB].keepalive = 0.05
    resp = await stack.client.get("/api/events")
    assert resp.status == 200
    raw = b""

    async def read_until(marker: bytes, count: int = 1) -> None:
        nonlocal raw
        while raw.count(marker) < count:
            chunk = await resp.content.readany()
            assert chunk, "the event stream ended"
            raw += chunk

    # idle: comment lines, a blank line after each
    await asyncio.wait_for(read_until(b": keep-alive\n\n", 2), TIMEOUT)
    assert raw.startswith(b"retry: 3000\n\n")
    await trim(stack)
    await asyncio.wait_for(read_until(b"data: "), TIMEOUT)
    await asyncio.wait_for(read_until(b"}\n\n"), TIMEOUT)
    (event,) = stack.events()
    frame = b"id: 1\ndata: " + orjson.dumps(event) + b"\n\n"
    assert frame in raw
    assert b"event:" not in raw
    # every line is a field the SSE spec knows, or a comment
    for line in raw.split(b"\n"):
        assert line == b"" or line.startswith((b"id: ", b"data: ", b"retry: ", b": ")), line
    resp.close()
    await eventually(lambda: subscribers(stack) == 0)


# --- WebSocket ------------------------------------------------------------------------


async def test_websocket_sends_the_event_json(make_stack: MakeStack) -> None:
    stack = await make_stack(fake_without_usage())
    async with stack.client.ws_connect("/api/ws") as ws:
        assert subscribers(stack) == 1  # subscribed during the handshake
        await trim(stack, ATTRIBUTION_HEADERS)
        msg = await ws.receive(timeout=TIMEOUT)
        assert msg.type is aiohttp.WSMsgType.TEXT
        assert orjson.loads(msg.data) == stack.events()[0]
        await trim(stack)
        assert await ws.receive_json(timeout=TIMEOUT) == stack.events()[1]
    await eventually(lambda: subscribers(stack) == 0)


async def test_websocket_acp_notifications(make_stack: MakeStack) -> None:
    stack = await make_stack(fake_without_usage())
    async with stack.client.ws_connect("/api/ws?format=acp") as ws:
        await trim(stack, {"x-trimgate-session": "sess-7", "x-trimgate-agent": "coder"})
        note = await ws.receive_json(timeout=TIMEOUT)
    (event,) = stack.events()
    assert note == {
        "jsonrpc": "2.0",
        "method": "_trimgate/history_trimmed",
        "params": {
            "sessionId": "sess-7",
            "droppedMessages": event["dropped_messages"],
            "keptTurns": event["kept_turns"],
            "reason": "preemptive",
        },
    }
    assert "id" not in note  # a notification, not a request
    assert event["dropped_messages"] > 0 and event["kept_turns"] > 0
    await eventually(lambda: subscribers(stack) == 0)


async def test_websocket_plain_and_acp_clients_side_by_side(make_stack: MakeStack) -> None:
    stack = await make_stack(fake_without_usage())
    async with (
        stack.client.ws_connect("/api/ws") as plain,
        stack.client.ws_connect("/api/ws?format=acp") as acp,
    ):
        assert subscribers(stack) == 2
        await trim(stack, {"x-trimgate-session": "s"})
        assert (await plain.receive_json(timeout=TIMEOUT))["type"] == "history_trimmed"
        assert (await acp.receive_json(timeout=TIMEOUT))["params"]["sessionId"] == "s"
    await eventually(lambda: subscribers(stack) == 0)


# --- slow subscribers -------------------------------------------------------------------


async def test_slow_subscriber_loses_counted_events_and_never_blocks() -> None:
    registry = CollectorRegistry()
    hub = EventHub(Metrics(registry), queue_size=4)

    def sample(name: str) -> float:
        return registry.get_sample_value(name) or 0.0

    total = 50
    with hub.subscribe() as slow, hub.subscribe() as fast:
        assert sample("trimgate_event_subscribers") == 2
        received: list[int] = []

        async def read_fast() -> None:
            while len(received) < total:
                event = await fast.queue.get()
                assert event is not None
                received.append(event.id)

        reader = asyncio.create_task(read_fast())
        slowest = 0.0
        for n in range(total):
            started = time.perf_counter()
            hub.publish({"type": "history_trimmed", "n": n})
            slowest = max(slowest, time.perf_counter() - started)
            await asyncio.sleep(0)  # the fast reader keeps up
        await asyncio.wait_for(reader, TIMEOUT)
        assert slowest < 0.05
        assert received == list(range(1, total + 1))
        assert slow.queue.qsize() == 4  # the first four, waiting
        assert slow.dropped == total - 4
        assert fast.dropped == 0
        assert sample("trimgate_events_dropped_total") == total - 4
    assert sample("trimgate_event_subscribers") == 0


async def test_publish_without_any_reader_is_bounded_in_time_and_memory() -> None:
    registry = CollectorRegistry()
    hub = EventHub(Metrics(registry), queue_size=8, buffer_size=16)
    with hub.subscribe() as sub:
        started = time.perf_counter()
        for n in range(5000):
            hub.publish({"n": n})
        assert time.perf_counter() - started < 0.5
        assert sub.queue.qsize() == 8
    assert registry.get_sample_value("trimgate_events_dropped_total") == 5000 - 8
    assert len(hub.history()) == 16


async def test_ring_buffer_is_bounded() -> None:
    hub = EventHub(Metrics(CollectorRegistry()), buffer_size=5)
    for n in range(12):
        hub.publish({"n": n})
    assert hub.history() == [{"n": n} for n in range(7, 12)]
    assert [e.id for e in hub.since(0)] == [8, 9, 10, 11, 12]  # older ones are gone
    assert [e.id for e in hub.since(10)] == [11, 12]
    assert hub.since(12) == []


async def test_history_endpoint_keeps_the_newest_thousand(make_stack: MakeStack) -> None:
    stack = await make_stack(fake_without_usage())
    hub = stack.app[HUB]
    for n in range(1005):
        hub.publish({"n": n})
    body = await (await stack.client.get("/api/events/history")).json()
    assert [e["n"] for e in body["events"]] == list(range(5, 1005))


def tiny_receive_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # fills up fast
    sock.setblocking(False)
    return sock


async def test_slow_sse_client_never_slows_the_proxy_or_other_subscribers() -> None:
    """Over HTTP: one SSE client that stops reading, one that keeps up. The stalled
    stream's queue fills and overflows (counted); publishing and chat requests go on
    at full speed; the fast client gets every event."""
    fake = fake_without_usage()
    fake_server = TestServer(fake.app, host="127.0.0.1")
    await fake_server.start_server()
    config = config_for(str(fake_server.make_url("")).rstrip("/"))
    registry = CollectorRegistry()
    shared = Shared(config, registry, Metrics(registry))
    shared.hub = EventHub(shared.metrics, queue_size=4)
    server = TestServer(create_app(config, shared=shared, sleep=no_sleep), host="127.0.0.1")
    client: TestClient[Any, Any] = TestClient(server)
    await client.start_server()
    loop = asyncio.get_running_loop()
    slow = tiny_receive_socket()

    def sample(name: str) -> float:
        return registry.get_sample_value(name) or 0.0

    try:
        # the slow client: headers read, then never another byte
        assert server.port is not None
        await asyncio.wait_for(loop.sock_connect(slow, ("127.0.0.1", server.port)), TIMEOUT)
        await loop.sock_sendall(slow, b"GET /api/events HTTP/1.1\r\nHost: trimgate\r\n\r\n")
        head = b""
        while b"\r\n\r\n" not in head:
            head += await asyncio.wait_for(loop.sock_recv(slow, 1), TIMEOUT)
        assert head.startswith(b"HTTP/1.1 200")
        assert sample("trimgate_event_subscribers") == 1

        base = str(server.make_url("")).rstrip("/")
        got: asyncio.Queue[str] = asyncio.Queue()
        async with (
            httpx.AsyncClient(base_url=base, trust_env=False, timeout=TIMEOUT) as http,
            aconnect_sse(http, "GET", "/api/events") as source,
        ):
            assert sample("trimgate_event_subscribers") == 2

            async def read_fast() -> None:
                async for sse in source.aiter_sse():
                    if sse.data:
                        await got.put(sse.id)

            reader = asyncio.create_task(read_fast())
            pad = "x" * 32_768  # big events fill the stalled connection's buffers quickly
            published = 0
            slowest = 0.0
            # lock-step with the fast client until the stalled stream has lost a few
            while sample("trimgate_events_dropped_total") < 10:
                assert published < 5000, "the stalled stream never lost an event"
                started = time.perf_counter()
                shared.hub.publish({"type": "history_trimmed", "pad": pad})
                slowest = max(slowest, time.perf_counter() - started)
                published += 1
                assert await asyncio.wait_for(got.get(), TIMEOUT) == str(published)
            # (publishing never waits on a subscriber: a send that did would wait for as long
            # as the stalled client reads nothing, so a bound far above any scheduling delay
            # of a busy machine still tells; 50 ms failed once beside a benchmark)
            assert slowest < 1.0
            # a chat request while the stream is stalled: answered promptly, event delivered
            started = time.perf_counter()
            resp = await asyncio.wait_for(
                client.post("/v1/chat/completions", json=openai_chat(8, model="small-1")),
                TIMEOUT,
            )
            assert resp.status == 200 and resp.headers["x-trimgate-trimmed"] == "true"
            assert time.perf_counter() - started < 2.0
            assert await asyncio.wait_for(got.get(), TIMEOUT) == str(published + 1)
            assert sample("trimgate_events_dropped_total") >= 11  # the stalled one lost it too
            reader.cancel()
            with pytest.raises(asyncio.CancelledError):
                await reader
        await eventually(lambda: sample("trimgate_event_subscribers") == 1)
        slow.close()
        await eventually(lambda: sample("trimgate_event_subscribers") == 0)
    finally:
        slow.close()
        await client.close()
        await fake_server.close()
