"""trimgate's HTTP/1.1 front: what it serves itself, what it hands to aiohttp, and how.

The forwarding behaviour itself is tested through the front in test_forward.py;
here: framing, keep-alive and pipelining, hand-overs, limits, a client going
away, shutdown, and a differential check of its head parser against aiohttp's.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp.base_protocol import BaseProtocol
from aiohttp.http_parser import HttpRequestParser
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fakes import FakeProvider, Reply, json_reply, openai_ok, sse_data, sse_reply
from tests.proxy.conftest import MakeStack, Stack, stacks
from trimgate.proxy import front, http11
from trimgate.proxy.app import ADMIN_PATHS
from trimgate.proxy.forward import Proxy

pytestmark = pytest.mark.shell

CHAT = orjson.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})


def chat_request(
    body: bytes = CHAT, *, extra: str = "", path: str = "/v1/chat/completions"
) -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: proxy\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer sk-test\r\n{extra}Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def read_answer(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 answer: status, headers (lower-case names, last wins), body."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    if "content-length" in headers:
        body = await asyncio.wait_for(reader.readexactly(int(headers["content-length"])), 5)
    elif headers.get("transfer-encoding") == "chunked":
        parts = []
        while True:
            size = int((await asyncio.wait_for(reader.readuntil(b"\r\n"), 5))[:-2], 16)
            chunk = await asyncio.wait_for(reader.readexactly(size + 2), 5)
            if size == 0:
                break
            parts.append(chunk[:-2])
        body = b"".join(parts)
    else:
        body = await asyncio.wait_for(reader.read(), 5)
    return status, headers, body


@contextlib.asynccontextmanager
async def connection(
    stack: Stack,
) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    reader, writer = await asyncio.open_connection("127.0.0.1", stack.server.port)
    try:
        yield reader, writer
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


async def closed_by_server(reader: asyncio.StreamReader) -> bool:
    try:
        return await asyncio.wait_for(reader.read(1), 5) == b""
    except (ConnectionResetError, BrokenPipeError):  # closed with our bytes unread
        return True


# --- served by the front -------------------------------------------------------


async def test_chat_requests_are_served_by_the_front_on_one_kept_alive_connection(
    make_stack: MakeStack,
) -> None:
    stack = await make_stack()
    async with connection(stack) as (reader, writer):
        for _ in range(3):
            writer.write(chat_request())
            status, headers, body = await read_answer(reader)
            assert status == 200 and orjson.loads(body)["id"] == "chatcmpl-fake"
            assert "server" not in headers  # aiohttp's server names itself; the front does not
            assert headers["x-trimgate-trimmed"] == "false"
            assert headers["date"].endswith(" GMT")
    assert len(stack.fake.requests) == 3
    assert [r.json() for r in stack.fake.requests] == [orjson.loads(CHAT)] * 3


async def test_pipelined_requests_are_answered_in_order(make_stack: MakeStack) -> None:
    fake = FakeProvider(lambda r: json_reply({"echo": r.json()["n"]}))
    stack = await make_stack(fake)
    bodies = [orjson.dumps({"n": n}) for n in range(4)]
    async with connection(stack) as (reader, writer):
        writer.write(b"".join(chat_request(b, path="/v1/embeddings") for b in bodies))
        answers = [await read_answer(reader) for _ in bodies]
    assert [orjson.loads(body)["echo"] for _, _, body in answers] == [0, 1, 2, 3]


async def test_pipelined_bodies_split_across_reads_are_cut_where_they_end(
    make_stack: MakeStack,
) -> None:
    fake = FakeProvider(lambda r: json_reply({"n": r.json()["n"], "size": len(r.body)}))
    stack = await make_stack(fake)
    bodies = [orjson.dumps({"n": n, "pad": "x" * (150_000 + 977 * n)}) for n in range(3)]
    stream = b"".join(chat_request(b, path="/v1/embeddings") for b in bodies)
    async with connection(stack) as (reader, writer):
        for at in range(0, len(stream), 70_001):  # body ends and heads fall inside a piece
            writer.write(stream[at : at + 70_001])
            await writer.drain()
            await asyncio.sleep(0.005)
        answers = [orjson.loads((await read_answer(reader))[2]) for _ in bodies]
    assert answers == [{"n": n, "size": len(b)} for n, b in enumerate(bodies)]
    assert [r.body for r in fake.requests] == bodies


async def test_a_request_split_into_single_bytes_is_read_whole(make_stack: MakeStack) -> None:
    stack = await make_stack()
    async with connection(stack) as (reader, writer):
        for byte in chat_request():
            writer.write(bytes([byte]))
            await writer.drain()
        status, _, _ = await read_answer(reader)
    assert status == 200 and stack.fake.requests[0].body == CHAT


async def test_connection_close_is_honoured(make_stack: MakeStack) -> None:
    stack = await make_stack()
    async with connection(stack) as (reader, writer):
        writer.write(chat_request(extra="Connection: close\r\n"))
        status, headers, _ = await read_answer(reader)
        assert status == 200 and headers["connection"] == "close"
        assert await closed_by_server(reader)


async def test_a_stream_is_relayed_chunked_as_it_arrives(make_stack: MakeStack) -> None:
    frames = sse_data(*({"n": n} for n in range(5)))
    gate = asyncio.Event()

    class Gated(FakeProvider):
        async def _answer(self, request: Any, reply: Reply) -> Any:
            if reply.events is not None:
                resp = aiohttp.web.StreamResponse(headers={"Content-Type": "text/event-stream"})
                await resp.prepare(request)
                await resp.write(reply.events[0])
                await gate.wait()
                for frame in reply.events[1:]:
                    await resp.write(frame)
                await resp.write_eof()
                return resp
            return await super()._answer(request, reply)

    stack = await make_stack(Gated().then(sse_reply(frames)))
    async with connection(stack) as (reader, writer):
        writer.write(
            chat_request(orjson.dumps({"model": "gpt-4o", "stream": True, "messages": []}))
        )
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert b"Transfer-Encoding: chunked" in head and b"text/event-stream" in head
        first = await asyncio.wait_for(reader.readuntil(b"\n\n\r\n"), 5)
        assert b'data: {"n":0}' in first  # before the provider sent the rest
        gate.set()
        rest = await asyncio.wait_for(reader.readuntil(b"0\r\n\r\n"), 5)
    for n in range(1, 5):
        assert f'data: {{"n":{n}}}'.encode() in rest


async def test_a_slow_reader_gets_a_large_answer_whole(make_stack: MakeStack) -> None:
    big = b"x" * (8 * 1024 * 1024)
    stack = await make_stack(FakeProvider(lambda r: Reply(body=big)))
    async with connection(stack) as (reader, writer):
        writer.write(chat_request(path="/v1/files"))
        await asyncio.sleep(0.3)  # the front's write buffer fills and it waits
        status, _, body = await read_answer(reader)
    assert status == 200 and body == big


async def test_an_error_the_proxy_builds_is_written_whole(make_stack: MakeStack) -> None:
    stack = await make_stack()
    async with connection(stack) as (reader, writer):
        writer.write(b"GET /v1/../admin HTTP/1.1\r\nHost: x\r\n\r\n")
        status, headers, body = await read_answer(reader)
        assert status == 400 and headers["content-type"].startswith("application/json")
        assert headers["x-trimgate-request-id"] and "server" not in headers
        assert b"dot segments" in body
        writer.write(chat_request())  # and the connection is still good
        assert (await read_answer(reader))[0] == 200


# --- handed over to aiohttp ---------------------------------------------------------


HANDED_OVER = [
    pytest.param(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 200, id="admin-path"),
    pytest.param(b"GET /heal%74hz HTTP/1.1\r\nHost: x\r\n\r\n", 200, id="escaped-admin-path"),
    pytest.param(b"GET /healthz HTTP/1.0\r\n\r\n", 200, id="http-1.0"),
    pytest.param(b"HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 200, id="head"),
    pytest.param(b"GET /healthz HTTP/1.1\nHost: x\n\n", 400, id="bare-lf"),
    pytest.param(b"GET /v1/models HTTP/1.1\r\n\r\n", 400, id="no-host"),
    pytest.param(
        b"GET /v1/models HTTP/1.1\r\nHost: x\r\nSec-WebSocket-Key1: 1\r\n\r\n",
        400,
        id="old-websocket-draft",
    ),
    pytest.param(
        b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
        b"Content-Length: 3\r\n\r\nabc",
        400,
        id="two-content-lengths",
    ),
    pytest.param(b"POST /v1/embeddings HTTP/1.1\r\nHost : x\r\n\r\n", 400, id="space-before-colon"),
    pytest.param(
        b"GET /v1/models HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n folded\r\n\r\n", 400, id="folded-line"
    ),
    pytest.param(
        b"GET /v1/models HTTP/1.1\r\nHost: x\r\nX-A: \x01\r\n\r\n", 400, id="control-character"
    ),
    pytest.param(
        b"GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n",
        400,
        id="huge",
    ),
]


@pytest.mark.parametrize(("request_bytes", "status"), HANDED_OVER)
async def test_what_the_front_does_not_take_aiohttp_answers(
    make_stack: MakeStack, request_bytes: bytes, status: int
) -> None:
    stack = await make_stack()
    async with connection(stack) as (reader, writer):
        writer.write(request_bytes)
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    assert head.split(b" ")[1] == str(status).encode()
    if status == 200:
        assert b"Server: Python/" in head  # aiohttp's server answered
    assert not stack.fake.requests


async def test_chunked_and_expect_bodies_are_forwarded_through_aiohttp(
    make_stack: MakeStack,
) -> None:
    stack = await make_stack()
    async with connection(stack) as (reader, writer):
        writer.write(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n" + b"%x\r\n%b\r\n0\r\n\r\n" % (len(CHAT), CHAT)
        )
        status, headers, _ = await read_answer(reader)
        assert status == 200 and headers["x-trimgate-trimmed"] == "false"
    async with aiohttp.ClientSession() as http:
        resp = await http.post(
            f"{stack.base}/v1/chat/completions",
            data=CHAT,
            headers={"Content-Type": "application/json"},
            expect100=True,
        )
        assert resp.status == 200 and resp.headers["x-trimgate-trimmed"] == "false"
    assert [r.body for r in stack.fake.requests] == [CHAT, CHAT]


async def test_an_oversized_body_gets_the_providers_413(make_stack: MakeStack) -> None:
    stack = await make_stack(server={"max_body_bytes": 1024})
    body = orjson.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "x" * 2000}]})
    async with connection(stack) as (reader, writer):
        writer.write(chat_request(body))
        status, headers, answer = await read_answer(reader)
    assert status == 413 and headers["x-trimgate-error"] == "true"
    assert orjson.loads(answer)["error"]["message"] == "request body exceeds server.max_body_bytes"
    assert not stack.fake.requests


async def test_a_kept_alive_connection_is_handed_over_between_requests(
    make_stack: MakeStack,
) -> None:
    stack = await make_stack()
    async with connection(stack) as (reader, writer):
        writer.write(chat_request())
        assert (await read_answer(reader))[0] == 200
        writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        status, headers, body = await read_answer(reader)
        assert status == 200 and headers["server"].startswith("Python/")
        assert b"trimgate_requests_total" in body
        writer.write(chat_request())  # aiohttp serves the rest of this connection
        status, headers, _ = await read_answer(reader)
        assert status == 200 and headers["x-trimgate-trimmed"] == "false"
        assert "server" in headers


async def test_the_event_websocket_upgrades_through_the_front(make_stack: MakeStack) -> None:
    stack = await make_stack()
    async with aiohttp.ClientSession() as http, http.ws_connect(f"{stack.base}/api/ws") as ws:
        await ws.ping()
        assert not ws.closed


# --- read as aiohttp's server read it (each on both servers) ---------------------------

both_servers = pytest.mark.parametrize("http_server", ["trimgate", "aiohttp"])


class RawUpstream:
    """A loopback provider that records the request heads it gets (aiohttp's own server,
    the fake provider, would refuse some of them itself and hide a difference)."""

    def __init__(self) -> None:
        self.heads: list[bytes] = []
        self.server: asyncio.Server | None = None

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception):
            self.heads.append(await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5))
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
            await writer.drain()
        writer.close()

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self.serve, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()


async def status_of(stack: Stack, raw: bytes) -> int:
    async with connection(stack) as (reader, writer):
        writer.write(raw)
        return (await read_answer(reader))[0]


@both_servers
@pytest.mark.parametrize(
    ("target", "status"),
    [
        (b"/v1/.\t./.\t./tenant-b/v1/models", 400),  # yarl drops tabs: a dot segment upstream
        (b"/v1/\t/models", 400),
        (b"/v1/..#x", 400),  # the fragment hid the final dot segment
        (b"/metrics#x", 200),  # and an admin path: served here, not forwarded
        (b"/v1/models\xff?q=\xc3\xbc", 400),  # bytes outside ASCII
    ],
)
async def test_odd_targets_are_answered_as_aiohttp_answered_them(
    make_stack: MakeStack, target: bytes, status: int
) -> None:
    fake = FakeProvider()
    stack = await make_stack(fake)
    base = str(stack.fake_server.make_url("")).rstrip("/")
    stack = await make_stack(
        fake, upstreams={"openai": {"provider": "openai", "base_url": base + "/tenant-a"}}
    )
    answer = await status_of(stack, b"GET " + target + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    assert answer == status and not fake.requests


@both_servers
@pytest.mark.parametrize(
    "extra",
    [
        pytest.param("X-Big: " + "a" * 9000 + "\r\n", id="long-field"),
        pytest.param("".join(f"X-{i}: 1\r\n" for i in range(200)), id="200-fields"),
    ],
)
async def test_aiohttps_head_limits_hold(make_stack: MakeStack, extra: str) -> None:
    raw = RawUpstream()
    async with raw as url:
        stack = await make_stack(upstreams={"openai": {"provider": "openai", "base_url": url}})
        status = await status_of(stack, chat_request(path="/v1/files", extra=extra))
    assert status == 400 and not raw.heads


@both_servers
async def test_keep_alive_is_decided_as_aiohttp_decided_it(make_stack: MakeStack) -> None:
    stack = await make_stack()
    async with connection(stack) as (reader, writer):  # llhttp reads it as Connection
        writer.write(chat_request(extra="Proxy-Connection: close\r\n"))
        _, headers, _ = await read_answer(reader)
        assert headers.get("connection") == "close" and await closed_by_server(reader)
    async with connection(stack) as (reader, writer):  # not a "close" token
        writer.write(chat_request(extra="Connection: close\u00a0\r\n"))
        _, headers, _ = await read_answer(reader)
        assert "connection" not in headers
        writer.write(chat_request())
        assert (await read_answer(reader))[0] == 200


@both_servers
async def test_a_zero_padded_content_length_of_5000_digits(make_stack: MakeStack) -> None:
    stack = await make_stack()
    padded = chat_request(extra="X: 1\r\n").replace(
        b"Content-Length: ", b"Content-Length: " + b"0" * 5000
    )
    async with connection(stack) as (reader, writer):
        writer.write(padded)
        assert (await read_answer(reader))[0] == 200
        writer.write(chat_request() + padded)  # and pipelined behind another request
        assert (await read_answer(reader))[0] == 200
        assert (await read_answer(reader))[0] == 200


@both_servers
async def test_empty_lines_between_requests_are_ignored(make_stack: MakeStack) -> None:
    stack = await make_stack()
    async with connection(stack) as (reader, writer):
        writer.write(chat_request() + b"\r\n")
        assert (await read_answer(reader))[0] == 200
        writer.write(b"\r\n" + chat_request())
        status, headers, _ = await read_answer(reader)
        assert status == 200 and headers["x-trimgate-trimmed"] == "false"
        writer.write(b"\r\n")
        await asyncio.sleep(0.1)
        stopping = asyncio.create_task(stack.server.close())  # the connection is idle again
        assert await closed_by_server(reader)
        await asyncio.wait_for(stopping, 5)


# --- limits, clients going away, errors, shutdown ------------------------------------


async def test_an_idle_connection_outlives_the_stall_clock(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(front, "STALL", 0.1)
    stack = await make_stack()
    async with connection(stack) as (reader, writer):
        writer.write(chat_request())
        assert (await read_answer(reader))[0] == 200
        await asyncio.sleep(0.4)  # idle, not stalled: KEEPALIVE applies
        writer.write(chat_request())
        assert (await read_answer(reader))[0] == 200


async def test_a_streams_head_goes_out_before_its_first_bytes(make_stack: MakeStack) -> None:
    gate = asyncio.Event()

    class Slow(FakeProvider):
        async def _answer(self, request: Any, reply: Reply) -> Any:
            resp = aiohttp.web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
            await resp.prepare(request)
            await gate.wait()
            await resp.write(b"{}\n")
            await resp.write_eof()
            return resp

    stack = await make_stack(Slow())
    async with connection(stack) as (reader, writer):
        writer.write(chat_request(path="/v1/threads/runs"))  # not a chat path: relayed as is
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 200") and b"Transfer-Encoding: chunked" in head
        gate.set()
        assert (
            await asyncio.wait_for(reader.readuntil(b"0\r\n\r\n"), 5) == b"3\r\n{}\n\r\n0\r\n\r\n"
        )


async def test_idle_and_stalled_connections_are_closed(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(front, "KEEPALIVE", 0.2)
    monkeypatch.setattr(front, "STALL", 0.2)
    stack = await make_stack()
    async with connection(stack) as (reader, writer):  # idle from the start
        assert await closed_by_server(reader)
    async with connection(stack) as (reader, writer):  # idle after an answer
        writer.write(chat_request())
        assert (await read_answer(reader))[0] == 200
        assert await closed_by_server(reader)
    async with connection(stack) as (reader, writer):  # a head that never ends
        for _ in range(5):
            writer.write(b"X")  # bytes keep coming, but the head's clock is not reset
            await asyncio.sleep(0.05)
        assert await closed_by_server(reader)
    async with connection(stack) as (reader, writer):  # a body that stops
        writer.write(chat_request()[:-5])
        assert await closed_by_server(reader)
    assert len(stack.fake.requests) == 1


async def test_a_client_leaving_mid_answer_cancels_the_upstream_request(
    make_stack: MakeStack,
) -> None:
    fake = FakeProvider().then(Reply(hang=True))
    stack = await make_stack(fake)
    async with connection(stack) as (_, writer):
        writer.write(chat_request())
        for _ in range(100):
            if fake.requests:
                break
            await asyncio.sleep(0.01)
    for _ in range(200):
        if fake.cancelled:
            break
        await asyncio.sleep(0.01)
    assert fake.cancelled == 1


async def test_a_failing_handler_answers_500_and_closes(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(self: Proxy, request: Any) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(Proxy, "handle", broken)
    stack = await make_stack()
    async with connection(stack) as (reader, writer):
        writer.write(chat_request())
        status, headers, _ = await read_answer(reader)
        assert status == 500 and headers["connection"] == "close"
        assert await closed_by_server(reader)


async def test_shutdown_closes_idle_connections_and_lets_answers_finish(
    make_stack: MakeStack,
) -> None:
    fake = FakeProvider().then(Reply(delay=0.3, data=openai_ok()))
    stack = await make_stack(fake)
    async with connection(stack) as (idle_reader, _), connection(stack) as (reader, writer):
        writer.write(chat_request())
        for _ in range(500):
            if fake.requests:
                break
            await asyncio.sleep(0.01)
        stopping = asyncio.create_task(stack.server.close())
        assert await closed_by_server(idle_reader)
        status, headers, _ = await read_answer(reader)
        assert status == 200 and headers["connection"] == "close"
        await asyncio.wait_for(stopping, 5)


async def test_shutdown_closes_what_waits_between_requests_at_once(
    make_stack: MakeStack,
) -> None:
    """Only answers in flight are waited for: a half-sent head, a connection handed to
    aiohttp and the event WebSocket are closed at once, as aiohttp's server closes them."""
    fake = FakeProvider().then(Reply(delay=0.5, data=openai_ok()))
    stack = await make_stack(fake)
    async with contextlib.AsyncExitStack() as stack_of:
        half_reader, half = await stack_of.enter_async_context(connection(stack))
        half.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
        over_reader, over = await stack_of.enter_async_context(connection(stack))
        over.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert (await read_answer(over_reader))[0] == 200
        http = await stack_of.enter_async_context(aiohttp.ClientSession())
        ws = await stack_of.enter_async_context(http.ws_connect(f"{stack.base}/api/ws"))
        reader, writer = await stack_of.enter_async_context(connection(stack))
        writer.write(chat_request())
        for _ in range(500):
            if fake.requests:
                break
            await asyncio.sleep(0.01)
        stopping = asyncio.create_task(stack.server.close())
        for closed in (half_reader, over_reader):
            assert await closed_by_server(closed)  # within read's 5 s, not the 60 s grace
        assert (await asyncio.wait_for(ws.receive(), 5)).type in (
            aiohttp.WSMsgType.CLOSE,
            aiohttp.WSMsgType.CLOSED,
        )
        status, headers, _ = await read_answer(reader)  # the answer in flight finishes
        assert status == 200 and headers["connection"] == "close"
        await asyncio.wait_for(stopping, 5)


