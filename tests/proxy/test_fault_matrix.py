"""Faults on every stack (both fronts, both clients): one clean answer per client.

Every case checks what a client must always get: ONE answer (a success, the provider's
own answer, or trimgate's error in the provider's envelope; once bytes of an answer went
out, a cut connection), the number of upstream calls per client request (one, two only
for a documented reactive retry), and that nothing is left behind: no asyncio task still
running, no growth in the process's open descriptors (each fault is repeated, so a leak
per request shows above the slack a fresh keep-alive connection takes).
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import ipaddress
import os
import socket
import ssl
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import openai
import orjson
import pytest
from aiohttp.test_utils import TestServer

from tests.fakes import (
    FakeProvider,
    Reply,
    anthropic_ok,
    json_reply,
    openai_ok,
    openai_overflow,
    sse_data,
    sse_reply,
)
from tests.proxy.bodies import anthropic_messages, openai_chat
from tests.proxy.conftest import MakeStack, Stack

pytestmark = [pytest.mark.every_stack, pytest.mark.shell]

TLS = Path(__file__).parent.parent / "data" / "tls"
REPEAT = 5  # each fault, so that a per-request leak exceeds the slack below
FD_SLACK = 4  # descriptors: two fresh keep-alive connections, both ends in this process
TASK_SLACK = 2  # tasks: aiohttp's per-connection handler of two fresh connections
SETTLE = 3.0  # seconds the leftovers of a fault may take to go


# --- what is left behind ----------------------------------------------------------------


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@dataclass
class Baseline:
    tasks: set[asyncio.Task[Any]]
    fds: int


def baseline() -> Baseline:
    return Baseline(asyncio.all_tasks(), open_fds())


async def assert_nothing_left(before: Baseline) -> None:
    """Within SETTLE seconds: no task started since ``before`` still runs (beyond the
    keep-alive slack), and the descriptors are back within the slack."""
    me = asyncio.current_task()
    deadline = time.monotonic() + SETTLE
    while True:
        left = [t for t in asyncio.all_tasks() - before.tasks if t is not me and not t.done()]
        grown = open_fds() - before.fds
        if (len(left) <= TASK_SLACK and grown <= FD_SLACK) or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.05)
    assert len(left) <= TASK_SLACK, f"tasks left running: {left}"
    assert grown <= FD_SLACK, f"{grown} more open descriptors than before"


def answered(stack: Stack, status: int) -> float:
    """``trimgate_requests_total`` with this status, all other labels summed."""
    return sum(
        sample.value
        for metric in stack.registry.collect()
        for sample in metric.samples
        if sample.name == "trimgate_requests_total" and sample.labels["status"] == str(status)
    )


async def warm(stack: Stack) -> Baseline:
    """One clean request first (pools and keep-alive connections exist), then the baseline."""
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(1, model="gpt-4o"))
    assert resp.status == 200
    await resp.read()
    stack.fake.requests.clear()
    return baseline()


async def count_reaches(get: Callable[[], int], want: int, within: float = SETTLE) -> int:
    """``get()`` once it equals ``want``, or its value when ``within`` seconds have passed."""
    await wait_for(lambda: get() == want, within)
    return get()


async def wait_for(predicate: Callable[[], bool], within: float = SETTLE) -> bool:
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


# --- a raw client: sees exactly what went out on the wire ---------------------------------


def http_request(path: str, body: bytes, **headers: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", f"Content-Length: {len(body)}"]
    lines += ["Content-Type: application/json", "Connection: close"]
    lines += [f"{k.replace('_', '-')}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def exchange(port: int, request: bytes, within: float = 10.0) -> bytes:
    """Send, and read until the connection closes (bounded in time)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        chunks: list[bytes] = []
        async with asyncio.timeout(within):
            while chunk := await reader.read(65536):
                chunks.append(chunk)
        return b"".join(chunks)
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes


