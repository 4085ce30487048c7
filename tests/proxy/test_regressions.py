"""Regressions found in review: each test names the failure it guards against."""

from __future__ import annotations

import asyncio
import contextlib
import gzip

import orjson
from aiohttp.test_utils import TestServer
from prometheus_client import CollectorRegistry

from tests.builders import conv, msg
from tests.fakes import FakeProvider, Reply, json_reply, openai_ok, openai_overflow, sse_data
from tests.proxy.bodies import anthropic_messages, openai_chat, responses_input
from tests.proxy.conftest import MakeStack, config_for, raw_request
from trimgate.history import Role
from trimgate.proxy import h1
from trimgate.proxy.app import PROXY, create_app
from trimgate.proxy.signals import attribution
from trimgate.trimming.cap import cap_messages


async def test_a_retried_gzip_request_is_sent_uncompressed_without_the_gzip_label(
    make_stack: MakeStack,
) -> None:
    fake = FakeProvider().then(openai_overflow(150_000, 128_000))
    stack = await make_stack(fake)
    packed = gzip.compress(orjson.dumps(openai_chat(10, model="gpt-4o")))
    resp = await stack.client.post(
        "/v1/chat/completions", data=packed, headers={"Content-Encoding": "gzip"}
    )
    assert resp.status == 200 and resp.headers["x-trimgate-retries"] == "1"
    first, second = fake.requests
    assert first.body == packed and first.headers["Content-Encoding"] == "gzip"
    assert "Content-Encoding" not in second.headers
    assert orjson.loads(second.body)["messages"]


async def raw_get(port: int, target: bytes) -> bytes:
    return await raw_request(
        port, b"GET " + target + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )


async def test_paths_cannot_climb_out_of_the_base_path(make_stack: MakeStack) -> None:
    stack = await make_stack()
    port = stack.server.port
    assert port is not None
    for target in (
        b"/v1/%2e%2e/%2e%2e/x",
        b"/v1/../x",
        b"/v1/./x",
        b"//v1/models",
        b"/groq/..%2F..%2Fsecret",
    ):
        answer = await raw_get(port, target)
        assert answer.startswith(b"HTTP/1.1 400"), target
    assert stack.fake.requests == []


async def test_encoded_paths_and_queries_pass_through_as_sent(make_stack: MakeStack) -> None:
    stack = await make_stack()
    port = stack.server.port
    assert port is not None
    await raw_get(port, b"/v1/models/meta-llama%2FLlama-3?a=%23&b=%2520")
    (rec,) = stack.fake.requests
    assert rec.path == "/v1/models/meta-llama/Llama-3"  # the fake decodes; sent encoded:
    assert rec.raw_path == "/v1/models/meta-llama%2FLlama-3?a=%23&b=%2520"


def test_the_message_cap_never_leaves_only_the_anchor() -> None:
    ids = ("c0", "c1", "c2")
    calls = msg("acalls", Role.ASSISTANT, calls=ids, other_content=False)
    results = [
        msg("t r", Role.TOOL, results=(c,), anonymous_results=False, other_content=False)
        for c in ids
    ]
    c = conv("sys", "u first question", "a1", "u NEWEST", [calls, *results])
    kept = cap_messages(c.messages, 4).kept
    assert [m.index for m in kept] == [0, 1, 3]  # system, anchor, the newest question


async def test_a_responses_overflow_after_lifecycle_events_is_recognised(
    make_stack: MakeStack,
) -> None:
    failed = sse_data(
        {"type": "response.created", "response": {"id": "r", "status": "in_progress"}},
        {"type": "response.in_progress", "response": {"id": "r", "status": "in_progress"}},
        {
            "type": "response.failed",
            "response": {
                "id": "r",
                "status": "failed",
                "error": {
                    "code": "context_length_exceeded",
                    "message": "Your input exceeds the context window of this model. "
                    "Please adjust your input and try again.",
                },
            },
        },
    )
    ok = sse_data({"type": "response.completed", "response": {"usage": {"input_tokens": 9}}})
    fake = FakeProvider().then(Reply(events=failed, event_delay=0.05), Reply(events=ok))
    stack = await make_stack(fake)
    body = {**responses_input(8, model="gpt-4o"), "stream": True}
    resp = await stack.client.post("/v1/responses", json=body)
    text = await resp.text()
    assert resp.headers["x-trimgate-retries"] == "1" and len(fake.requests) == 2
    assert "response.completed" in text and "response.failed" not in text


async def test_event_model_is_bounded(make_stack: MakeStack) -> None:
    stack = await make_stack()
    await stack.client.post(
        "/v1/chat/completions",
        json=openai_chat(8, model="x" * 70_000),
        headers={"x-trimgate-budget": "1000"},
    )
    (event,) = stack.events()
    assert len(event["model"]) <= 200