async def test_shutdown_gives_the_front_and_aiohttp_one_grace_together(
    make_stack: MakeStack,
) -> None:
    """An answer stuck on the front and one stuck on a connection handed to aiohttp (a
    chunked body) are both cut once the front's grace is up. aiohttp's own wait runs
    after ``on_shutdown`` with its 60 s: waited for one after the other, this took a
    grace and then 60 s more."""
    fake = FakeProvider().then(Reply(hang=True), Reply(hang=True))
    stack = await make_stack(fake)
    (gate,) = stack.app[front.FRONTS]
    gate.grace = 0.3
    async with connection(stack) as (on_front, w1), connection(stack) as (on_aiohttp, w2):
        w1.write(chat_request())
        w2.write(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n" + b"%x\r\n%b\r\n0\r\n\r\n" % (len(CHAT), CHAT)
        )
        for _ in range(500):
            if len(fake.requests) == 2:
                break
            await asyncio.sleep(0.01)
        assert len(fake.requests) == 2
        await asyncio.wait_for(stack.server.close(), 5)
        for reader in (on_front, on_aiohttp):
            with contextlib.suppress(ConnectionResetError):
                await asyncio.wait_for(reader.read(), 5)  # to the end: the server closed
            assert reader.at_eof() or reader.exception() is not None