def one_answer(raw: bytes) -> Answer:
    """The single answer in ``raw``: one status line, a body framed as its head says and
    nothing after it."""
    assert raw.count(b"HTTP/1.1 ") == 1, raw[:500]
    head, _, rest = raw.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines)}
    if headers.get("transfer-encoding") == "chunked":
        body = b""
        while True:
            size_line, _, rest = rest.partition(b"\r\n")
            size = int(size_line.split(b";")[0], 16)
            if size == 0:
                assert rest in (b"", b"\r\n"), rest
                break
            body, rest = body + rest[:size], rest[size + 2 :]
    else:
        length = int(headers["content-length"])
        body, rest = rest[:length], rest[length:]
        assert len(body) == length and rest == b"", (length, len(body), rest[:100])
    return Answer(int(status_line.split()[1]), headers, body)


def assert_enveloped(answer: Answer, status: int, provider: str = "openai") -> dict[str, Any]:
    """trimgate's own error, in the provider's envelope."""
    assert answer.status == status, answer
    assert answer.headers["x-trimgate-error"] == "true"
    assert answer.headers["x-trimgate-request-id"]
    body: dict[str, Any] = orjson.loads(answer.body)
    if provider == "anthropic":
        assert body["type"] == "error" and body["error"]["message"]
    else:
        assert body["error"]["message"]
    return body


CHAT = orjson.dumps(openai_chat(1, model="gpt-4o"))
STREAM = orjson.dumps(openai_chat(1, model="gpt-4o", stream=True))


def frames(n: int) -> list[bytes]:
    head = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o"}
    return sse_data(
        *({**head, "choices": [{"index": 0, "delta": {"content": f"w{i} "}}]} for i in range(n))
    )


# --- the provider breaks off ------------------------------------------------------------


async def test_reset_before_the_head_is_one_502_and_one_call(make_stack: MakeStack) -> None:
    stack = await make_stack()
    before = await warm(stack)
    stack.fake.responder = lambda r: Reply(reset=True)
    for i in range(REPEAT):
        raw = await exchange(stack.server.port or 0, http_request("/v1/chat/completions", CHAT))
        assert_enveloped(one_answer(raw), 502)
        assert len(stack.fake.requests) == i + 1  # a POST is never resent
    await assert_nothing_left(before)
    assert answered(stack, 502) == REPEAT


async def test_reset_mid_stream_cuts_the_client_after_the_bytes_sent(
    make_stack: MakeStack,
) -> None:
    stack = await make_stack()
    before = await warm(stack)
    sent = frames(3)
    for i in range(REPEAT):
        stack.fake.then(Reply(events=sent, event_delay=0.01, end="reset"))
        resp = await stack.client.post("/v1/chat/completions", data=STREAM)
        assert resp.status == 200
        got = b""
        with pytest.raises(aiohttp.ClientPayloadError):
            async for chunk in resp.content.iter_any():
                got += chunk
        assert got == b"".join(sent)  # every byte the provider sent, then the cut
        assert len(stack.fake.requests) == i + 1
    await assert_nothing_left(before)


async def test_reset_mid_json_body_is_one_502(make_stack: MakeStack) -> None:
    # A small chat answer of known length is read whole before it is relayed (an error may
    # sit inside a choice), so a reset inside it is trimgate's 502, not a cut 200.
    stack = await make_stack()
    before = await warm(stack)
    body = orjson.dumps(openai_ok(10))
    for i in range(REPEAT):
        stack.fake.then(Reply(body=body, partial=40, end="reset"))
        raw = await exchange(stack.server.port or 0, http_request("/v1/chat/completions", CHAT))
        assert_enveloped(one_answer(raw), 502)
        assert len(stack.fake.requests) == i + 1
    await assert_nothing_left(before)


async def test_an_overflow_then_a_reset_is_two_calls_and_one_502(make_stack: MakeStack) -> None:
    """The one documented resend: after an overflow answer. Its failure is one 502."""
    stack = await make_stack()
    before = await warm(stack)
    for i in range(REPEAT):
        stack.fake.then(openai_overflow(2000, 1000), Reply(reset=True))
        raw = await exchange(
            stack.server.port or 0,
            http_request("/v1/chat/completions", orjson.dumps(openai_chat(6, model="gpt-4o"))),
        )
        assert_enveloped(one_answer(raw), 502)
        assert len(stack.fake.requests) == 2 * (i + 1)
    await assert_nothing_left(before)


