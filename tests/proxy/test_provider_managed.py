"""Requests that ask the provider to manage its own context: deferred to it, or trimmed."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import orjson
import pytest

from tests.fakes import (
    FakeProvider,
    anthropic_ok,
    anthropic_overflow,
    json_reply,
    openai_overflow,
    responses_cached_ok,
)
from tests.proxy.bodies import anthropic_messages, responses_input
from tests.proxy.conftest import MakeStack
from trimgate.providers.base import DecodeOptions
from trimgate.providers.registry import CODECS

OPTIONS = DecodeOptions(breadcrumb="[omitted]")
CLEAR_TOOL_USES: dict[str, Any] = {
    "edits": [{"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 1}}]
}
COMPACT: dict[str, Any] = {"edits": [{"type": "compact_20260112"}]}


@pytest.mark.parametrize(
    ("extra", "managed"),
    [
        ({}, False),
        ({"context_management": None}, False),
        ({"context_management": {}}, False),
        ({"context_management": {"edits": []}}, False),
        ({"context_management": CLEAR_TOOL_USES}, True),
        ({"context_management": COMPACT}, True),
    ],
)
def test_anthropic_context_management_is_read(extra: dict[str, Any], managed: bool) -> None:
    body = {**anthropic_messages(2), **extra}
    decoded = CODECS["anthropic"].decode(body, path="/v1/messages", options=OPTIONS)
    assert decoded.provider_managed is managed


@pytest.mark.parametrize(
    ("extra", "managed"),
    [
        ({}, False),
        ({"truncation": "disabled"}, False),
        ({"truncation": "auto"}, True),
        ({"context_management": []}, False),
        ({"context_management": [{"type": "compaction", "compact_threshold": 1000}]}, True),
    ],
)
def test_responses_context_management_is_read(extra: dict[str, Any], managed: bool) -> None:
    body = {**responses_input(2), **extra}
    decoded = CODECS["openai-responses"].decode(body, path="/v1/responses", options=OPTIONS)
    assert decoded.provider_managed is managed
    raw = orjson.dumps(body)
    fast = CODECS["openai-responses"].decode_raw(
        raw, path="/v1/responses", options=OPTIONS, tool_texts=False
    )
    assert fast is None or fast.provider_managed is managed


async def test_anthropic_context_management_is_deferred(make_stack: MakeStack) -> None:
    stack = await make_stack(FakeProvider(lambda r: json_reply(anthropic_ok(40))))
    body = anthropic_messages(8)
    client = anthropic.AsyncAnthropic(base_url=stack.base, api_key="sk-ant-test", max_retries=0)
    async with client:
        raw = await client.messages.with_raw_response.create(
            model=body["model"],
            max_tokens=16,
            messages=body["messages"],
            extra_body={"context_management": CLEAR_TOOL_USES},
        )
    assert raw.headers["x-trimgate-skipped"] == "provider-managed"
    assert raw.headers["x-trimgate-trimmed"] == "false"
    before = raw.headers["x-trimgate-tokens-before"]
    assert raw.headers["x-trimgate-tokens-after"] == before
    sent = stack.fake.requests[0].json()
    assert sent["messages"] == body["messages"]  # untouched
    assert sent["context_management"] == CLEAR_TOOL_USES
    labels = {"upstream": "anthropic", "model": "small-*", "reason": "preemptive"}
    assert stack.metric("trimgate_trims_total", **labels) == 0


async def test_provider_managed_trim_treats_it_as_any_request(make_stack: MakeStack) -> None:
    stack = await make_stack(
        FakeProvider(lambda r: json_reply(anthropic_ok(40))),
        trimming={"provider_managed": "trim"},
    )
    body = {**anthropic_messages(8), "context_management": COMPACT}
    resp = await stack.client.post("/v1/messages", json=body)
    assert resp.status == 200
    assert "x-trimgate-skipped" not in resp.headers
    assert resp.headers["x-trimgate-trimmed"] == "true"
    assert resp.headers["x-trimgate-reason"] == "preemptive"
    assert len(stack.fake.requests[0].json()["messages"]) < len(body["messages"])


async def test_a_deferred_overflow_is_still_trimmed_and_retried(make_stack: MakeStack) -> None:
    fake = FakeProvider(lambda r: json_reply(anthropic_ok(40)))
    fake.then(anthropic_overflow(2400, 1000))
    stack = await make_stack(fake)
    body = {**anthropic_messages(8), "context_management": CLEAR_TOOL_USES}
    resp = await stack.client.post("/v1/messages", json=body)
    assert resp.status == 200
    assert resp.headers["x-trimgate-skipped"] == "provider-managed"
    assert resp.headers["x-trimgate-trimmed"] == "true"
    assert resp.headers["x-trimgate-reason"] == "reactive"
    assert resp.headers["x-trimgate-retries"] == "1"
    first, second = (r.json() for r in stack.fake.requests)
    assert first["messages"] == body["messages"]
    assert len(second["messages"]) < len(body["messages"])
    assert second["context_management"] == CLEAR_TOOL_USES  # the provider still manages


@pytest.mark.parametrize(
    "extra",
    [{"truncation": "auto"}, {"context_management": [{"type": "compaction"}]}],
)
async def test_responses_provider_managed_is_deferred(
    make_stack: MakeStack, extra: dict[str, Any]
) -> None:
    stack = await make_stack(FakeProvider(lambda r: json_reply(responses_cached_ok(900, 0))))
    body = responses_input(8)
    client = openai.AsyncOpenAI(base_url=stack.base + "/v1", api_key="sk-test", max_retries=0)
    async with client:
        raw = await client.responses.with_raw_response.create(
            model=body["model"], input=body["input"], extra_body=extra
        )
    assert raw.headers["x-trimgate-skipped"] == "provider-managed"
    assert raw.headers["x-trimgate-trimmed"] == "false"
    assert stack.fake.requests[0].json()["input"] == body["input"]


async def test_responses_overflow_after_deferring_is_retried(make_stack: MakeStack) -> None:
    fake = FakeProvider(lambda r: json_reply(responses_cached_ok(900, 0)))
    fake.then(openai_overflow(2400, 1000))
    stack = await make_stack(fake)
    body = {**responses_input(8), "truncation": "auto"}
    resp = await stack.client.post("/v1/responses", json=body)
    assert resp.status == 200
    assert resp.headers["x-trimgate-reason"] == "reactive"
    assert len(stack.fake.requests[1].json()["input"]) < len(body["input"])


def test_config_keys_take_only_their_values() -> None:
    from trimgate.config import parse_config
    from trimgate.errors import ConfigError

    trimming = parse_config({}).trimming
    assert (trimming.provider_managed, trimming.count_tokens) == ("defer", "client")
    chosen = parse_config({"trimming": {"provider_managed": "trim", "count_tokens": "trimmed"}})
    assert (chosen.trimming.provider_managed, chosen.trimming.count_tokens) == ("trim", "trimmed")
    for bad in ({"provider_managed": "later"}, {"count_tokens": "both"}):
        with pytest.raises(ConfigError) as info:
            parse_config({"trimming": bad})
        assert "trimming." + next(iter(bad)) in str(info.value)