async def test_a_flood_of_empty_lines_holds_up_nobody(make_stack: MakeStack) -> None:
    """Empty lines before a request are skipped in one pass: 4 MB of them are read in
    linear time (skipping them one copy at a time held the loop for seconds)."""
    stack = await make_stack()
    async with connection(stack) as (reader, writer), connection(stack) as (other, other_w):
        writer.write(b"\r\n" * (2 * 1024 * 1024) + chat_request())
        other_w.write(chat_request())
        assert (await asyncio.wait_for(read_answer(other), 5))[0] == 200
        await asyncio.wait_for(writer.drain(), 5)
        assert (await asyncio.wait_for(read_answer(reader), 5))[0] == 200


async def test_shutdown_gives_up_on_an_answer_after_the_grace_period() -> None:
    started = asyncio.Event()

    async def handle(request: front.FrontRequest) -> None:
        started.set()
        await asyncio.sleep(3600)

    async def unused() -> None:
        raise AssertionError

    gate = front.Front(handle, unused, max_body=1024, delegated=frozenset(), grace=0.1)  # type: ignore[arg-type]
    server = await asyncio.get_running_loop().create_server(gate.protocol, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    await asyncio.wait_for(started.wait(), 5)
    server.close()
    await asyncio.wait_for(gate.drain(), 5)
    assert await closed_by_server(reader)
    assert not gate.connections
    writer.close()


# --- the head parser against aiohttp's ---------------------------------------------------


def test_parse_head_reads_what_the_front_serves() -> None:
    head = http11.parse_request_head(
        b"POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: a\r\nX-A: 1 \r\nx-a:\t2\r\n"
        b"Content-Length: 12\r\nConnection: keep-alive, Close",
        max_body=100,
        delegated=ADMIN_PATHS,
    )
    assert head is not None
    assert (head.method, head.target, head.length, head.keep) == (
        "POST",
        "/v1/chat/completions?x=1",
        12,
        False,
    )
    assert head.headers.getall("X-A") == ["1", "2"]


@pytest.mark.parametrize(
    "head",
    [
        b"POST /v1/x HTTP/1.1\r\nHost: h\r\nContent-Length: 101",  # over max_body
        b"POST /v1/x HTTP/1.1\r\nHost: h\r\nContent-Length: +1",
        b"POST /v1/x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked",
        b"POST /v1/x HTTP/1.1\r\nHost: h\r\nExpect: 100-continue",
        b"GET /v1/x HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket",
        b"GET /api/ws HTTP/1.1\r\nHost: h",
        b"GET /metrics?x HTTP/1.1\r\nHost: h",
        b"CONNECT /x HTTP/1.1",
        b"get /x HTTP/1.1",
        b"GET http://elsewhere/x HTTP/1.1",
        b"GET /x HTTP/1.1\r\nHost: h\r\nX-A: a\rb",
        b"GET /x HTTP/1.1\r\nHost: h\r\nX-A: a\x00b",
        b"GET /x HTTP/1.1\r\nHost: h\r\nX\x80: a",
        b"GET /x HTTP/1.1\r\n\r\nHost: h\r\nX-A: 1",  # an empty line inside
        b"GET  /x HTTP/1.1",
        b"GET /x HTTP/1.1 ",
        b"GET /x HTTP/1.1",  # no Host
        b"GET /x HTTP/1.1\r\nHost: a\r\nHost: b",
    ],
)
def test_parse_head_leaves_the_rest_to_aiohttp(head: bytes) -> None:
    assert http11.parse_request_head(head, max_body=100, delegated=ADMIN_PATHS) is None


_TOKEN_CHARS = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_PATH_CHARS = "abcXYZ019-._~!$&'()*+,;=:@/"  # RFC 3986 path characters, escapes aside
_RAW_BYTES = st.sampled_from([chr(c) for c in range(0xDC80, 0xDD00)])  # undecodable bytes
_VALUE_CHARS = st.characters(
    min_codepoint=0x20, max_codepoint=0x2FF, exclude_characters="\x7f"
) | st.sampled_from("\t")
_FIELD_NAMES = st.sampled_from(
    ["Content-Type", "content-length", "X-A", "Connection", "Accept", "Authorization"]
) | st.text(alphabet=_TOKEN_CHARS, min_size=1, max_size=8)
_FIELD_VALUES = st.text(alphabet=_VALUE_CHARS | _RAW_BYTES, max_size=10) | st.sampled_from(
    ["5", "05", "0", "close", "Close", "keep-alive", "keep-alive, close", " 7 ", "x,  close"]
)


@st.composite
def valid_heads(draw: st.DrawFn) -> bytes:
    """Heads the front must take: HTTP/1.1, one Host, token names, no control characters."""
    method = draw(st.sampled_from(sorted(http11.METHODS)))
    path = "/" + draw(st.text(alphabet=_PATH_CHARS, max_size=12))
    query = draw(st.sampled_from(["", "?", "?a=1", "?a=%20&b", "?x=/../"]))
    fields = draw(st.lists(st.tuples(_FIELD_NAMES, _FIELD_VALUES), max_size=6))
    seen: set[str] = set()
    once = {n.lower() for n in http11.SINGLETONS}  # aiohttp refuses these twice
    kept: list[tuple[str, str]] = []
    for name, value in fields:
        lowered = name.lower()
        if lowered in ("host", "content-length", "upgrade", "transfer-encoding", "expect"):
            continue  # Host and the length are added below; the others are aiohttp's
        if lowered == "connection" and "upgrade" in value.lower():
            continue  # an upgrade is aiohttp's too
        if lowered in once and lowered in seen:
            continue
        seen.add(lowered)
        kept.append((name, value))
    fields = kept
    fields.insert(draw(st.integers(0, len(fields))), ("Host", draw(st.sampled_from(["h", "h:1"]))))
    if draw(st.booleans()):
        fields.append(("Content-Length", str(draw(st.integers(0, 100)))))
    lines = [f"{method} {path}{query} HTTP/1.1"]
    lines += [
        f"{name}:{draw(st.sampled_from(['', ' ', chr(9), '  ']))}{value}" for name, value in fields
    ]
    return "\r\n".join(lines).encode("utf-8", "surrogateescape")


@st.composite
def mangled_heads(draw: st.DrawFn) -> bytes:
    """A valid head with a few bytes replaced, inserted or removed."""
    head = bytearray(draw(valid_heads()))
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(head)))
        noise = draw(
            st.sampled_from(
                [
                    b"\r",
                    b"\n",
                    b" ",
                    b"\t",
                    b"\x00",
                    b"\x7f",
                    b":",
                    b"\xff",
                    b"\r\n",
                    b"\r\n ",
                    b"\r\nContent-Length: 3",
                    b"\r\nHost: x",
                    b"\r\nTransfer-Encoding: chunked",
                    b"HTTP/1.0",
                    b"%",
                    b"?",
                ]
            )
        )
        if draw(st.booleans()):
            head[at:at] = noise
        else:
            del head[at : at + draw(st.integers(1, 3))]
    return bytes(head)