# --- the provider goes quiet --------------------------------------------------------------


@contextlib.asynccontextmanager
async def silent_provider() -> AsyncIterator[tuple[int, list[int], list[bool]]]:
    """Accepts, reads, never answers: (port, bytes read per connection, whether each
    connection was closed by the other side)."""
    read: list[int] = []
    closed: list[bool] = []
    writers: list[asyncio.StreamWriter] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        i = len(read)
        read.append(0)
        closed.append(False)
        while chunk := await reader.read(65536):
            read[i] += len(chunk)
        closed[i] = True
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield port, read, closed
    finally:
        server.close()
        for writer in writers:
            writer.close()
        await server.wait_closed()


async def test_a_half_open_provider_is_one_504_and_its_connection_closed(
    make_stack: MakeStack,
) -> None:
    async with silent_provider() as (port, read, closed):
        url = f"http://127.0.0.1:{port}"
        stack = await make_stack(
            server={"read_timeout": 0.3},
            upstreams={"anthropic": {"provider": "anthropic", "base_url": url}},
        )
        before = await warm(stack)  # the openai upstream: the fake
        body = orjson.dumps(anthropic_messages(1))
        for i in range(REPEAT):
            started = time.monotonic()
            raw = await exchange(stack.server.port or 0, http_request("/v1/messages", body))
            assert time.monotonic() - started < 3
            error = assert_enveloped(one_answer(raw), 504, "anthropic")
            assert "timed out" in error["error"]["message"]
            assert len(read) == i + 1 and read[i] > len(body)  # one call, sent whole
        assert await wait_for(lambda: all(closed)), closed  # trimgate hung up each one
        await assert_nothing_left(before)


async def test_a_stall_mid_stream_cuts_the_client_at_the_read_timeout(
    make_stack: MakeStack,
) -> None:
    stack = await make_stack(server={"read_timeout": 0.3})
    before = await warm(stack)
    sent = frames(2)
    for i in range(REPEAT):
        stack.fake.then(Reply(events=sent, end="hang"))
        started = time.monotonic()
        resp = await stack.client.post("/v1/chat/completions", data=STREAM)
        assert resp.status == 200
        got = b""
        with pytest.raises(aiohttp.ClientPayloadError):
            async for chunk in resp.content.iter_any():
                got += chunk
        assert got == b"".join(sent)
        assert time.monotonic() - started < 3
        assert len(stack.fake.requests) == i + 1
    # the provider's side of each stalled answer was closed (its handler cancelled)
    assert await wait_for(lambda: stack.fake.cancelled == REPEAT), stack.fake.cancelled
    await assert_nothing_left(before)


async def test_a_stall_mid_json_body_is_one_504(make_stack: MakeStack) -> None:
    # read whole before relaying (see the reset case above): the stall is trimgate's 504
    stack = await make_stack(server={"read_timeout": 0.3})
    before = await warm(stack)
    body = orjson.dumps(openai_ok(10))
    for i in range(REPEAT):
        stack.fake.then(Reply(body=body, partial=30, end="hang"))
        started = time.monotonic()
        raw = await exchange(stack.server.port or 0, http_request("/v1/chat/completions", CHAT))
        assert time.monotonic() - started < 3
        assert_enveloped(one_answer(raw), 504)
        assert len(stack.fake.requests) == i + 1
    assert await wait_for(lambda: stack.fake.cancelled == REPEAT), stack.fake.cancelled
    await assert_nothing_left(before)


# --- 5xx ------------------------------------------------------------------------------


