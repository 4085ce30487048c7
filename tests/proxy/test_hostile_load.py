"""Bounds under hostile load, end to end over loopback: a gzip bomb, a body that inflates
past ``server.max_body_bytes``, the process-wide cap on request-body bytes held, and
large bodies examined off the event loop."""

from __future__ import annotations

import asyncio
import gzip
import os
import threading
from typing import Any

import orjson
import pytest

from tests.fakes import FakeProvider, Reply, json_reply, openai_ok, openai_overflow
from tests.proxy.bodies import anthropic_messages, openai_chat
from tests.proxy.conftest import MakeStack
from trimgate.proxy.app import PROXY
from trimgate.proxy.examine import Chat, Examiner


@pytest.fixture(params=["trimgate", "aiohttp"])
def http_server(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def gz(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=9)


@pytest.mark.parametrize(
    ("path", "body", "envelope"),
    [
        ("/v1/chat/completions", openai_chat(1), "error"),
        ("/v1/messages", anthropic_messages(1), "type"),
    ],
)
async def test_a_gzip_bomb_gets_413_in_the_providers_envelope(
    make_stack: MakeStack, path: str, body: dict[str, Any], envelope: str
) -> None:
    raw = orjson.dumps({**body, "padding": " " * (8 * 1024 * 1024)})
    bomb = gz(raw)
    assert len(raw) / len(bomb) > 200  # past the default max_inflation_ratio
    stack = await make_stack()
    resp = await stack.client.post(
        path, data=bomb, headers={"Content-Encoding": "gzip", "Content-Type": "application/json"}
    )
    assert resp.status == 413
    answer = await resp.json()
    assert envelope in answer and "inflated" in str(answer)
    assert resp.headers["x-trimgate-error"] == "true"
    assert stack.fake.requests == []


async def test_a_body_inflating_past_max_body_bytes_gets_413(make_stack: MakeStack) -> None:
    # random text compresses about 4:1 (well within the ratio) but inflates past the limit
    text = os.urandom(150_000).hex()
    raw = orjson.dumps({**openai_chat(1), "padding": text})
    stack = await make_stack(server={"max_body_bytes": 250_000})
    packed = gz(raw)
    assert len(packed) < 250_000 < len(raw)
    resp = await stack.client.post(
        "/v1/chat/completions",
        data=packed,
        headers={"Content-Encoding": "gzip", "Content-Type": "application/json"},
    )
    assert resp.status == 413 and stack.fake.requests == []


async def test_a_compressed_body_within_the_bounds_is_examined(make_stack: MakeStack) -> None:
    raw = orjson.dumps(openai_chat(8))
    stack = await make_stack(server={"max_inflation_ratio": 50})
    resp = await stack.client.post(
        "/v1/chat/completions",
        data=gz(raw),
        headers={"Content-Encoding": "gzip", "Content-Type": "application/json"},
    )
    assert resp.status == 200 and resp.headers["x-trimgate-trimmed"] == "true"
    assert len(stack.fake.requests) == 1


async def test_a_truncated_gzip_body_is_forwarded_untouched(make_stack: MakeStack) -> None:
    packed = gz(orjson.dumps(openai_chat(8)))[:-20]
    stack = await make_stack()
    resp = await stack.client.post(
        "/v1/chat/completions",
        data=packed,
        headers={"Content-Encoding": "gzip", "Content-Type": "application/json"},
    )
    assert resp.status == 200 and resp.headers["x-trimgate-skipped"] == "compressed-body"
    assert [r.body for r in stack.fake.requests] == [packed]


async def test_held_request_bodies_are_capped_with_a_503(make_stack: MakeStack) -> None:
    fake = FakeProvider(lambda r: json_reply(openai_ok(10)))
    fake.then(Reply(data=openai_ok(10), delay=0.5))
    stack = await make_stack(fake, server={"max_buffered_bytes": 300_000})
    body = openai_chat(1, size=200_000, model="gpt-4o")
    first = asyncio.ensure_future(stack.client.post("/v1/chat/completions", json=body))
    for _ in range(200):
        if fake.requests:
            break
        await asyncio.sleep(0.01)
    assert len(fake.requests) == 1  # the first is held, waiting on the provider
    resp = await stack.client.post("/v1/chat/completions", json=body)
    assert resp.status == 503 and resp.headers["Retry-After"] == "1"
    assert (await resp.json())["error"]["code"] == "trimgate_busy"
    small = await stack.client.post("/v1/chat/completions", json=openai_chat(1, size=10))
    assert small.status == 200  # a small body still fits beside the first
    assert (await first).status == 200
    again = await stack.client.post("/v1/chat/completions", json=body)
    assert again.status == 200  # released once the first was answered
    labels = {"upstream": "openai", "provider": "openai", "model": "other", "status": "503"}
    assert stack.metric("trimgate_requests_total", **labels) == 1


async def test_a_large_body_is_examined_off_the_event_loop(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[str] = []
    examine = Examiner.examine

    def recording(self: Examiner, *args: Any) -> Any:
        threads.append(threading.current_thread().name)
        return examine(self, *args)

    monkeypatch.setattr(Examiner, "examine", recording)
    stack = await make_stack()
    await stack.client.post("/v1/chat/completions", json=openai_chat(2, size=10))
    await stack.client.post("/v1/chat/completions", json=openai_chat(10, size=20_000))
    assert threads[0] == threading.current_thread().name  # a small body: inline
    assert threads[1].startswith("trimgate-examine")


async def test_a_large_body_is_replanned_off_the_event_loop(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[str] = []
    replan = Chat.replan

    def recording(self: Chat, *args: Any) -> Any:
        threads.append(threading.current_thread().name)
        return replan(self, *args)

    monkeypatch.setattr(Chat, "replan", recording)
    calls = iter(range(100))  # the first attempt of each request overflows

    def answer(_: Any) -> Reply:
        return (
            openai_overflow(200_000, 100_000) if next(calls) % 2 == 0 else json_reply(openai_ok())
        )

    fake = FakeProvider(answer)
    stack = await make_stack(fake)
    small = await stack.client.post("/v1/chat/completions", json=openai_chat(6, size=10))
    assert small.status == 200 and small.headers["x-trimgate-retries"] == "1"
    large = await stack.client.post(
        "/v1/chat/completions", json=openai_chat(60, size=6_000, model="gpt-4o")
    )
    assert large.status == 200 and large.headers["x-trimgate-retries"] == "1"
    assert len(fake.requests) == 4
    assert threads[0] == threading.current_thread().name  # a small body: inline
    assert threads[1].startswith("trimgate-examine")


@pytest.mark.parametrize("http_server", ["trimgate", "aiohttp"])
async def test_bodies_are_counted_as_they_arrive(make_stack: MakeStack) -> None:
    """A body counts against server.max_buffered_bytes by the bytes that arrived, not the
    length its head declares: clients that declare large bodies and send them slowly hold
    nothing they did not send, and a body that does pass the budget gets 503 midway."""
    fake = FakeProvider(lambda r: json_reply(openai_ok(10)))
    fake.then(Reply(data=openai_ok(10), delay=0.5))
    stack = await make_stack(fake, server={"max_buffered_bytes": 300_000})
    body = orjson.dumps(openai_chat(1, size=200_000, model="gpt-4o"))
    head = (
        "POST /v1/chat/completions HTTP/1.1\r\nHost: proxy\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    port = stack.server.port
    assert port is not None
    slow = [await asyncio.open_connection("127.0.0.1", port) for _ in range(4)]
    r1, w1 = await asyncio.open_connection("127.0.0.1", port)
    r2, w2 = await asyncio.open_connection("127.0.0.1", port)
    try:
        for _, w in slow:  # 4 x 200 KB declared, 1,000 bytes each sent
            w.write(head + body[:1000])
            await w.drain()
        await asyncio.sleep(0.1)
        w1.write(head + body)  # a whole body: held while the provider works
        await w1.drain()
        for _ in range(200):
            if stack.fake.requests:
                break
            await asyncio.sleep(0.01)
        assert len(stack.fake.requests) == 1
        w2.write(head + body)  # past the budget once its bytes arrive
        await w2.drain()
        # answered (the rest of the body is read and dropped), not reset
        answer = await asyncio.wait_for(r2.readuntil(b"trimgate_busy"), 5)
        assert answer.startswith(b"HTTP/1.1 503 ") and b"\r\nRetry-After: 1\r\n" in answer
        first = await asyncio.wait_for(r1.readuntil(b"\r\n\r\n"), 5)
        assert first.startswith(b"HTTP/1.1 200 ")
    finally:
        for _, w in [*slow, (r1, w1), (r2, w2)]:
            w.close()
    assert len(stack.fake.requests) == 1
    proxy = stack.app[PROXY]
    for _ in range(100):
        if proxy.bodies.held == 0:
            break
        await asyncio.sleep(0.01)
    assert proxy.bodies.held == 0  # every byte counted was given back
