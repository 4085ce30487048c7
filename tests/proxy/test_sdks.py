"""The official openai and anthropic SDKs as callers, sync and async, streaming and not."""

from __future__ import annotations

import asyncio
from typing import Any

import anthropic
import openai
import orjson
import pytest

from tests.fakes import (
    FakeProvider,
    Recorded,
    Reply,
    anthropic_ok,
    anthropic_overflow,
    anthropic_text_stream,
    json_reply,
    openai_ok,
    openai_overflow,
    sse_data,
)
from tests.proxy.bodies import anthropic_messages, openai_chat
from tests.proxy.conftest import MakeStack, Stack

CRUMB = "[earlier turns omitted to fit the context window]"


def openai_stream(r: Recorded) -> Reply:
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    chunks = [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hel"}}]},
        {**base, "choices": [{"index": 0, "delta": {"content": "lo"}, "finish_reason": "stop"}]},
        {
            **base,
            "choices": [],
            "usage": {"prompt_tokens": 900, "completion_tokens": 2, "total_tokens": 902},
        },
    ]
    return Reply(events=[*sse_data(*chunks), b"data: [DONE]\n\n"], event_delay=0.01)


def anthropic_stream(r: Recorded) -> Reply:
    message: dict[str, Any] = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 700, "output_tokens": 1},
    }
    frames = anthropic_text_stream(message, "Hello", {"output_tokens": 2})
    return Reply(events=frames, event_delay=0.01)


def oa_async(stack: Stack) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=stack.base + "/v1", api_key="sk-test", max_retries=0)


def oa_sync(stack: Stack) -> openai.OpenAI:
    return openai.OpenAI(base_url=stack.base + "/v1", api_key="sk-test", max_retries=0)


def an_async(stack: Stack) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=stack.base, api_key="sk-ant-test", max_retries=0)


def an_sync(stack: Stack) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=stack.base, api_key="sk-ant-test", max_retries=0)


async def test_openai_async_trims_and_reports(make_stack: MakeStack) -> None:
    stack = await make_stack()
    async with oa_async(stack) as client:
        body = openai_chat(8, model="small-1")
        raw = await client.chat.completions.with_raw_response.create(
            model=body["model"],
            messages=body["messages"],
            extra_headers={"x-trimgate-agent": "sdk"},
        )
    completion = raw.parse()
    assert completion.choices[0].message.content == "ok"
    assert raw.headers["x-trimgate-trimmed"] == "true"
    assert raw.headers["x-trimgate-reason"] == "preemptive"
    sent = stack.fake.requests[0]
    assert sent.headers["Authorization"] == "Bearer sk-test"
    assert sent.json()["messages"][1]["content"] == CRUMB
    assert "x-trimgate-agent" not in {k.lower() for k in sent.headers}


async def test_openai_sync_in_a_thread(make_stack: MakeStack) -> None:
    stack = await make_stack()

    def call() -> tuple[str, str]:
        with oa_sync(stack) as client:
            body = openai_chat(8, model="small-1")
            raw = client.chat.completions.with_raw_response.create(
                model=body["model"], messages=body["messages"]
            )
            return raw.parse().choices[0].message.content or "", raw.headers["x-trimgate-trimmed"]

    assert await asyncio.to_thread(call) == ("ok", "true")


async def test_openai_async_stream(make_stack: MakeStack) -> None:
    stack = await make_stack(FakeProvider(openai_stream))
    async with oa_async(stack) as client:
        body = openai_chat(8, model="small-1")
        stream = await client.chat.completions.create(
            model=body["model"],
            messages=body["messages"],
            stream=True,
            stream_options={"include_usage": True},
        )
        text = ""
        usage = None
        async for chunk in stream:
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
            if chunk.usage:
                usage = chunk.usage.prompt_tokens
    assert text == "Hello" and usage == 900
    assert b"breadcrumb" not in stack.fake.requests[0].body
    assert CRUMB.encode() in stack.fake.requests[0].body


async def test_openai_sync_stream_in_a_thread(make_stack: MakeStack) -> None:
    stack = await make_stack(FakeProvider(openai_stream))

    def call() -> str:
        with oa_sync(stack) as client:
            body = openai_chat(2, model="gpt-4o")
            stream = client.chat.completions.create(
                model=body["model"], messages=body["messages"], stream=True
            )
            return "".join((c.choices[0].delta.content or "") for c in stream if c.choices)

    assert await asyncio.to_thread(call) == "Hello"


async def test_openai_reactive_retry_is_invisible_to_the_sdk(make_stack: MakeStack) -> None:
    fake = FakeProvider().then(openai_overflow(140_000, 128_000))
    stack = await make_stack(fake)
    async with oa_async(stack) as client:
        body = openai_chat(10, model="gpt-4o")
        raw = await client.chat.completions.with_raw_response.create(
            model=body["model"], messages=body["messages"]
        )
    assert raw.parse().choices[0].message.content == "ok"
    assert raw.headers["x-trimgate-reason"] == "reactive"
    assert len(fake.requests) == 2