def server_error(status: int) -> Reply:
    message = "overloaded" if status == 529 else "The server had an error while processing"
    if status == 529:
        data: dict[str, Any] = {
            "type": "error",
            "error": {"type": "overloaded_error", "message": message},
        }
    else:
        data = {"error": {"message": message, "type": "server_error", "code": None}}
    return json_reply(data, status=status)


async def test_a_5xx_storm_is_relayed_as_is_once_each_and_counted(
    make_stack: MakeStack,
) -> None:
    statuses = [500, 502, 503]
    stack = await make_stack()
    before = await warm(stack)
    replies = [server_error(s) for s in statuses for _ in range(3)]
    stack.fake.then(*replies)
    port = stack.server.port or 0
    # a history that is trimmed up front: the chat path in full, overflow detection included
    body = orjson.dumps(openai_chat(8, model="small-1"))
    for i, reply in enumerate(replies):
        answer = one_answer(await exchange(port, http_request("/v1/chat/completions", body)))
        assert answer.status == reply.status
        assert orjson.loads(answer.body) == reply.data  # the provider's own body
        assert "x-trimgate-error" not in answer.headers
        assert "x-trimgate-exhausted" not in answer.headers
        assert len(stack.fake.requests) == i + 1  # never retried as an overflow
    for s in statuses:
        assert answered(stack, s) == 3
    # Anthropic's 529 through its SDK, without the SDK's own retries
    stack.fake.then(server_error(529))
    client = openai.AsyncOpenAI(api_key="sk-test", base_url=stack.base + "/v1", max_retries=0)
    try:
        with pytest.raises(openai.InternalServerError) as caught:
            await client.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
            )
    finally:
        await client.close()
    assert caught.value.status_code == 529
    assert len(stack.fake.requests) == len(replies) + 1
    await assert_nothing_left(before)


# --- unreachable providers ----------------------------------------------------------------


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port  # nothing listens there now


async def test_a_refused_port_is_a_fast_502(make_stack: MakeStack) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    stack = await make_stack(upstreams={"anthropic": {"provider": "anthropic", "base_url": url}})
    before = await warm(stack)
    body = orjson.dumps(anthropic_messages(1))
    for _ in range(REPEAT):
        started = time.monotonic()
        raw = await exchange(stack.server.port or 0, http_request("/v1/messages", body))
        assert time.monotonic() - started < 2
        assert_enveloped(one_answer(raw), 502, "anthropic")
    await assert_nothing_left(before)


def resolver_is_local() -> str | None:
    """None when name resolution never leaves this machine, else why it would."""
    try:
        lines = Path("/etc/resolv.conf").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "nameserver":
            try:
                if not ipaddress.ip_address(parts[1].split("%")[0]).is_loopback:
                    return f"the resolver would ask {parts[1]}, off this machine"
            except ValueError:
                return f"unreadable nameserver {parts[1]}"
    return None


@pytest.mark.parametrize(
    "host",
    [
        # fails in the resolver itself: a label longer than DNS allows is never sent
        "x" * 64 + ".invalid",
        # the reserved TLD: fails at the first server asked
        "nonexistent.invalid",
    ],
    ids=["label-too-long", "invalid-tld"],
)
async def test_an_unresolvable_host_is_a_fast_502(make_stack: MakeStack, host: str) -> None:
    if host == "nonexistent.invalid" and (why := resolver_is_local()) is not None:
        pytest.skip(f"loopback only: {why}")
    stack = await make_stack(
        server={"connect_timeout": 1.0},
        upstreams={"anthropic": {"provider": "anthropic", "base_url": f"http://{host}:9"}},
    )
    before = await warm(stack)
    body = orjson.dumps(anthropic_messages(1))
    for _ in range(2):
        started = time.monotonic()
        raw = await exchange(stack.server.port or 0, http_request("/v1/messages", body))
        assert time.monotonic() - started < 2
        assert_enveloped(one_answer(raw), 502, "anthropic")
    await assert_nothing_left(before)


