"""A long agent session against a provider whose tokenizer counts 1.2-1.3x the estimate.

The fake provider answers exactly like the real APIs: usage in every answer,
and the real/maximum counts in a context_length_exceeded (OpenAI) or "prompt
is too long" (Anthropic) error when the prompt does not fit.
"""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from tests.fakes import (
    FakeProvider,
    Recorded,
    Reply,
    anthropic_ok,
    anthropic_overflow,
    json_reply,
    openai_ok,
    openai_overflow,
)
from tests.proxy.conftest import MakeStack
from trimgate.providers.base import DecodeOptions
from trimgate.providers.registry import CODECS

WINDOW = 20_000
REQUESTS = 120
WARMUP = 5
OPTIONS = DecodeOptions(breadcrumb="[earlier turns omitted to fit the context window]")


def true_counter(wire: str, seed: int) -> Any:
    rng = random.Random(seed)
    codec = CODECS[wire]
    path = "/v1/chat/completions" if wire == "openai" else "/v1/messages"

    def count(body: dict[str, Any]) -> int:
        estimate = codec.decode(body, path=path, options=OPTIONS).conversation.tokens
        return math.ceil(estimate * rng.uniform(1.2, 1.3))

    return count


def provider(wire: str, seed: int) -> FakeProvider:
    count = true_counter(wire, seed)

    def respond(r: Recorded) -> Reply:
        tokens = count(r.json())
        if wire == "openai":
            if tokens > WINDOW:
                return openai_overflow(tokens, WINDOW)
            return json_reply(openai_ok(tokens))
        if tokens > WINDOW:
            return anthropic_overflow(tokens, WINDOW)
        return json_reply(anthropic_ok(tokens))

    return FakeProvider(respond)


def grow(wire: str, history: list[dict[str, Any]], n: int, rng: random.Random) -> None:
    result = " ".join(
        f"line {i}: value={rng.randint(0, 10**6)}" for i in range(rng.randint(40, 90))
    )
    ask = f"step {n}: check the next file and report " + "detail " * rng.randint(5, 40)
    if wire == "openai":
        cid = f"call_{n}"
        history += [
            {"role": "user", "content": ask},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": cid,
                        "type": "function",
                        "function": {"name": "read", "arguments": f'{{"n": {n}}}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": cid, "content": result},
            {"role": "assistant", "content": f"step {n} checked"},
        ]
    else:
        tid = f"toolu_{n}"
        history += [
            {"role": "user", "content": ask},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": tid, "name": "read", "input": {"n": n}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": tid, "content": result}],
            },
            {"role": "assistant", "content": f"step {n} checked"},
        ]


async def run_session(make_stack: MakeStack, wire: str, calibrate: bool) -> tuple[list[int], int]:
    fake = provider(wire, seed=7)
    stack = await make_stack(
        fake,
        models=[{"match": "agent-model", "context_window": WINDOW}],
        trimming={"calibrate": calibrate, "reserve_output_tokens": False},
    )
    rng = random.Random(11)
    history: list[dict[str, Any]] = []
    statuses: list[int] = []
    calls_after_warmup = 0
    path = "/v1/chat/completions" if wire == "openai" else "/v1/messages"
    for n in range(REQUESTS):
        grow(wire, history, n, rng)
        # the agent asks with its newest user message last
        body: dict[str, Any] = {"model": "agent-model", "messages": history[:-3]}
        if wire == "anthropic":
            body["max_tokens"] = 256
        before = len(fake.requests)
        resp = await stack.client.post(path, json=body)
        await resp.read()
        statuses.append(resp.status)
        if n >= WARMUP:
            calls_after_warmup += len(fake.requests) - before
    return statuses, calls_after_warmup


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
async def test_calibrated_session_stays_within_five_percent(
    make_stack: MakeStack, wire: str
) -> None:
    statuses, calls = await run_session(make_stack, wire, calibrate=True)
    assert statuses == [200] * REQUESTS  # every request is saved by whole-turn trimming
    assert calls <= (REQUESTS - WARMUP) * 1.05


async def test_uncalibrated_session_pays_a_round_trip_nearly_every_time(
    make_stack: MakeStack,
) -> None:
    statuses, calls = await run_session(make_stack, "openai", calibrate=False)
    assert statuses == [200] * REQUESTS  # still saved, reactively
    # the history passes the window after ~25 requests; from then on nearly every
    # request overflows once before the reactive retry fits it
    assert calls >= (REQUESTS - WARMUP) + 0.7 * (REQUESTS - 30)