def aiohttp_reads(head: bytes) -> Any:
    """aiohttp's own parser (llhttp, as its server uses it) on this head; raises if refused."""
    loop = asyncio.new_event_loop()
    try:
        parser = HttpRequestParser(
            BaseProtocol(loop),
            loop,
            2**16,
            max_line_size=8190,
            max_field_size=8190,
            max_headers=128,
        )
        ((message, _),), _, _ = parser.feed_data(head + b"\r\n\r\n")
        return message
    finally:
        loop.close()


def assert_read_alike(head: bytes, parsed: http11.Request) -> None:
    message = aiohttp_reads(head)
    assert message.method == parsed.method and message.path == parsed.target
    assert message.version == aiohttp.HttpVersion11
    # names compared without case: aiohttp spells well-known ones its own way, the front
    # keeps the client's spelling
    assert [(k.lower(), v) for k, v in message.headers.items()] == [
        (k.lower(), v) for k, v in parsed.headers.items()
    ]
    assert int(message.headers.get("Content-Length", 0)) == parsed.length
    assert message.should_close == (not parsed.keep)
    assert not message.chunked and not message.upgrade


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_heads())
def test_the_front_takes_valid_heads_and_reads_them_as_aiohttp_does(head: bytes) -> None:
    parsed = http11.parse_request_head(head, max_body=100, delegated=ADMIN_PATHS)
    assert parsed is not None
    assert_read_alike(head, parsed)


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mangled_heads())
def test_every_mangled_head_the_front_takes_aiohttp_reads_the_same_way(head: bytes) -> None:
    parsed = http11.parse_request_head(head, max_body=100, delegated=ADMIN_PATHS)
    if parsed is not None:  # else aiohttp decides, as before
        assert_read_alike(head, parsed)