async def test_openai_exhausted_raises_bad_request(make_stack: MakeStack) -> None:
    stack = await make_stack(FakeProvider(lambda r: openai_overflow(200_000, 128_000)))
    async with oa_async(stack) as client:
        with pytest.raises(openai.BadRequestError) as info:
            await client.chat.completions.create(
                model="gpt-4o", messages=openai_chat(1, model="gpt-4o")["messages"]
            )
    assert info.value.code == "context_length_exceeded"
    assert info.value.response.headers["x-trimgate-exhausted"] == "true"


async def test_openai_rate_limit_is_not_retried(make_stack: MakeStack) -> None:
    limit = json_reply(
        {
            "error": {
                "message": "Rate limit reached for gpt-4o on tokens per min (TPM): "
                "Limit 30000, Used 29000, Requested 5000.",
                "type": "tokens",
                "param": None,
                "code": "rate_limit_exceeded",
            }
        },
        status=429,
    )
    stack = await make_stack(FakeProvider(lambda r: limit))
    async with oa_async(stack) as client:
        with pytest.raises(openai.RateLimitError):
            await client.chat.completions.create(
                model="gpt-4o", messages=openai_chat(6, model="gpt-4o")["messages"]
            )
    assert len(stack.fake.requests) == 1


async def test_openai_unreachable_upstream_raises_server_error(make_stack: MakeStack) -> None:
    stack = await make_stack(
        upstreams={"openai": {"provider": "openai", "base_url": "http://127.0.0.1:9"}}
    )
    async with oa_async(stack) as client:
        with pytest.raises(openai.InternalServerError) as info:
            await client.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
            )
    assert info.value.status_code == 502


async def test_anthropic_async_trims(make_stack: MakeStack) -> None:
    stack = await make_stack(FakeProvider(lambda r: json_reply(anthropic_ok())))
    async with an_async(stack) as client:
        body = anthropic_messages(8, model="small-1")
        raw = await client.messages.with_raw_response.create(
            model=body["model"],
            max_tokens=64,
            system=body["system"],
            messages=body["messages"],
        )
    message = await raw.parse()
    assert message.content[0].type == "text"
    assert raw.headers["x-trimgate-trimmed"] == "true"
    sent = stack.fake.requests[0]
    # the SDK's credential header (x-api-key, or Bearer in newer SDKs) passes through
    assert "sk-ant-test" in (
        sent.headers.get("x-api-key", "") + sent.headers.get("Authorization", "")
    )
    assert sent.headers["anthropic-version"]
    forwarded = sent.json()["messages"]
    assert forwarded[0] == {"role": "user", "content": CRUMB}
    assert forwarded[1]["content"].startswith("task ")


async def test_anthropic_sync_in_a_thread(make_stack: MakeStack) -> None:
    stack = await make_stack(FakeProvider(lambda r: json_reply(anthropic_ok())))

    def call() -> str:
        with an_sync(stack) as client:
            body = anthropic_messages(3, model="claude-sonnet-4-5")
            raw = client.messages.with_raw_response.create(
                model=body["model"], max_tokens=64, messages=body["messages"]
            )
            return raw.headers["x-trimgate-trimmed"]

    assert await asyncio.to_thread(call) == "false"


async def test_anthropic_async_stream(make_stack: MakeStack) -> None:
    stack = await make_stack(FakeProvider(anthropic_stream))
    async with an_async(stack) as client:
        body = anthropic_messages(8, model="small-1")
        async with client.messages.stream(
            model=body["model"], max_tokens=64, messages=body["messages"]
        ) as stream:
            text = "".join([t async for t in stream.text_stream])
            final = await stream.get_final_message()
    assert text == "Hello" and final.usage.input_tokens == 700
    assert CRUMB.encode() in stack.fake.requests[0].body


async def test_anthropic_sync_stream_in_a_thread(make_stack: MakeStack) -> None:
    stack = await make_stack(FakeProvider(anthropic_stream))

    def call() -> str:
        with an_sync(stack) as client:
            body = anthropic_messages(2, model="claude-sonnet-4-5")
            with client.messages.stream(
                model=body["model"], max_tokens=64, messages=body["messages"]
            ) as stream:
                return "".join(stream.text_stream)

    assert await asyncio.to_thread(call) == "Hello"


