"""Context windows: long-context betas, models without a known window, and the windows
their overflows teach."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import anthropic
import openai
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from tests.fakes import (
    FakeProvider,
    Recorded,
    Reply,
    anthropic_ok,
    anthropic_overflow,
    json_reply,
    openai_ok,
    openai_overflow,
    sse_data,
    sse_reply,
)
from tests.proxy.bodies import anthropic_messages, gemini_contents, openai_chat
from tests.proxy.conftest import MakeStack, Stack
from trimgate.logs import JsonFormatter
from trimgate.proxy.app import PROXY
from trimgate.proxy.metrics import Metrics
from trimgate.proxy.windows import MAX_LEARNED_MODEL_LEN, OTHER, LearnedWindows

BETA = "context-1m-2025-08-07"
GAUGE = "trimgate_learned_window_tokens"


# --- long-context betas --------------------------------------------------------------


async def _anthropic_budget(stack: Stack, model: str, *betas: str) -> str:
    headers = [("anthropic-beta", b) for b in betas]
    resp = await stack.client.post(
        "/v1/messages", json=anthropic_messages(2, size=10, model=model), headers=headers
    )
    assert resp.status == 200
    return resp.headers["x-trimgate-budget"]


async def test_the_1m_beta_raises_the_window_of_models_that_accept_it(
    make_stack: MakeStack,
) -> None:
    stack = await make_stack(FakeProvider(lambda r: json_reply(anthropic_ok())))
    out = 64  # max_tokens of the body, reserved
    assert await _anthropic_budget(stack, "claude-sonnet-4-5") == str(200_000 - out)
    assert await _anthropic_budget(stack, "claude-sonnet-4-5", BETA) == str(1_000_000 - out)
    # a list, in any case, or among several header values
    listed = f"interleaved-thinking-2025-05-14, {BETA.upper()}"
    assert await _anthropic_budget(stack, "claude-sonnet-4-20250514", listed) == "999936"
    two = ("interleaved-thinking-2025-05-14", BETA)
    assert await _anthropic_budget(stack, "claude-sonnet-4-5", *two) == "999936"
    # other betas change nothing; a model that does not accept the beta ignores it
    assert await _anthropic_budget(stack, "claude-sonnet-4-5", "files-api-2025-04-14") == "199936"
    assert await _anthropic_budget(stack, "claude-haiku-4-5", BETA) == "199936"
    # the header reaches the provider as it came
    assert stack.fake.requests[-1].headers["anthropic-beta"] == BETA


async def test_the_beta_is_read_on_anthropic_requests_only(make_stack: MakeStack) -> None:
    stack = await make_stack()
    body = openai_chat(2, size=10, model="claude-sonnet-4-5")
    resp = await stack.client.post(
        "/v1/chat/completions", json=body, headers={"anthropic-beta": BETA}
    )
    assert resp.headers["x-trimgate-budget"] == "200000"


async def test_a_configured_window_is_not_raised_by_the_beta(make_stack: MakeStack) -> None:
    models = [{"match": "claude-sonnet-4-5*", "context_window": 50_000}]
    stack = await make_stack(FakeProvider(lambda r: json_reply(anthropic_ok())), models=models)
    assert await _anthropic_budget(stack, "claude-sonnet-4-5", BETA) == str(50_000 - 64)


async def test_the_beta_through_the_anthropic_sdk(make_stack: MakeStack) -> None:
    stack = await make_stack(FakeProvider(lambda r: json_reply(anthropic_ok())))
    client = anthropic.AsyncAnthropic(base_url=stack.base, api_key="sk-ant-test", max_retries=0)
    try:
        body = anthropic_messages(3, size=10, model="claude-sonnet-4-5")
        raw = await client.beta.messages.with_raw_response.create(
            model="claude-sonnet-4-5",
            max_tokens=64,
            messages=body["messages"],
            betas=[BETA],
        )
        assert raw.headers["x-trimgate-budget"] == "999936"
        assert BETA in stack.fake.requests[-1].headers["anthropic-beta"]
        plain = await client.messages.with_raw_response.create(
            model="claude-sonnet-4-5", max_tokens=64, messages=body["messages"]
        )
        assert plain.headers["x-trimgate-budget"] == "199936"
    finally:
        await client.close()


# --- unknown windows -----------------------------------------------------------------

# The fake provider's windows: it answers an overflow stating the window when the body
# is larger than it (counted as bytes / 4), as OpenAI does.
WINDOWS = {"mystery-a": 2_000, "mystery-b": 3_000}


def by_window(windows: dict[str, int]) -> Any:
    def respond(r: Recorded) -> Reply:
        model = orjson.loads(r.body)["model"]
        tokens = len(r.body) // 4
        window = windows.get(model, 2_000)
        if tokens > window:
            return openai_overflow(tokens, window)
        return json_reply(openai_ok(tokens))

    return respond


async def test_an_unknown_model_is_forwarded_untouched(make_stack: MakeStack) -> None:
    stack = await make_stack()
    body = orjson.dumps(openai_chat(40, model="mystery-a"))
    resp = await stack.client.post(
        "/v1/chat/completions", data=body, headers={"Content-Type": "application/json"}
    )
    assert resp.status == 200
    assert resp.headers["x-trimgate-skipped"] == "unknown-window"
    assert resp.headers["x-trimgate-trimmed"] == "false"
    assert resp.headers["x-trimgate-budget"] == "0"
    assert stack.fake.requests[0].body == body  # byte for byte


async def test_an_explicit_fallback_window_still_trims(make_stack: MakeStack) -> None:
    stack = await make_stack(trimming={"max_context_tokens": 1_000})
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(40, model="mystery"))
    assert resp.headers["x-trimgate-reason"] == "preemptive"
    assert resp.headers["x-trimgate-budget"] == "1000"
    assert "x-trimgate-skipped" not in resp.headers


async def test_a_budget_header_trims_an_unknown_model(make_stack: MakeStack) -> None:
    stack = await make_stack()
    resp = await stack.client.post(
        "/v1/chat/completions",
        json=openai_chat(40, model="mystery"),
        headers={"x-trimgate-budget": "1500"},
    )
    assert resp.headers["x-trimgate-reason"] == "preemptive"
    assert "x-trimgate-skipped" not in resp.headers


async def test_overflows_teach_each_model_its_window(
    make_stack: MakeStack, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    stack = await make_stack(FakeProvider(by_window(WINDOWS)))

    async def post(model: str) -> Any:
        resp = await stack.client.post("/v1/chat/completions", json=openai_chat(30, model=model))
        assert resp.status == 200
        return resp.headers

    # first request of each model, interleaved: untouched, overflows, saved reactively
    for model in ("mystery-a", "mystery-b"):
        sent = len(stack.fake.requests)
        h = await post(model)
        assert h["x-trimgate-skipped"] == "unknown-window"
        assert h["x-trimgate-reason"] == "reactive" and h["x-trimgate-retries"] == "1"
        assert len(stack.fake.requests) == sent + 2
        assert stack.metric(GAUGE, model=model) == WINDOWS[model]
    # from the second request on: trimmed before sending, to each model's own window
    for model in ("mystery-a", "mystery-b", "mystery-a", "mystery-b"):
        sent = len(stack.fake.requests)
        h = await post(model)
        assert "x-trimgate-skipped" not in h
        assert h["x-trimgate-reason"] == "preemptive" and h["x-trimgate-retries"] == "0"
        assert h["x-trimgate-budget"] == str(WINDOWS[model])
        assert len(stack.fake.requests) == sent + 1  # no overflow any more
    lines = [r for r in caplog.records if getattr(r, "event", None) == "window_learned"]
    assert [(getattr(r, "model", None), getattr(r, "window", None)) for r in lines] == [
        ("mystery-a", 2_000),
        ("mystery-b", 3_000),
    ]
    text = "\n".join(JsonFormatter().format(r) for r in lines)
    assert "uuuu" not in text and "task 0" not in text  # no message contents


def gemini_overflow(real: int, maximum: int) -> Reply:
    message = (
        f"The input token count ({real}) exceeds the maximum number of tokens allowed ({maximum})."
    )
    return json_reply(
        {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}, status=400
    )


GEMINI_OK = {
    "candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]}, "index": 0}],
    "usageMetadata": {"promptTokenCount": 500},
}


async def test_each_format_learns_the_window_its_overflow_states(make_stack: MakeStack) -> None:
    message = "prompt is too long: 9000 tokens > 1500 maximum"
    stream_error = {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    started = {"type": "message_start", "message": {"usage": {"input_tokens": 50}}}
    # each model's answers in turn (a models.get of the Gemini model finds nothing)
    script: dict[str, list[Reply]] = {
        "tuned-gem-1": [gemini_overflow(9_000, 2_500)],
        "mystery-claude": [anthropic_overflow(9_000, 1_800)],
        "mystery-stream": [
            sse_reply(sse_data(stream_error, event="error")),  # an overflow as a stream event
            sse_reply(sse_data(started, event="message_start")),
        ],
    }

    def respond(r: Recorded) -> Reply:
        if r.method == "GET":
            return json_reply({"error": {"code": 404}}, status=404)
        model = "tuned-gem-1" if "tuned-gem-1" in r.path else orjson.loads(r.body)["model"]
        if script[model]:
            return script[model].pop(0)
        return json_reply(GEMINI_OK if "generateContent" in r.path else anthropic_ok())

    fake = FakeProvider(respond)
    stack = await make_stack(fake)
    gemini = "/v1beta/models/tuned-gem-1:generateContent"
    cases: list[tuple[str, Any]] = [
        (gemini, gemini_contents(30)),
        ("/v1/messages", anthropic_messages(30, model="mystery-claude", max_tokens=100)),
        ("/v1/messages", anthropic_messages(30, model="mystery-stream", stream=True)),
    ]
    for path, body in cases:
        resp = await stack.client.post(path, json=body)
        await resp.read()
        assert resp.status == 200 and resp.headers["x-trimgate-reason"] == "reactive"
    windows = stack.app[PROXY].windows.windows
    assert dict(windows) == {
        "tuned-gem-1": 2_500,
        "mystery-claude": 1_800,
        "mystery-stream": 1_500,
    }
    resp = await stack.client.post(gemini, json=gemini_contents(30))
    assert resp.headers["x-trimgate-reason"] == "preemptive"
    assert resp.headers["x-trimgate-budget"] == "2500"
    body = anthropic_messages(30, model="mystery-claude", max_tokens=100)
    resp = await stack.client.post("/v1/messages", json=body)
    assert resp.headers["x-trimgate-budget"] == "1700"  # the learned window less max_tokens


async def test_an_overflow_without_counts_is_retried_at_two_thirds(make_stack: MakeStack) -> None:
    vague = json_reply(
        {"error": {"message": "The maximum context length was exceeded.", "type": "x"}},
        status=400,
    )
    stack = await make_stack(FakeProvider().then(vague))
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(30, model="vague"))
    assert resp.status == 200
    assert resp.headers["x-trimgate-reason"] == "reactive"
    before = int(resp.headers["x-trimgate-tokens-before"])
    assert int(resp.headers["x-trimgate-budget"]) == before * 2 // 3
    assert int(resp.headers["x-trimgate-tokens-after"]) <= before * 2 // 3
    assert len(stack.app[PROXY].windows) == 0  # nothing stated, nothing learned
    # still unknown: the next request is forwarded untouched again
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(3, model="vague"))
    assert resp.headers["x-trimgate-skipped"] == "unknown-window"


async def test_a_learned_window_never_replaces_a_known_one(make_stack: MakeStack) -> None:
    # gpt-4o is in the catalog (128k): an overflow stating less is retried, not learned
    stack = await make_stack(FakeProvider().then(openai_overflow(5_000, 1_000)))
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(30, model="gpt-4o"))
    assert resp.headers["x-trimgate-reason"] == "reactive"
    assert len(stack.app[PROXY].windows) == 0
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(30, model="gpt-4o"))
    assert resp.headers["x-trimgate-budget"] == "128000"
    # nor with a fallback set: that is the window of every model the catalog lacks
    stack = await make_stack(
        FakeProvider().then(openai_overflow(5_000, 1_000)),
        trimming={"max_context_tokens": 100_000},
    )
    await stack.client.post("/v1/chat/completions", json=openai_chat(30, model="mystery"))
    assert len(stack.app[PROXY].windows) == 0


async def test_a_model_name_too_long_to_keep_is_saved_but_not_learned(
    make_stack: MakeStack,
) -> None:
    stack = await make_stack(FakeProvider(by_window({})))
    model = "m" * (MAX_LEARNED_MODEL_LEN + 1)
    for _ in range(2):
        resp = await stack.client.post("/v1/chat/completions", json=openai_chat(30, model=model))
        assert resp.status == 200 and resp.headers["x-trimgate-reason"] == "reactive"
    assert len(stack.app[PROXY].windows) == 0


async def test_learned_models_and_their_series_are_bounded(make_stack: MakeStack) -> None:
    stack = await make_stack(FakeProvider(by_window({})))
    proxy = stack.app[PROXY]
    proxy.windows = LearnedWindows(max_models=3, max_labels=2)
    names = [f"mystery-{i}" for i in range(6)]
    for name in names:
        resp = await stack.client.post("/v1/chat/completions", json=openai_chat(30, model=name))
        assert resp.headers["x-trimgate-reason"] == "reactive"
    assert list(proxy.windows.windows) == names[-3:]  # the oldest learned went first
    series = {
        s.labels["model"]
        for metric in stack.registry.collect()
        if metric.name == GAUGE
        for s in metric.samples
    }
    assert series == {"mystery-0", "mystery-1", OTHER}
    # an evicted model is learned again on its next overflow
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(30, model=names[0]))
    assert resp.headers["x-trimgate-reason"] == "reactive"
    assert names[0] in proxy.windows.windows


def test_ten_thousand_model_names_stay_bounded() -> None:
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    windows = LearnedWindows()
    for i in range(10_000):
        label = windows.learn(f"client-chosen-{i}", 1_000 + i)
        assert label is not None
        metrics.set_learned_window(label, 1_000 + i)
    assert len(windows) == windows.max_models
    samples = [s for m in registry.collect() if m.name == GAUGE for s in m.samples]
    assert len(samples) == windows.max_labels + 1  # the first names, and "other"
    assert registry.get_sample_value(GAUGE, {"model": OTHER}) == 1_000 + 9_999


@given(st.lists(st.text(max_size=300), max_size=200), st.integers(1, 8), st.integers(0, 4))
def test_learned_windows_keep_their_bounds(names: list[str], models: int, labels: int) -> None:
    windows = LearnedWindows(max_models=models, max_labels=labels)
    seen: set[str] = set()
    for i, name in enumerate(names):
        label = windows.learn(name, 1_000 + i)
        if label is not None:
            seen.add(label)
            assert windows.windows[name] == 1_000 + i
        assert len(windows) <= models
    assert len(seen - {OTHER}) <= labels
    assert all(0 < len(n) <= MAX_LEARNED_MODEL_LEN for n in windows.windows)


async def test_an_unknown_model_through_the_openai_sdk(make_stack: MakeStack) -> None:
    stack = await make_stack(FakeProvider(by_window(WINDOWS)))
    client = openai.AsyncOpenAI(base_url=stack.base + "/v1", api_key="sk-test", max_retries=0)
    try:
        messages: Any = openai_chat(30, model="mystery-b")["messages"]
        first = await client.chat.completions.with_raw_response.create(
            model="mystery-b", messages=messages
        )
        assert first.headers["x-trimgate-reason"] == "reactive"
        assert first.parse().choices[0].message.content is not None
        second = await client.chat.completions.with_raw_response.create(
            model="mystery-b", messages=messages
        )
        assert second.headers["x-trimgate-reason"] == "preemptive"
        assert second.headers["x-trimgate-budget"] == "3000"
    finally:
        await client.close()


# --- Gemini's models.get -------------------------------------------------------------


def gemini_provider(limits: dict[str, Reply]) -> FakeProvider:
    """Answers models.get from ``limits`` (by path), and every call with GEMINI_OK."""

    def respond(r: Recorded) -> Reply:
        if r.method == "GET":
            return limits.get(r.path, json_reply({"error": {"code": 404}}, status=404))
        return json_reply(GEMINI_OK)

    return FakeProvider(respond)


async def wait_for_lookups(stack: Stack) -> None:
    tasks = list(stack.app[PROXY].lookups._tasks)
    await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 5)


@pytest.mark.parametrize("upstream_client", ["trimgate", "aiohttp"])
async def test_an_unknown_gemini_model_asks_models_get_once(make_stack: MakeStack) -> None:
    info = {"name": "models/tuned-gem-2", "inputTokenLimit": 3_000, "outputTokenLimit": 800}
    fake = gemini_provider({"/v1beta/models/tuned-gem-2": json_reply(info)})
    stack = await make_stack(fake)
    path = "/v1beta/models/tuned-gem-2:generateContent?key=AIza-test&alt=json"
    headers = {"x-goog-api-key": "AIza-header", "x-custom": "not-for-lookups"}
    first = await stack.client.post(path, json=gemini_contents(30), headers=headers)
    assert first.status == 200  # not held up by the lookup
    assert first.headers["x-trimgate-skipped"] == "unknown-window"
    await wait_for_lookups(stack)
    gets = [r for r in stack.fake.requests if r.method == "GET"]
    assert len(gets) == 1
    get = gets[0]
    assert get.path == "/v1beta/models/tuned-gem-2" and get.query == "key=AIza-test"
    assert get.headers["x-goog-api-key"] == "AIza-header"
    assert "x-custom" not in get.headers and get.body == b""
    second = await stack.client.post(path, json=gemini_contents(30), headers=headers)
    assert second.headers["x-trimgate-reason"] == "preemptive"
    assert second.headers["x-trimgate-budget"] == "3000"
    assert stack.metric(GAUGE, model="tuned-gem-2") == 3_000
    assert len([r for r in stack.fake.requests if r.method == "GET"]) == 1  # asked once


async def test_a_models_get_that_fails_teaches_nothing_and_is_not_repeated(
    make_stack: MakeStack,
) -> None:
    hang = Reply(hang=True)
    fake = gemini_provider(
        {
            "/v1beta/models/slow-gem:": hang,
            "/v1beta/models/slow-gem": hang,
            "/v1beta/models/odd-gem": json_reply({"inputTokenLimit": "lots"}),
        }
    )
    stack = await make_stack(fake)
    stack.app[PROXY].lookups.timeout = 0.2
    for model in ("slow-gem", "missing-gem", "odd-gem", "slow-gem"):
        path = f"/v1beta/models/{model}:generateContent"
        resp = await stack.client.post(path, json=gemini_contents(3))
        assert resp.status == 200 and resp.headers["x-trimgate-skipped"] == "unknown-window"
    await wait_for_lookups(stack)
    assert len(stack.app[PROXY].windows) == 0
    assert len([r for r in stack.fake.requests if r.method == "GET"]) == 3


async def test_models_get_is_not_asked_for_known_models_or_other_formats(
    make_stack: MakeStack,
) -> None:
    stack = await make_stack(gemini_provider({}))
    await stack.client.post(
        "/v1beta/models/gemini-2.5-pro:generateContent", json=gemini_contents(3)
    )
    await stack.client.post("/v1/chat/completions", json=openai_chat(3, model="mystery-x"))
    assert not [r for r in stack.fake.requests if r.method == "GET"]


async def test_a_lookup_in_flight_ends_with_the_app(make_stack: MakeStack) -> None:
    stack = await make_stack(gemini_provider({"/v1beta/models/slow-gem": Reply(hang=True)}))
    resp = await stack.client.post(
        "/v1beta/models/slow-gem:generateContent", json=gemini_contents(3)
    )
    assert resp.status == 200
    tasks = list(stack.app[PROXY].lookups._tasks)
    assert len(tasks) == 1 and not tasks[0].done()
    await stack.client.close()  # shuts the app down: the lookup is cancelled, not leaked
    assert tasks[0].done() and not stack.app[PROXY].lookups._tasks
