"""Real client libraries through trimgate to a loopback fake provider.

The cheap ones (the ``test`` extra installs them): google-genai (the Gemini SDK, on
both API versions it can be given), langchain-openai and langchain-anthropic (the
most common agent framework, over the two SDKs). Each: a plain call, a streamed
call, and a trim the caller can see. The heavy rest (openai-agents, pydantic-ai,
litellm) runs from ``scripts/libraries``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import httpx
import orjson
import pytest
from google import genai
from google.genai import types as genai_types
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

from tests.fakes import (
    FakeProvider,
    Recorded,
    Reply,
    anthropic_ok,
    anthropic_text_stream,
    json_reply,
    openai_ok,
    sse_data,
)
from tests.proxy.bodies import gemini_contents
from tests.proxy.conftest import MakeStack, Stack

CRUMB = "[earlier turns omitted to fit the context window]"


# --- a fake that answers in the shape of whichever API was called -------------------


def _openai_stream() -> Reply:
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    chunks = [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "o"}}]},
        {**base, "choices": [{"index": 0, "delta": {"content": "k"}, "finish_reason": "stop"}]},
        {
            **base,
            "choices": [],
            "usage": {"prompt_tokens": 600, "completion_tokens": 2, "total_tokens": 602},
        },
    ]
    return Reply(events=[*sse_data(*chunks), b"data: [DONE]\n\n"])


def _anthropic_stream() -> Reply:
    message = {**anthropic_ok(600), "content": [], "stop_reason": None}
    return Reply(events=anthropic_text_stream(message, "ok", {"output_tokens": 1}))


def _gemini_ok() -> dict[str, Any]:
    return {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"text": "ok"}]},
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 600,
            "candidatesTokenCount": 1,
            "totalTokenCount": 601,
        },
        "modelVersion": "small-1",
    }


def any_api(r: Recorded) -> Reply:
    """A 200 in the shape of the API the path names, streamed when asked."""
    if r.path.endswith(":streamGenerateContent"):
        return Reply(events=sse_data(_gemini_ok()))
    if r.path.endswith(":generateContent"):
        return json_reply(_gemini_ok())
    streamed = bool(r.json().get("stream"))
    if r.path == "/v1/messages":
        return _anthropic_stream() if streamed else json_reply(anthropic_ok(600))
    return _openai_stream() if streamed else json_reply(openai_ok(600))


def history(turns: int, size: int = 800) -> list[BaseMessage]:
    """A long plain-text chat for langchain: enough to overflow the 1000-token `small-*`."""
    out: list[BaseMessage] = [SystemMessage("You are a careful agent.")]
    for t in range(turns):
        out.append(HumanMessage(f"task {t}: " + "u" * size))
        if t < turns - 1:
            out.append(AIMessage(f"done {t}"))
    return out


def assert_trimmed(stack: Stack, provider: str) -> None:
    """The last request was trimmed: the fake got the breadcrumb, the event says so."""
    sent = stack.fake.requests[-1]
    assert CRUMB.encode() in sent.body and b"task 0:" not in sent.body
    assert b"task 7:" in sent.body  # the newest turn always stays
    event = stack.events()[-1]
    assert event["provider"] == provider and event["reason"] == "preemptive"
    assert event["dropped_turns"] > 0


# --- google-genai --------------------------------------------------------------------


@pytest.fixture(params=["aiohttp", "httpx"])
async def transport(request: pytest.FixtureRequest) -> AsyncIterator[dict[str, Any]]:
    """google-genai's async transport: aiohttp (its choice when aiohttp is installed, as
    it is beside trimgate) or httpx. Given as a client, because google-genai's own
    aiohttp session subclasses ClientSession, which aiohttp deprecates (a warning)."""
    if request.param == "aiohttp":
        async with aiohttp.ClientSession() as session:
            yield {"aiohttp_client": session}
    else:
        async with httpx.AsyncClient() as client:
            yield {"httpx_async_client": client}


def gemini_client(stack: Stack, api_version: str, transport: dict[str, Any]) -> genai.Client:
    return genai.Client(
        api_key="gm-test",
        http_options=genai_types.HttpOptions(
            base_url=stack.base, api_version=api_version, **transport
        ),
    )


def gemini_history() -> list[genai_types.Content]:
    return [genai_types.Content.model_validate(c) for c in gemini_contents(8)["contents"]]


@pytest.mark.parametrize("api_version", ["v1beta", "v1"])
async def test_google_genai_generate_content_is_trimmed(
    make_stack: MakeStack, api_version: str, transport: dict[str, Any]
) -> None:
    stack = await make_stack(FakeProvider(any_api))
    client = gemini_client(stack, api_version, transport)
    answer = await client.aio.models.generate_content(model="small-1", contents=gemini_history())
    assert answer.text == "ok"
    assert answer.sdk_http_response is not None and answer.sdk_http_response.headers is not None
    headers = {k.lower(): v for k, v in answer.sdk_http_response.headers.items()}
    assert headers["x-trimgate-trimmed"] == "true"
    assert int(headers["x-trimgate-tokens-after"]) <= 1000
    assert stack.fake.requests[-1].path == f"/{api_version}/models/small-1:generateContent"
    assert stack.fake.requests[-1].headers["x-goog-api-key"] == "gm-test"
    assert_trimmed(stack, "gemini")


async def test_google_genai_stream_is_trimmed(
    make_stack: MakeStack, transport: dict[str, Any]
) -> None:
    stack = await make_stack(FakeProvider(any_api))
    client = gemini_client(stack, "v1beta", transport)
    texts = [
        chunk.text
        async for chunk in await client.aio.models.generate_content_stream(
            model="small-1", contents=gemini_history()
        )
    ]
    assert "".join(t or "" for t in texts) == "ok"
    rec = stack.fake.requests[-1]
    assert rec.path == "/v1beta/models/small-1:streamGenerateContent" and "alt=sse" in rec.query
    assert_trimmed(stack, "gemini")


async def test_google_genai_count_tokens_counts_the_clients_body(
    make_stack: MakeStack, transport: dict[str, Any]
) -> None:
    # trimming.count_tokens defaults to "client": the count is of what the client holds
    stack = await make_stack(FakeProvider(lambda r: json_reply({"totalTokens": 321})))
    client = gemini_client(stack, "v1beta", transport)
    history = gemini_history()
    counted = await client.aio.models.count_tokens(model="small-1", contents=history)
    assert counted.total_tokens == 321
    sent = stack.fake.requests[-1].body
    assert CRUMB.encode() not in sent
    assert len(orjson.loads(sent)["contents"]) == len(history)


async def test_google_genai_count_tokens_counts_the_trimmed_body_when_asked(
    make_stack: MakeStack, transport: dict[str, Any]
) -> None:
    stack = await make_stack(
        FakeProvider(lambda r: json_reply({"totalTokens": 321})),
        trimming={"count_tokens": "trimmed"},
    )
    client = gemini_client(stack, "v1beta", transport)
    counted = await client.aio.models.count_tokens(model="small-1", contents=gemini_history())
    assert counted.total_tokens == 321
    assert CRUMB.encode() in stack.fake.requests[-1].body


# --- langchain-openai ----------------------------------------------------------------


def lc_openai(stack: Stack, **extra: Any) -> ChatOpenAI:
    return ChatOpenAI(
        model="small-1",
        base_url=stack.base + "/v1",
        api_key=SecretStr("sk-test"),
        max_retries=0,
        include_response_headers=True,
        **extra,
    )


async def test_langchain_openai_invoke_is_trimmed(make_stack: MakeStack) -> None:
    stack = await make_stack(FakeProvider(any_api))
    answer = await lc_openai(stack).ainvoke(history(8))
    assert answer.content == "ok"
    headers = answer.response_metadata["headers"]
    assert headers["x-trimgate-trimmed"] == "true"
    assert headers["x-trimgate-reason"] == "preemptive"
    assert stack.fake.requests[-1].headers["Authorization"] == "Bearer sk-test"
    assert_trimmed(stack, "openai")


async def test_langchain_openai_stream_is_trimmed(make_stack: MakeStack) -> None:
    stack = await make_stack(FakeProvider(any_api))
    chunks = [c async for c in lc_openai(stack, stream_usage=True).astream(history(8))]
    assert "".join(str(c.content) for c in chunks) == "ok"
    assert any(c.usage_metadata and c.usage_metadata["input_tokens"] == 600 for c in chunks)
    assert stack.fake.requests[-1].json()["stream"] is True
    assert_trimmed(stack, "openai")


async def test_langchain_openai_reactive_retry_is_invisible(make_stack: MakeStack) -> None:
    from tests.fakes import openai_overflow

    fake = FakeProvider(any_api).then(openai_overflow(150_000, 128_000))
    stack = await make_stack(fake)
    chat = ChatOpenAI(
        model="gpt-4o",
        base_url=stack.base + "/v1",
        api_key=SecretStr("sk-test"),
        max_retries=0,
        include_response_headers=True,
    )
    answer = await chat.ainvoke(history(10))
    assert answer.content == "ok"
    assert answer.response_metadata["headers"]["x-trimgate-reason"] == "reactive"
    assert len(stack.fake.requests) == 2


# --- langchain-anthropic -------------------------------------------------------------


def lc_anthropic(stack: Stack, **extra: Any) -> ChatAnthropic:
    return ChatAnthropic(
        model_name="small-1",
        base_url=stack.base,
        api_key=SecretStr("sk-ant-test"),
        max_tokens_to_sample=100,
        max_retries=0,
        **extra,
    )


async def test_langchain_anthropic_invoke_is_trimmed(make_stack: MakeStack) -> None:
    stack = await make_stack(FakeProvider(any_api))
    answer = await lc_anthropic(stack).ainvoke(history(8))
    assert answer.content == "ok" or answer.content == [{"type": "text", "text": "ok"}]
    sent = stack.fake.requests[-1]
    assert sent.path == "/v1/messages"
    # the key reaches the provider as the SDK sends it (x-api-key, or a bearer token)
    given = sent.headers.get("x-api-key") or sent.headers.get("Authorization") or ""
    assert given.removeprefix("Bearer ") == "sk-ant-test"
    assert sent.json()["system"] == "You are a careful agent."
    assert_trimmed(stack, "anthropic")


async def test_langchain_anthropic_stream_is_trimmed(make_stack: MakeStack) -> None:
    stack = await make_stack(FakeProvider(any_api))
    chunks = [c async for c in lc_anthropic(stack).astream(history(8))]
    text = "".join(
        c.content
        if isinstance(c.content, str)
        else "".join(str(p.get("text", "")) for p in c.content if isinstance(p, dict))
        for c in chunks
    )
    assert text == "ok"
    assert stack.fake.requests[-1].json()["stream"] is True
    assert_trimmed(stack, "anthropic")
    labels = {"upstream": "anthropic", "model": "small-*", "reason": "preemptive"}
    assert stack.metric("trimgate_trims_total", **labels) == 1.0
