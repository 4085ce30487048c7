"""Prompt-cache usage: read from every format's answers, JSON and streams, counted per model."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fakes import (
    FakeProvider,
    Recorded,
    Reply,
    anthropic_cached_ok,
    anthropic_cached_stream,
    gemini_cached_ok,
    json_reply,
    openai_cached_ok,
    openai_cached_stream,
    responses_cached_ok,
    responses_cached_stream,
    sse_data,
    sse_reply,
)
from tests.proxy.bodies import anthropic_messages, gemini_contents, openai_chat, responses_input
from tests.proxy.conftest import MakeStack, Stack
from trimgate.providers.registry import CODECS
from trimgate.proxy.usage import UsageSniffer

# --- reading: every format, JSON and streams, cut anywhere ---------------------------

STREAMS: list[tuple[str, bytes, tuple[int, int]]] = [
    ("openai", b"".join(openai_cached_stream(2006, 1920)), (2006, 1920)),
    ("openai-responses", b"".join(responses_cached_stream(3000, 2048)), (3000, 2048)),
    # prompt = fresh + cache read + cache written; cached = cache read
    ("anthropic", b"".join(anthropic_cached_stream(50, 1800, 200)), (2050, 1800)),
    (
        "gemini",
        b"".join(
            sse_data(
                {**gemini_cached_ok(900, 0), "usageMetadata": {"promptTokenCount": 900}},
                gemini_cached_ok(1500, 1024),
            )
        ),
        (1500, 1024),
    ),
]
ANSWERS: list[tuple[str, Any, tuple[int, int]]] = [
    ("openai", openai_cached_ok(2006, 1920), (2006, 1920)),
    ("openai-responses", responses_cached_ok(3000, 2048), (3000, 2048)),
    ("anthropic", anthropic_cached_ok(50, 1800, 200), (2050, 1800)),
    ("gemini", gemini_cached_ok(1500, 1024), (1500, 1024)),
    ("gemini", [gemini_cached_ok(10, 0), gemini_cached_ok(1500, 1024)], (1500, 1024)),
]


def fed(wire: str, data: bytes, ctype: str, cuts: list[int]) -> tuple[int, int] | None:
    s = UsageSniffer(CODECS[wire], ctype)
    start = 0
    for cut in cuts:
        s.feed(data[start:cut])
        start = cut
    s.feed(data[start:])
    return s.usage


@pytest.mark.parametrize(("wire", "stream", "usage"), STREAMS)
def test_stream_usage_whole_equals_byte_by_byte(
    wire: str, stream: bytes, usage: tuple[int, int]
) -> None:
    whole = fed(wire, stream, "text/event-stream", [])
    assert whole == usage
    assert fed(wire, stream, "text/event-stream", list(range(1, len(stream)))) == whole


@pytest.mark.parametrize(("wire", "answer", "usage"), ANSWERS)
def test_json_usage_whole_equals_byte_by_byte(
    wire: str, answer: Any, usage: tuple[int, int]
) -> None:
    body = orjson.dumps(answer)
    assert fed(wire, body, "application/json", []) == usage
    assert fed(wire, body, "application/json", list(range(1, len(body)))) == usage
    assert CODECS[wire].usage(answer) == usage[0]  # what calibration reads: unchanged


@given(st.data())
@settings(max_examples=60, deadline=None)
def test_any_cuts_give_the_same_usage(data: st.DataObject) -> None:
    wire, stream, usage = data.draw(st.sampled_from(STREAMS))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=12)))
    assert fed(wire, stream, "text/event-stream", cuts) == usage


def test_usage_without_cache_details_reads_zero_cached() -> None:
    assert CODECS["openai"].prompt_usage({"usage": {"prompt_tokens": 7}}) == (7, 0)
    assert CODECS["openai"].prompt_usage(
        {"usage": {"prompt_tokens": 7, "prompt_tokens_details": None}}
    ) == (7, 0)
    assert CODECS["openai-responses"].prompt_usage({"usage": {"input_tokens": 5}}) == (5, 0)
    assert CODECS["anthropic"].prompt_usage(
        {"usage": {"input_tokens": 12, "cache_read_input_tokens": None}}
    ) == (12, 0)
    assert CODECS["gemini"].prompt_usage({"usageMetadata": {"promptTokenCount": 9}}) == (9, 0)
    assert CODECS["gemini"].prompt_usage(
        {"usage_metadata": {"prompt_token_count": 9, "cached_content_token_count": 4}}
    ) == (9, 4)


def test_anthropic_message_delta_restates_only_when_whole() -> None:
    codec = CODECS["anthropic"]
    whole: dict[str, Any] = {
        "type": "message_delta",
        "delta": {"stop_reason": "end_turn"},
        "usage": {
            "input_tokens": 60,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 1800,
            "output_tokens": 9,
        },
    }
    assert codec.stream_prompt_usage(orjson.dumps(whole).decode()) == (1860, 1800)
    partial = {**whole, "usage": {"input_tokens": 60, "output_tokens": 9}}
    assert codec.stream_prompt_usage(orjson.dumps(partial).decode()) is None
    nulls = {**whole, "usage": {**whole["usage"], "cache_read_input_tokens": None}}
    assert codec.stream_prompt_usage(orjson.dumps(nulls).decode()) is None


# --- through the proxy, with the official SDKs --------------------------------------


def counted(stack: Stack, upstream: str, model: str) -> tuple[float, float, float, float]:
    labels = {"upstream": upstream, "model": model}
    return (
        stack.metric("trimgate_prompt_tokens_total", **labels),
        stack.metric("trimgate_prompt_cache_read_tokens_total", **labels),
        stack.metric("trimgate_trimmed_prompt_tokens_total", **labels),
        stack.metric("trimgate_trimmed_prompt_cache_read_tokens_total", **labels),
    )


def by_stream(json_answer: Any, stream: list[bytes]) -> Any:
    def respond(r: Recorded) -> Reply:
        return sse_reply(stream) if r.json().get("stream") else json_reply(json_answer)

    return respond


async def test_openai_chat_cached_usage_json_and_stream(make_stack: MakeStack) -> None:
    fake = FakeProvider(by_stream(openai_cached_ok(2006, 1920), openai_cached_stream(2006, 1920)))
    stack = await make_stack(fake)
    client = openai.AsyncOpenAI(base_url=stack.base + "/v1", api_key="sk-test", max_retries=0)
    async with client:
        # untrimmed: counted in all traffic only
        done = await client.chat.completions.create(
            model="small-1", messages=openai_chat(1, size=20)["messages"]
        )
        assert done.usage is not None and done.usage.prompt_tokens == 2006  # never rewritten
        # trimmed, streamed: counted in both pairs
        stream = await client.chat.completions.create(
            model="small-1",
            messages=openai_chat(8)["messages"],
            stream=True,
            stream_options={"include_usage": True},
        )
        last = None
        async for chunk in stream:
            last = chunk
        assert last is not None and last.usage is not None
        assert last.usage.prompt_tokens_details is not None
        assert last.usage.prompt_tokens_details.cached_tokens == 1920
    assert counted(stack, "openai", "small-*") == (4012, 3840, 2006, 1920)


async def test_openai_responses_cached_usage(make_stack: MakeStack) -> None:
    fake = FakeProvider(
        by_stream(responses_cached_ok(3000, 2048), responses_cached_stream(3000, 2048))
    )
    stack = await make_stack(fake)
    client = openai.AsyncOpenAI(base_url=stack.base + "/v1", api_key="sk-test", max_retries=0)
    async with client:
        done = await client.responses.create(model="small-1", input=responses_input(8)["input"])
        assert done.usage is not None and done.usage.input_tokens == 3000
        stream = await client.responses.create(
            model="small-1", input=responses_input(1, size=20)["input"], stream=True
        )
        async for _ in stream:
            pass
    assert counted(stack, "openai", "small-*") == (6000, 4096, 3000, 2048)


async def test_anthropic_cached_usage_json_and_stream(make_stack: MakeStack) -> None:
    fake = FakeProvider(
        by_stream(anthropic_cached_ok(50, 1800, 200), anthropic_cached_stream(50, 1800, 200))
    )
    stack = await make_stack(fake)
    client = anthropic.AsyncAnthropic(base_url=stack.base, api_key="sk-ant-test", max_retries=0)
    async with client:
        done = await client.messages.create(
            model="small-1", max_tokens=16, messages=anthropic_messages(8)["messages"]
        )
        assert done.usage.cache_read_input_tokens == 1800  # the provider's usage, untouched
        async with client.messages.stream(
            model="small-1", max_tokens=16, messages=anthropic_messages(1, size=20)["messages"]
        ) as stream:
            final = await stream.get_final_message()
        assert final.usage.input_tokens == 50 and final.usage.cache_read_input_tokens == 1800
    # each answer counted once (message_start and message_delta state the same prompt)
    assert counted(stack, "anthropic", "small-*") == (4100, 3600, 2050, 1800)


async def test_gemini_cached_usage(make_stack: MakeStack) -> None:
    stack = await make_stack(FakeProvider(lambda r: json_reply(gemini_cached_ok(1500, 1024))))
    resp = await stack.client.post(
        "/v1beta/models/small-1:generateContent", json=gemini_contents(8)
    )
    assert resp.status == 200 and resp.headers["x-trimgate-trimmed"] == "true"
    assert (await resp.json())["usageMetadata"]["cachedContentTokenCount"] == 1024
    assert counted(stack, "gemini", "small-*") == (1500, 1024, 1500, 1024)


async def test_shadowed_trims_are_not_trimmed_traffic(make_stack: MakeStack) -> None:
    stack = await make_stack(
        FakeProvider(lambda r: json_reply(openai_cached_ok(500, 100))), trimming={"mode": "shadow"}
    )
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(8))
    assert resp.status == 200 and resp.headers["x-trimgate-trimmed"] == "true"
    assert counted(stack, "openai", "small-*") == (500, 100, 0, 0)


async def test_errors_and_missing_usage_count_nothing(make_stack: MakeStack) -> None:
    fake = FakeProvider(lambda r: json_reply({"error": {"message": "nope"}}, status=429))
    stack = await make_stack(fake)
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(2, size=20))
    assert resp.status == 429
    fake.responder = lambda r: json_reply({"choices": []})
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(2, size=20))
    assert resp.status == 200
    assert counted(stack, "openai", "small-*") == (0, 0, 0, 0)
