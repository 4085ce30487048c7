"""The retry ladder end to end over loopback, and its three signals: one turn left
(``x-trimgate-exhausted``), retries spent (``x-trimgate-retries-spent``), and an output
reservation no trim can fix (``x-trimgate-unfixable``)."""

from __future__ import annotations

import itertools
import logging

import orjson
import pytest

from tests.fakes import (
    FakeProvider,
    Recorded,
    Reply,
    anthropic_ok,
    json_reply,
    openai_ok,
    sse_data,
)
from tests.proxy.bodies import anthropic_messages, openai_chat
from tests.proxy.conftest import MakeStack

LABELS = {"upstream": "openai", "model": "gpt-4o"}


def fixed_overflow() -> Reply:
    # a server whose stated counts never change, whatever it is sent: they understate
    return json_reply(
        {
            "error": {
                "message": "This model's maximum context length is 4096 tokens. However, "
                "your messages resulted in 4100 tokens.",
                "code": "context_length_exceeded",
            }
        },
        status=400,
    )


UNFIXABLE = {
    "error": {
        "message": "This model's maximum context length is 4097 tokens. However, you "
        "requested 14097 tokens (4097 in the messages, 10000 in the completion). Please "
        "reduce the length of the messages or completion.",
        "type": "invalid_request_error",
        "code": "context_length_exceeded",
    }
}


async def test_a_fixed_understated_count_still_reaches_a_fit(make_stack: MakeStack) -> None:
    first: list[int] = []

    def answer(r: Recorded) -> Reply:
        first.append(len(r.body))
        if len(r.body) > first[0] * 0.45:
            return fixed_overflow()
        return json_reply(openai_ok(10))

    fake = FakeProvider(answer)
    stack = await make_stack(fake)
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(24, model="gpt-4o"))
    assert resp.status == 200, await resp.text()
    assert int(resp.headers["x-trimgate-retries"]) <= 3  # reactive.max_retries
    sizes = [len(r.body) for r in fake.requests]
    assert all(b < a for a, b in itertools.pairwise(sizes))
    assert resp.headers["x-trimgate-reason"] == "reactive"


