"""Cache-stable cuts, the anchor and compaction heads end to end: the official SDKs as
clients of a growing conversation, the fake provider recording what trimgate forwards."""

from __future__ import annotations

import itertools
import logging
from typing import Any

import anthropic
import openai
import orjson
import pytest

from tests.fakes import FakeProvider, anthropic_ok, anthropic_overflow, json_reply, openai_ok
from tests.proxy.conftest import MakeStack
from tests.proxy.test_sdks import CRUMB, an_async, anthropic_stream, oa_async, openai_stream

DEFAULTS = {"cut_step": 0.2, "keep_anchor": True, "anchor_max_share": 0.25}
MODELS = [{"match": "mid-*", "context_window": 4000}]
PROMPT = "<environment_context><cwd>/repo</cwd></environment_context> fix the parser"


def grow(history: list[Any], n: int) -> None:
    history.append({"role": "assistant", "content": f"answer {n}: " + "a" * 300})
    history.append({"role": "user", "content": f"question {n}: " + "q" * 300})


def cut_of(forwarded: list[dict[str, Any]]) -> int:
    """Where the breadcrumb stands (-1: none)."""
    return next((i for i, m in enumerate(forwarded) if m.get("content") == CRUMB), -1)


async def test_openai_growing_chat_keeps_its_forwarded_prefix(make_stack: MakeStack) -> None:
    stack = await make_stack(
        FakeProvider(lambda r: json_reply(openai_ok(900))),
        trimming={**DEFAULTS, "calibrate": False},  # the fake's counts are not real ones
        models=MODELS,
    )
    history: list[Any] = [
        {"role": "system", "content": "You are a careful agent."},
        {"role": "user", "content": PROMPT},
    ]
    async with oa_async(stack) as client:
        for n in range(60):
            grow(history, n)
            stream = n % 2 == 1
            if stream:
                stack.fake.responder = openai_stream
                chunks = await client.chat.completions.create(
                    model="mid-1",
                    messages=history,
                    stream=True,
                )
                async for _ in chunks:
                    pass
            else:
                stack.fake.responder = lambda r: json_reply(openai_ok(900))
                raw = await client.chat.completions.with_raw_response.create(
                    model="mid-1",
                    messages=history,
                )
                assert int(raw.headers["x-trimgate-anchor-tokens"]) > 0
    sent = [r.json()["messages"] for r in stack.fake.requests]
    trimmed = [s for s in sent if cut_of(s) >= 0]
    assert len(trimmed) > 20
    moves = 0
    for before, after in itertools.pairwise(trimmed):
        assert after[:2] == history[:2]  # system and anchor, untouched
        assert cut_of(after) == 2
        if after[: len(before)] != before:  # the cut moved: a new cached prefix
            moves += 1
    assert moves <= len(trimmed) // 3  # minimal cuts would move on every request


async def test_anthropic_stream_with_a_reactive_retry_keeps_the_anchor(
    make_stack: MakeStack, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="trimgate")
    fake = FakeProvider(anthropic_stream).then(anthropic_overflow(5000, 4000))
    stack = await make_stack(fake, trimming=DEFAULTS, models=MODELS)
    messages: list[dict[str, Any]] = [{"role": "user", "content": PROMPT}]
    for n in range(6):
        messages.append({"role": "assistant", "content": f"answer {n}: " + "a" * 400})
        messages.append({"role": "user", "content": f"question {n}: " + "q" * 400})
    async with (
        an_async(stack) as client,
        client.messages.stream(
            model="mid-1",
            max_tokens=64,
            messages=messages,  # type: ignore[arg-type]
        ) as stream,
    ):
        text = "".join([t async for t in stream.text_stream])
        headers = stream.response.headers
    assert text == "Hello"
    assert headers["x-trimgate-reason"] == "reactive" and headers["x-trimgate-retries"] == "1"
    assert int(headers["x-trimgate-anchor-tokens"]) > 0
    first, retry = (r.json()["messages"] for r in stack.fake.requests)
    assert len(retry) < len(first)
    assert retry[0] == messages[0] and retry[1] == {"role": "user", "content": CRUMB}
    assert retry[-1] == messages[-1]
    (line,) = [r for r in caplog.records if getattr(r, "event", None) == "history_trimmed"]
    assert getattr(line, "anchor_tokens", 0) == int(headers["x-trimgate-anchor-tokens"])


async def test_anthropic_compaction_head_is_forwarded_untouched(make_stack: MakeStack) -> None:
    stack = await make_stack(
        FakeProvider(lambda r: json_reply(anthropic_ok())), trimming=DEFAULTS, models=MODELS
    )
    block = anthropic.types.beta.BetaCompactionBlock(
        type="compaction", content="Summary of the work so far.", encrypted_content="enc"
    ).to_dict(exclude_none=True)
    block["cache_control"] = {"type": "ephemeral"}
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": PROMPT + " " + "x" * 80_000},
        {"role": "assistant", "content": [block, {"type": "text", "text": "Continuing."}]},
    ]
    for n in range(8):
        messages.append({"role": "user", "content": f"question {n}: " + "q" * 1200})
        messages.append({"role": "assistant", "content": f"answer {n}: " + "a" * 1200})
    messages.append({"role": "user", "content": "newest"})
    async with an_async(stack) as client:
        raw = await client.beta.messages.with_raw_response.create(
            model="mid-1",
            max_tokens=64,
            messages=messages,  # type: ignore[arg-type]
            betas=["compact-2026-01-12"],
        )
    assert raw.headers["x-trimgate-trimmed"] == "true"
    assert "x-trimgate-anchor-tokens" not in raw.headers  # the head replaces the anchor
    # the 80 KB before the compaction block is not counted: the API ignores it
    assert int(raw.headers["x-trimgate-tokens-before"]) < 10_000
    forwarded = orjson.loads(stack.fake.requests[0].body)["messages"]
    assert forwarded[:2] == messages[:2]
    assert forwarded[2] == {"role": "user", "content": CRUMB}
    assert forwarded[-1] == messages[-1]


async def test_responses_compaction_item_is_kept_and_superseded_items_go(
    make_stack: MakeStack,
) -> None:
    reply = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "status": "completed",
        "model": "mid-1",
        "output": [],
        "usage": {"input_tokens": 900, "output_tokens": 1, "total_tokens": 901},
    }
    stack = await make_stack(
        FakeProvider(lambda r: json_reply(reply)), trimming=DEFAULTS, models=MODELS
    )
    item = openai.types.responses.ResponseCompactionItem(
        id="cmp_1", type="compaction", encrypted_content="e" * 200
    ).to_dict(exclude_none=True)
    inputs: list[dict[str, Any]] = [
        {"role": "user", "content": "old prompt " + "o" * 8000},
        {"role": "assistant", "content": "old answer " + "o" * 4000},
        item,
    ]
    for n in range(4):
        inputs.append({"role": "user", "content": f"question {n}: " + "q" * 600})
        inputs.append({"role": "assistant", "content": f"answer {n}: " + "a" * 600})
    inputs.append({"role": "user", "content": "newest"})
    async with oa_async(stack) as client:
        raw = await client.responses.with_raw_response.create(
            model="mid-1",
            input=inputs,  # type: ignore[arg-type]
        )
    assert raw.headers["x-trimgate-trimmed"] == "true"
    forwarded = orjson.loads(stack.fake.requests[0].body)["input"]
    assert forwarded[0] == item and forwarded[1] == {"role": "user", "content": CRUMB}
    assert forwarded[2:] == inputs[3:]