# --- TLS ------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def tls_provider(fake: FakeProvider) -> AsyncIterator[TestServer]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(TLS / "cert.pem", TLS / "key.pem")
    server = TestServer(fake.app, host="127.0.0.1")
    await server.start_server(ssl=context)
    try:
        yield server
    finally:
        await server.close()


async def test_an_untrusted_certificate_is_a_502_and_no_request(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the system's trust store, whatever the environment adds to it
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    tls_fake = FakeProvider(lambda r: json_reply(anthropic_ok()))
    async with tls_provider(tls_fake) as server:
        url = f"https://localhost:{server.port}"
        stack = await make_stack(
            upstreams={"anthropic": {"provider": "anthropic", "base_url": url}}
        )
        before = await warm(stack)
        body = orjson.dumps(anthropic_messages(1))
        for _ in range(REPEAT):
            raw = await exchange(stack.server.port or 0, http_request("/v1/messages", body))
            error = assert_enveloped(one_answer(raw), 502, "anthropic")
            assert "unreachable" in error["error"]["message"]
        assert tls_fake.requests == []  # nothing was sent over an unverified connection
        await assert_nothing_left(before)


async def test_a_trusted_local_certificate_is_served(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch, upstream_client: str
) -> None:
    """The control for the case above: the same provider, its certificate trusted."""
    if upstream_client == "aiohttp":
        pytest.skip("aiohttp's client reads the trust store once, at import")
    monkeypatch.setenv("SSL_CERT_FILE", str(TLS / "cert.pem"))
    tls_fake = FakeProvider(lambda r: json_reply(anthropic_ok()))
    async with tls_provider(tls_fake) as server:
        url = f"https://localhost:{server.port}"
        stack = await make_stack(
            upstreams={"anthropic": {"provider": "anthropic", "base_url": url}}
        )
        resp = await stack.client.post("/v1/messages", json=anthropic_messages(1))
        assert resp.status == 200 and (await resp.json())["content"][0]["text"] == "ok"
        assert len(tls_fake.requests) == 1


# --- truncated gzip -------------------------------------------------------------------


@pytest.mark.parametrize("missing", ["half", "trailer"])
async def test_a_truncated_gzip_request_is_forwarded_untouched_once(
    make_stack: MakeStack, missing: str
) -> None:
    """A history trimgate would trim, gzip-compressed, its end cut off: the provider gets
    the body as it came (its verdict, not a body trimgate pieced together), once. With
    only the trailer missing, the whole JSON inflates, but unverified."""
    stack = await make_stack()
    before = await warm(stack)
    whole = gzip.compress(orjson.dumps(openai_chat(8, model="small-1")))
    cut = whole[: len(whole) // 2] if missing == "half" else whole[:-8]
    stack.fake.responder = lambda r: json_reply(
        {"error": {"message": "could not decode the body", "type": "invalid_request_error"}},
        status=400,
    )
    for i in range(REPEAT):
        raw = await exchange(
            stack.server.port or 0,
            http_request("/v1/chat/completions", cut, **{"Content-Encoding": "gzip"}),
        )
        answer = one_answer(raw)
        assert answer.status == 400  # the provider's own verdict on the body
        assert answer.headers["x-trimgate-skipped"] == "compressed-body"
        sent = stack.fake.requests[i]
        assert sent.body == cut and sent.headers["Content-Encoding"] == "gzip"
        assert len(stack.fake.requests) == i + 1
    await assert_nothing_left(before)


@pytest.mark.parametrize("status", [200, 400])
async def test_a_truncated_gzip_answer_is_relayed_as_it_came(
    make_stack: MakeStack, status: int
) -> None:
    stack = await make_stack()
    before = await warm(stack)
    data = openai_ok(10) if status == 200 else openai_overflow(2000, 1000).data
    whole = gzip.compress(orjson.dumps(data))
    cut = whole[: len(whole) - 12]  # the trailer and some deflate data are missing
    body = orjson.dumps(openai_chat(6, model="gpt-4o"))
    for i in range(REPEAT):
        stack.fake.then(Reply(status=status, body=cut, headers={"Content-Encoding": "gzip"}))
        raw = await exchange(
            stack.server.port or 0,
            http_request("/v1/chat/completions", body, **{"Accept-Encoding": "gzip"}),
        )
        answer = one_answer(raw)
        assert answer.status == status and answer.body == cut
        assert answer.headers["content-encoding"] == "gzip"
        assert len(stack.fake.requests) == i + 1  # an unreadable error is not an overflow
    await assert_nothing_left(before)


# --- the client leaves --------------------------------------------------------------------


async def test_a_client_that_leaves_while_uploading_costs_no_upstream_call(
    make_stack: MakeStack,
) -> None:
    stack = await make_stack()
    before = await warm(stack)
    body = orjson.dumps(openai_chat(4, size=20_000, model="gpt-4o"))
    request = http_request("/v1/chat/completions", body)
    for _ in range(REPEAT):
        _, writer = await asyncio.open_connection("127.0.0.1", stack.server.port or 0)
        writer.write(request[: len(request) // 3])
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.close()
        await writer.wait_closed()
    await asyncio.sleep(0.2)
    assert stack.fake.requests == []
    await assert_nothing_left(before)


async def test_a_client_that_leaves_while_the_provider_thinks_cancels_the_call(
    make_stack: MakeStack,
) -> None:
    stack = await make_stack()
    before = await warm(stack)
    for i in range(REPEAT):
        stack.fake.then(Reply(hang=True))
        _, writer = await asyncio.open_connection("127.0.0.1", stack.server.port or 0)
        writer.write(http_request("/v1/chat/completions", CHAT))
        await writer.drain()
        assert await count_reaches(lambda: len(stack.fake.requests), i + 1) == i + 1
        writer.close()
        await writer.wait_closed()
        # trimgate closed its connection to the provider: the provider's handler ends
        assert await count_reaches(lambda: stack.fake.cancelled, i + 1) == i + 1
    assert len(stack.fake.requests) == REPEAT
    await assert_nothing_left(before)


async def test_a_client_that_leaves_mid_stream_closes_the_providers_stream(
    make_stack: MakeStack,
) -> None:
    stack = await make_stack()
    before = await warm(stack)
    for i in range(REPEAT):
        stack.fake.then(sse_reply([*frames(60), b"data: [DONE]\n\n"], event_delay=0.05))
        reader, writer = await asyncio.open_connection("127.0.0.1", stack.server.port or 0)
        writer.write(http_request("/v1/chat/completions", STREAM))
        await writer.drain()
        got = b""
        async with asyncio.timeout(5):
            while b"w1 " not in got:
                got += await reader.read(65536)
        writer.close()
        await writer.wait_closed()
        # the provider's stream stops well before its 3 s: its connection was closed
        ended = await count_reaches(
            lambda: stack.fake.cancelled + stack.fake.broken, i + 1, within=2.0
        )
        assert ended == i + 1, (stack.fake.cancelled, stack.fake.broken)
    assert len(stack.fake.requests) == REPEAT
    await assert_nothing_left(before)


async def test_a_client_that_leaves_during_a_reactive_retry_sends_nothing_more(
    make_stack: MakeStack,
) -> None:
    stack = await make_stack()
    before = await warm(stack)
    body = orjson.dumps(openai_chat(6, model="gpt-4o"))
    for i in range(REPEAT):
        stack.fake.then(openai_overflow(2000, 1000), Reply(hang=True))
        _, writer = await asyncio.open_connection("127.0.0.1", stack.server.port or 0)
        writer.write(http_request("/v1/chat/completions", body))
        await writer.drain()
        assert await count_reaches(lambda: len(stack.fake.requests), 2 * (i + 1)) == 2 * (i + 1)
        writer.close()
        await writer.wait_closed()
        assert await count_reaches(lambda: stack.fake.cancelled, i + 1) == i + 1
    await asyncio.sleep(0.1)
    assert len(stack.fake.requests) == 2 * REPEAT  # the overflow and its one resend
    await assert_nothing_left(before)