async def test_anthropic_reactive_and_exhausted(make_stack: MakeStack) -> None:
    fake = FakeProvider(lambda r: json_reply(anthropic_ok())).then(
        anthropic_overflow(230_000, 200_000)
    )
    stack = await make_stack(fake)
    async with an_async(stack) as client:
        body = anthropic_messages(10, model="claude-sonnet-4-5")
        raw = await client.messages.with_raw_response.create(
            model=body["model"], max_tokens=64, messages=body["messages"]
        )
        assert raw.headers["x-trimgate-reason"] == "reactive"
        stack.fake.responder = lambda r: anthropic_overflow(230_000, 200_000)
        with pytest.raises(anthropic.BadRequestError) as info:
            await client.messages.create(
                model="claude-sonnet-4-5",
                max_tokens=64,
                messages=[{"role": "user", "content": "one lone turn"}],
            )
    assert "prompt is too long" in str(info.value)


@pytest.mark.parametrize("count", ["client", "trimmed"])
async def test_anthropic_count_tokens(make_stack: MakeStack, count: str) -> None:
    fake = FakeProvider(lambda r: json_reply({"input_tokens": 321}))
    stack = await make_stack(fake, trimming={"count_tokens": count})
    async with an_async(stack) as client:
        body = anthropic_messages(8, model="small-1")
        raw = await client.messages.with_raw_response.count_tokens(
            model=body["model"], messages=body["messages"]
        )
    assert (await raw.parse()).input_tokens == 321  # the provider's answer, as it came
    assert stack.fake.requests[0].path == "/v1/messages/count_tokens"
    # both figures either way: the client's body, and the body trimgate would forward
    assert int(raw.headers["x-trimgate-tokens-before"]) > int(
        raw.headers["x-trimgate-tokens-after"]
    )
    sent = orjson.loads(stack.fake.requests[0].body)
    if count == "client":
        assert raw.headers["x-trimgate-trimmed"] == "false"
        assert sent["messages"] == body["messages"]
    else:
        assert raw.headers["x-trimgate-trimmed"] == "true"
        assert CRUMB.encode() in stack.fake.requests[0].body
    # a count is not traffic: no prompt usage is counted from it
    assert stack.metric("trimgate_prompt_tokens_total", upstream="anthropic", model="small-*") == 0


async def test_openai_ok_usage_feeds_calibration(make_stack: MakeStack) -> None:
    stack = await make_stack(FakeProvider(lambda r: json_reply(openai_ok(2000))))
    async with oa_async(stack) as client:
        await client.chat.completions.create(
            model="gpt-4o", messages=openai_chat(6, model="gpt-4o")["messages"]
        )
    assert stack.metric("trimgate_estimate_calibration_ratio", model="gpt-4o") > 1.0


@pytest.mark.parametrize("budget", ["abc", "-5", "0", "12.5"])
async def test_openai_bad_budget_header_raises_bad_request_naming_it(
    make_stack: MakeStack, budget: str
) -> None:
    stack = await make_stack()
    async with oa_async(stack) as client:
        with pytest.raises(openai.BadRequestError) as info:
            await client.chat.completions.create(
                model="gpt-4o",
                messages=openai_chat(1, model="gpt-4o")["messages"],
                extra_headers={"x-trimgate-budget": budget},
            )
    assert "400 - x-trimgate-budget: must be a whole number of tokens" in info.value.message
    assert repr(budget) in info.value.message
    assert info.value.response.headers["x-trimgate-error"] == "true"
    assert stack.fake.requests == []  # never forwarded


async def test_anthropic_bogus_mode_header_raises_bad_request_naming_it(
    make_stack: MakeStack,
) -> None:
    stack = await make_stack()
    async with an_async(stack) as client:
        with pytest.raises(anthropic.BadRequestError) as info:
            await client.messages.create(
                model="claude-sonnet-4-5",
                max_tokens=10,
                messages=anthropic_messages(1)["messages"],
                extra_headers={"x-trimgate-mode": "bogus"},
            )
    body = info.value.body
    assert isinstance(body, dict)
    assert body["error"] == {
        "type": "invalid_request_error",
        "message": "x-trimgate-mode: must be one of enforce, shadow, off (got 'bogus')",
    }
    assert stack.fake.requests == []


async def test_bad_control_headers_get_the_gemini_envelope_and_good_ones_pass(
    make_stack: MakeStack,
) -> None:
    stack = await make_stack()
    resp = await stack.client.post(
        "/v1beta/models/gemini-2.5-flash:generateContent",
        json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
        headers={"x-trimgate-budget": "lots"},
    )
    assert resp.status == 400
    assert (await resp.json())["error"]["status"] == "INVALID_ARGUMENT"
    assert stack.fake.requests == []
    ok = await stack.client.post(  # any case of a mode, spaces and an empty budget are fine
        "/v1/chat/completions",
        json=openai_chat(1, model="gpt-4o"),
        headers={"x-trimgate-mode": " Shadow ", "x-trimgate-budget": ""},
    )
    assert ok.status == 200 and ok.headers["x-trimgate-shadow"] == "true"