async def test_retries_spent_with_turns_left(
    make_stack: MakeStack, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeProvider(lambda r: fixed_overflow())
    stack = await make_stack(fake, trimming={"reactive": {"max_retries": 2}})
    with caplog.at_level(logging.ERROR, logger="trimgate"):
        resp = await stack.client.post("/v1/chat/completions", json=openai_chat(24, model="gpt-4o"))
    assert resp.status == 400 and len(fake.requests) == 3
    assert resp.headers["x-trimgate-retries-spent"] == "true"
    assert "x-trimgate-exhausted" not in resp.headers
    assert "x-trimgate-unfixable" not in resp.headers
    assert int(resp.headers["x-trimgate-kept-turns"]) > 1
    assert stack.metric("trimgate_trim_exhausted_total", **LABELS, reason="retries-spent") == 1
    assert stack.metric("trimgate_trim_exhausted_total", **LABELS, reason="one-turn") == 0
    records = [r for r in caplog.records if getattr(r, "event", "") == "trim_exhausted"]
    assert [getattr(r, "reason", None) for r in records] == ["retries-spent"]


async def test_one_turn_left_is_exhausted(
    make_stack: MakeStack, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeProvider(lambda r: fixed_overflow())
    stack = await make_stack(fake)
    with caplog.at_level(logging.ERROR, logger="trimgate"):
        resp = await stack.client.post("/v1/chat/completions", json=openai_chat(1, model="gpt-4o"))
    assert resp.status == 400 and len(fake.requests) == 1
    assert resp.headers["x-trimgate-exhausted"] == "true"
    assert "x-trimgate-retries-spent" not in resp.headers
    assert stack.metric("trimgate_trim_exhausted_total", **LABELS, reason="one-turn") == 1
    records = [r for r in caplog.records if getattr(r, "event", "") == "trim_exhausted"]
    assert [getattr(r, "reason", None) for r in records] == ["one-turn"]


async def test_an_output_reservation_filling_the_window_is_not_resent(
    make_stack: MakeStack, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeProvider(lambda r: json_reply(UNFIXABLE, status=400))
    stack = await make_stack(fake)
    with caplog.at_level(logging.ERROR, logger="trimgate"):
        resp = await stack.client.post(
            "/v1/chat/completions", json=openai_chat(10, model="gpt-4o", max_tokens=10000)
        )
    assert resp.status == 400 and await resp.json() == UNFIXABLE
    assert len(fake.requests) == 1
    assert resp.headers["x-trimgate-unfixable"] == "output-reservation"
    assert "x-trimgate-exhausted" not in resp.headers
    assert "x-trimgate-retries-spent" not in resp.headers
    labels = {**LABELS, "reason": "output-reservation"}
    assert stack.metric("trimgate_trim_exhausted_total", **labels) == 1
    assert stack.metric("trimgate_context_overflows_total", **LABELS) == 0
    records = [r for r in caplog.records if getattr(r, "event", "") == "trim_exhausted"]
    assert [getattr(r, "reason", None) for r in records] == ["output-reservation"]


async def test_an_unfixable_error_event_in_a_stream_is_signalled(make_stack: MakeStack) -> None:
    frames = sse_data({"choices": [{"index": 0, "delta": {"role": "assistant"}}]}, UNFIXABLE)
    fake = FakeProvider(lambda r: Reply(events=frames))
    stack = await make_stack(fake)
    resp = await stack.client.post(
        "/v1/chat/completions", json=openai_chat(10, model="gpt-4o", stream=True)
    )
    assert await resp.read() == b"".join(frames) and len(fake.requests) == 1
    assert resp.headers["x-trimgate-unfixable"] == "output-reservation"


async def test_a_rate_limit_is_no_signal(make_stack: MakeStack) -> None:
    rate = {"error": {"message": "Rate limit reached for tokens per min", "type": "tokens"}}
    fake = FakeProvider(lambda r: json_reply(rate, status=429))
    stack = await make_stack(fake)
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(10, model="gpt-4o"))
    assert resp.status == 429 and len(fake.requests) == 1
    for header in ("exhausted", "retries-spent", "unfixable"):
        assert f"x-trimgate-{header}" not in resp.headers


def understating_overflow(kind: str, real: int, window: int) -> Reply:
    """An overflow as a provider that understates by 30% (``under30``) or states no count
    (``nocount``) words it."""
    if kind == "under30":
        message = (
            f"This model's maximum context length is {window} tokens. However, your "
            f"messages resulted in {int(real * 0.7)} tokens."
        )
    else:
        message = "The input is too long for this model's context window."
    body = {"error": {"message": message, "code": "context_length_exceeded"}}
    return json_reply(body, status=400)


@pytest.mark.parametrize("kind", ["under30", "nocount"])
@pytest.mark.parametrize(
    ("fit", "outcome"),
    [(0.45, "fits"), (0.05, "fits"), (0.001, "one-turn")],
)
async def test_a_provider_that_understates_still_gets_a_fit(
    make_stack: MakeStack, kind: str, fit: float, outcome: str
) -> None:
    """Tokens are a quarter of the bytes sent; the window is ``fit`` of the first body.
    After the first cut each attempt is at most about 2/3 of the one before, so three
    retries reach a fit down to 5%; a single turn that still overflows is exhausted."""
    first: list[int] = []

    def answer(r: Recorded) -> Reply:
        first.append(len(r.body))
        real, window = len(r.body) // 4, int(first[0] // 4 * fit)
        return (
            json_reply(openai_ok(real))
            if real <= window
            else understating_overflow(kind, real, window)
        )

    fake = FakeProvider(answer)
    stack = await make_stack(fake)
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(24, model="gpt-4o"))
    sizes = [len(r.body) for r in fake.requests]
    assert all(b < a for a, b in itertools.pairwise(sizes))
    assert all(c <= b * 0.7 for b, c in itertools.pairwise(sizes[1:]))
    if kind == "nocount" and fit < 0.1:  # no count to aim with: 2/3 a step, and 3 steps
        assert resp.status == 400 and resp.headers["x-trimgate-retries-spent"] == "true"
        assert int(resp.headers["x-trimgate-kept-turns"]) > 1
    elif outcome == "fits":
        assert resp.status == 200, await resp.text()
        assert resp.headers["x-trimgate-reason"] == "reactive"
    else:
        assert resp.status == 400 and resp.headers["x-trimgate-exhausted"] == "true"
        assert resp.headers["x-trimgate-kept-turns"] == "1"
        assert "x-trimgate-retries-spent" not in resp.headers


async def test_a_window_stated_whole_is_aimed_at_less_the_output_limit(
    make_stack: MakeStack,
) -> None:
    """Anthropic checks the prompt against the window, then the prompt and ``max_tokens``
    together. Its first answer states the window whole; the retry takes the request's
    ``max_tokens`` out of it, so that one retry fits instead of a second one answering
    the sum check (which would then cut at 2/3)."""
    first: list[int] = []

    def answer(r: Recorded) -> Reply:
        first.append(len(r.body) // 4)
        prompt, window = len(r.body) // 4, int(first[0] * 0.8)
        reserve = orjson.loads(r.body)["max_tokens"]
        if prompt > window:
            message = f"prompt is too long: {prompt} tokens > {window} maximum"
        elif prompt + reserve > window:
            message = (
                f"input length and `max_tokens` exceed context limit: {prompt} + {reserve} > "
                f"{window}, decrease input length or `max_tokens` and try again"
            )
        else:
            return json_reply(anthropic_ok(prompt))
        error = {"type": "invalid_request_error", "message": message}
        return json_reply({"type": "error", "error": error}, status=400)

    fake = FakeProvider(answer)
    stack = await make_stack(fake)
    body = anthropic_messages(24, model="claude-sonnet-4-5")
    body["max_tokens"] = len(orjson.dumps(body)) // 16  # a quarter of the prompt's tokens
    resp = await stack.client.post("/v1/messages", json=body)
    assert resp.status == 200, await resp.text()
    assert len(fake.requests) == 2 and resp.headers["x-trimgate-retries"] == "1"
    # what was kept fits the window less the reservation (0.55 of the first body), with
    # no more than the margin and one turn's granularity below it
    assert 0.4 < len(fake.requests[1].body) / len(fake.requests[0].body) <= 0.55
