"""Faults end to end over loopback, on both upstream clients: a provider that resets or
stalls mid-answer, a storm of 5xx, a refused or unresolvable host, a TLS failure, a client
that leaves at each stage. Every client gets one clean answer (the provider's, or
trimgate's own in the provider's envelope, or a connection cut when the answer had
started), nothing is sent upstream twice, and trimgate serves the next request."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from tests.fakes import FakeProvider, Reply, json_reply, sse_data
from tests.proxy.bodies import openai_chat
from tests.proxy.conftest import MakeStack, Stack

pytestmark = pytest.mark.shell

TLS = Path(__file__).parent.parent / "data" / "tls"
ROLE = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
TEXT = {"choices": [{"index": 0, "delta": {"content": "partial"}}]}


@pytest.fixture(params=["trimgate", "aiohttp"])
def upstream_client(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class Scripted:
    """A provider whose one route runs ``script(request)``; requests are counted."""

    def __init__(self) -> None:
        self.count = 0
        self.script: Any = None
        self.app = web.Application()
        self.app.router.add_route("*", "/{tail:.*}", self._handle)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.count += 1
        await request.read()
        result: web.StreamResponse = await self.script(request)
        return result


@pytest.fixture
async def sites() -> AsyncIterator[list[TestServer]]:
    started: list[TestServer] = []
    yield started
    for site in started:
        await site.close()


async def stack_on(
    make_stack: MakeStack, sites: list[TestServer], provider: Scripted, **server: Any
) -> Stack:
    site = TestServer(provider.app, host="127.0.0.1")
    await site.start_server()
    sites.append(site)
    base = str(site.make_url("")).rstrip("/")
    return await make_stack(
        upstreams={"openai": {"provider": "openai", "base_url": base}}, server=server
    )


async def then_healthy(stack: Stack) -> None:
    resp = await stack.client.get("/healthz")
    assert resp.status == 200


async def stream_then(request: web.Request, frames: list[bytes], end: str) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    for frame in frames:
        await resp.write(frame)
        await asyncio.sleep(0.01)
    if end == "reset":
        assert request.transport is not None
        request.transport.close()
    elif end == "stall":
        await asyncio.sleep(30)
    return resp


async def test_a_reset_before_any_output_is_a_clean_502(
    make_stack: MakeStack, sites: list[TestServer]
) -> None:
    provider = Scripted()
    provider.script = lambda r: stream_then(r, sse_data(ROLE), "reset")
    stack = await stack_on(make_stack, sites, provider)
    resp = await stack.client.post(
        "/v1/chat/completions", json=openai_chat(3, model="gpt-4o", stream=True)
    )
    assert resp.status == 502 and resp.headers["x-trimgate-error"] == "true"
    assert (await resp.json())["error"]["code"] == "upstream_unreachable"
    assert provider.count == 1
    await then_healthy(stack)


async def test_a_reset_after_output_cuts_the_clients_connection(
    make_stack: MakeStack, sites: list[TestServer]
) -> None:
    provider = Scripted()
    provider.script = lambda r: stream_then(r, sse_data(ROLE, TEXT), "reset")
    stack = await stack_on(make_stack, sites, provider)
    resp = await stack.client.post(
        "/v1/chat/completions", json=openai_chat(3, model="gpt-4o", stream=True)
    )
    assert resp.status == 200
    with pytest.raises(aiohttp.ClientPayloadError):
        await resp.read()  # a truncated answer must not look complete
    assert provider.count == 1
    await then_healthy(stack)


async def test_a_stall_before_output_is_a_504_and_after_it_a_cut(
    make_stack: MakeStack, sites: list[TestServer]
) -> None:
    provider = Scripted()
    provider.script = lambda r: stream_then(r, sse_data(ROLE), "stall")
    stack = await stack_on(make_stack, sites, provider, read_timeout=0.3)
    body = openai_chat(3, model="gpt-4o", stream=True)
    resp = await stack.client.post("/v1/chat/completions", json=body)
    assert resp.status == 504 and (await resp.json())["error"]["code"] == "upstream_timeout"
    provider.script = lambda r: stream_then(r, sse_data(ROLE, TEXT), "stall")
    resp = await stack.client.post("/v1/chat/completions", json=body)
    assert resp.status == 200
    with pytest.raises(aiohttp.ClientPayloadError):
        await resp.read()
    assert provider.count == 2
    await then_healthy(stack)


async def test_a_storm_of_5xx_is_relayed_once_each(make_stack: MakeStack) -> None:
    answers = [(500, "server_error"), (502, "bad_gateway"), (503, "overloaded"), (529, "x")]
    fake = FakeProvider(lambda r: json_reply({"error": {"message": "boom"}}, status=503))
    for status, kind in answers * 5:
        fake.then(json_reply({"error": {"message": "boom", "type": kind}}, status=status))
    stack = await make_stack(fake)
    results = await asyncio.gather(
        *(
            stack.client.post("/v1/chat/completions", json=openai_chat(4, model="gpt-4o"))
            for _ in range(20)
        )
    )
    assert sorted(r.status for r in results) == sorted(s for s, _ in answers * 5)
    assert all(r.headers["x-trimgate-retries"] == "0" for r in results)
    assert len(fake.requests) == 20
    await then_healthy(stack)


@pytest.mark.parametrize(
    "base_url", ["http://127.0.0.1:9", "http://trimgate-test.invalid"], ids=["refused", "nxdomain"]
)
async def test_an_unreachable_host_is_a_502(make_stack: MakeStack, base_url: str) -> None:
    stack = await make_stack(
        upstreams={"openai": {"provider": "openai", "base_url": base_url}},
        server={"connect_timeout": 3},
    )
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(2, model="gpt-4o"))
    assert resp.status in (502, 504) and resp.headers["x-trimgate-error"] == "true"
    assert "error" in await resp.json()
    await then_healthy(stack)


async def test_an_untrusted_tls_certificate_is_a_502(make_stack: MakeStack) -> None:
    app = web.Application()
    hits: list[int] = []

    async def ok(request: web.Request) -> web.Response:
        hits.append(1)
        return web.json_response({"ok": True})

    app.router.add_route("*", "/{tail:.*}", ok)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(TLS / "cert.pem", TLS / "key.pem")
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    try:
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        stack = await make_stack(
            upstreams={"openai": {"provider": "openai", "base_url": f"https://127.0.0.1:{port}"}}
        )
        resp = await stack.client.post("/v1/chat/completions", json=openai_chat(2, model="gpt-4o"))
        assert resp.status == 502 and resp.headers["x-trimgate-error"] == "true"
        assert hits == []  # the self-signed certificate is not in the trust store
        await then_healthy(stack)
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("stage", ["waiting", "held", "relaying"])
async def test_a_client_leaving_at_each_stage(make_stack: MakeStack, stage: str) -> None:
    if stage == "waiting":
        reply = Reply(hang=True)
    elif stage == "held":  # a role opener only: trimgate holds it, waiting for output
        reply = Reply(events=[*sse_data(ROLE), b": x\n\n" * 1], event_delay=5)
    else:
        reply = Reply(events=[*sse_data(ROLE, TEXT), *sse_data(TEXT)], event_delay=5)
    fake = FakeProvider().then(reply)
    stack = await make_stack(fake)
    session = stack.client.session
    url = f"{stack.base}/v1/chat/completions"
    body = openai_chat(3, model="gpt-4o", stream=True)
    if stage == "relaying":
        resp = await session.post(url, json=body)
        assert b"partial" in await resp.content.readany()
        resp.close()
    else:
        task = asyncio.ensure_future(session.post(url, json=body))
        for _ in range(200):
            if fake.requests:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    for _ in range(200):  # the upstream request is cancelled, not left running
        if fake.cancelled:
            break
        await asyncio.sleep(0.01)
    assert fake.cancelled == 1 and len(fake.requests) == 1
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(1, model="gpt-4o"))
    assert resp.status == 200 and len(fake.requests) == 2


@pytest.mark.parametrize("http_server", ["trimgate", "aiohttp"])
@pytest.mark.parametrize("upstream_client", ["trimgate", "aiohttp"])
@pytest.mark.parametrize("status", [b"000", b"042", b"099", b"600", b"999"])
async def test_a_status_outside_100_to_599_is_a_502(make_stack: MakeStack, status: bytes) -> None:
    # RFC 9110: values outside 100..599 are invalid and are read as a server error
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        await reader.readexactly(length)
        writer.write(b"HTTP/1.1 " + status + b" Odd\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        port = server.sockets[0].getsockname()[1]
        stack = await make_stack(
            upstreams={"openai": {"provider": "openai", "base_url": f"http://127.0.0.1:{port}"}}
        )
        for path in ("/v1/chat/completions", "/v1/models"):
            resp = await stack.client.post(path, json=openai_chat(2, model="gpt-4o"))
            assert resp.status == 502 and resp.headers["x-trimgate-error"] == "true"
            assert "invalid status" in (await resp.json())["error"]["message"]
        await then_healthy(stack)
    finally:
        server.close()
        await server.wait_closed()