# --- on uvloop, the loop `trimgate serve` runs -------------------------------------------


UVLOOP_TESTS: list[Callable[..., Awaitable[None]]] = [
    test_chat_requests_are_served_by_the_front_on_one_kept_alive_connection,
    test_pipelined_requests_are_answered_in_order,
    test_a_slow_reader_gets_a_large_answer_whole,
    test_a_kept_alive_connection_is_handed_over_between_requests,
    test_the_event_websocket_upgrades_through_the_front,
    test_a_client_leaving_mid_answer_cancels_the_upstream_request,
    test_shutdown_closes_idle_connections_and_lets_answers_finish,
]


@pytest.mark.parametrize("test", UVLOOP_TESTS, ids=lambda f: f.__name__)
def test_on_uvloop(test: Callable[..., Awaitable[None]]) -> None:
    import uvloop

    async def run() -> None:
        assert type(asyncio.get_running_loop()).__module__.startswith("uvloop")
        async with stacks("trimgate", "trimgate") as make:
            await test(make)

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(run())


async def test_a_long_head_handed_to_aiohttp_must_end_in_time(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(front, "STALL", 0.3)
    stack = await make_stack()
    padding = "".join(f"X-Pad-{i}: {'p' * 200}\r\n" for i in range(90))  # about 19 KiB
    request = chat_request(extra=padding)
    assert request.index(b"\r\n\r\n") > 16 * 1024  # over the front's head limit
    async with connection(stack) as (reader, writer):  # a long head that stops midway
        writer.write(request[:17_000])
        assert await closed_by_server(reader)
    async with connection(stack) as (reader, writer):  # bytes keep coming, too slowly
        writer.write(request[:16_500])
        with contextlib.suppress(ConnectionError):  # closed while it writes
            for i in range(8):
                writer.write(request[16_500 + i : 16_501 + i])
                await asyncio.sleep(0.05)
        assert await closed_by_server(reader)
    async with connection(stack) as (reader, writer):  # a long head in time is served
        writer.write(request)
        assert (await read_answer(reader))[0] == 200
        await asyncio.sleep(0.5)  # past the deadline: the connection stays open
        writer.write(chat_request())
        assert (await read_answer(reader))[0] == 200
    assert len(stack.fake.requests) == 2


async def test_every_head_on_a_handed_over_connection_must_end_in_time(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(front, "STALL", 0.3)
    stack = await make_stack()
    padding = "".join(f"X-Pad-{i}: {'p' * 200}\r\n" for i in range(90))  # about 19 KiB
    long_head = chat_request(extra=padding)
    for later in (long_head, chat_request()):  # aiohttp reads every later head
        async with connection(stack) as (reader, writer):
            writer.write(long_head)  # handed over, and answered
            assert (await read_answer(reader))[0] == 200
            await asyncio.sleep(0.5)  # idle past the deadline: kept alive
            writer.write(later)
            assert (await read_answer(reader))[0] == 200
            writer.write(later[:100])  # a later head that stops midway
            assert await closed_by_server(reader)
    assert len(stack.fake.requests) == 4


@pytest.mark.parametrize("http_server", ["aiohttp"])
async def test_aiohttp_served_heads_must_end_in_time(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trimgate.proxy import serve

    monkeypatch.setattr(serve, "STALL", 0.3)
    stack = await make_stack()
    async with connection(stack) as (reader, writer):  # the first head stalls
        writer.write(chat_request()[:50])
        assert await closed_by_server(reader)
    async with connection(stack) as (reader, writer):  # bytes keep coming, too slowly
        request = chat_request()
        with contextlib.suppress(ConnectionError):
            for i in range(10):
                writer.write(request[i : i + 1])
                await asyncio.sleep(0.05)
        assert await closed_by_server(reader)
    async with connection(stack) as (reader, writer):
        writer.write(chat_request())
        assert (await read_answer(reader))[0] == 200
        await asyncio.sleep(0.5)  # idle between requests: kept alive
        writer.write(chat_request())
        assert (await read_answer(reader))[0] == 200
        writer.write(chat_request()[:60])  # a later head that stops midway
        assert await closed_by_server(reader)
    assert len(stack.fake.requests) == 2