async def test_unreadable_encodings_are_not_requested_on_chat_paths(make_stack: MakeStack) -> None:
    packed = gzip.compress(orjson.dumps(openai_ok(1600)))
    stack = await make_stack(
        FakeProvider(lambda r: Reply(body=packed, headers={"Content-Encoding": "gzip"}))
    )
    resp = await stack.client.post(
        "/v1/chat/completions",
        json=openai_chat(6, model="gpt-4o"),
        headers={"Accept-Encoding": "gzip, deflate, br, zstd"},
        auto_decompress=False,
    )
    assert await resp.read() == packed  # relayed compressed, as sent
    assert stack.fake.requests[0].headers["Accept-Encoding"] == "gzip, deflate"
    # ... and the gzip answer's usage was read for calibration
    assert stack.metric("trimgate_estimate_calibration_ratio", model="gpt-4o") > 1.0
    await stack.client.get("/v1/models", headers={"Accept-Encoding": "br"})
    assert stack.fake.requests[1].headers["Accept-Encoding"] == "br"  # pass-through untouched


async def test_gemini_uploads_go_to_the_gemini_upstream(make_stack: MakeStack) -> None:
    fake = FakeProvider(lambda r: json_reply({"file": {}}))
    stack = await make_stack(
        fake,
        upstreams={"gemini": {"provider": "gemini", "base_url": "http://127.0.0.1:9"}},
    )
    resp = await stack.client.post("/upload/v1beta/files", data=b"x")
    assert resp.status == 502 and fake.requests == []  # routed to gemini (unreachable here)


async def test_both_framings_from_the_provider_never_desync_the_client() -> None:
    """Content-Length and chunked together: the coding frames the body, and the client
    must not be promised the length (its next answer would be read as this body)."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
                while await reader.readuntil(b"\r\n\r\n"):
                    writer.write(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n"
                        b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
                    )
                    await writer.drain()
        finally:
            writer.close()

    upstream = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = upstream.sockets[0].getsockname()[1]
    app = create_app(config_for(f"http://127.0.0.1:{port}"), registry=CollectorRegistry())
    proxy = TestServer(app, host="127.0.0.1")
    await proxy.start_server()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n" * 2)
        got = b""
        for _ in range(20):  # bounded: both answers, chunked, within a few reads
            if got.count(b"0\r\n\r\n") >= 2:
                break
            got += await asyncio.wait_for(reader.read(65536), 2)
        writer.close()
        await writer.wait_closed()
        assert got.count(b"HTTP/1.1 200") == 2 and b"Content-Length: 100" not in got
    finally:
        await proxy.close()
        upstream.close()
        await upstream.wait_closed()


async def test_a_client_gone_between_reactive_retries_frees_the_upstream_connection() -> None:
    error = {"type": "error", "error": {"type": "invalid_request_error",
             "message": "prompt is too long: 250000 tokens > 200000 maximum"}}  # fmt: skip
    # an overflow as the first event of a stream that stays open
    frames = [*sse_data(error, event="error"), b": still here\n\n"]
    fake = FakeProvider(lambda _: Reply(events=frames, event_delay=5.0))
    fake_server = TestServer(fake.app, host="127.0.0.1")
    await fake_server.start_server()
    slept = asyncio.Event()

    async def sleep(_: float) -> None:  # where the retry loop yields between attempts
        slept.set()
        await asyncio.sleep(5)

    config = config_for(str(fake_server.make_url("")).rstrip("/"), server={"max_connections": 2})
    app = create_app(config, registry=CollectorRegistry(), sleep=sleep)
    proxy = TestServer(app, host="127.0.0.1")  # handler_cancellation, as `serve` runs it
    await proxy.start_server()
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        body = orjson.dumps(anthropic_messages(8, model="claude-sonnet-4-5", stream=True))
        writer.write(
            b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
            % (len(body), body)
        )
        await asyncio.wait_for(slept.wait(), 5)
        writer.close()  # the handler is cancelled inside the retry loop's sleep
        await writer.wait_closed()
        client = app[PROXY]._client()
        assert isinstance(client, h1.Client)
        for _ in range(50):  # bounded: the cancellation lands within a few loop turns
            if not client._open:
                break
            await asyncio.sleep(0.02)
        assert not client._open  # the half-read overflow stream was closed
        assert client._slots is not None and client._slots._value == 2  # both slots free
    finally:
        await proxy.close()
        await fake_server.close()


def test_a_non_utf8_attribution_header_does_not_cost_the_request_line() -> None:
    # undecodable header bytes reach trimgate as surrogates, which orjson refuses: the
    # request's log line (and the event) would fail to serialise
    fields = attribution({"x-trimgate-session": "ab\udcffcd"})
    assert orjson.loads(orjson.dumps(fields))["session_id"] == "ab\ufffdcd"
