"""Hostile but valid bodies through the proxy: deep nesting in a request (at the top, in a
content part) or in an answer never turns into a trimgate error; the request goes
upstream as it came, with a clean ``x-trimgate-skipped`` reason."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tests.fakes import FakeProvider, Reply
from tests.proxy.bodies import anthropic_messages, gemini_contents, openai_chat, responses_input
from tests.proxy.conftest import MakeStack

PLACEHOLDER = '"__DEEP__"'


def nest(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def _last_user(items: list[dict[str, Any]]) -> dict[str, Any]:
    return next(m for m in reversed(items) if m.get("role") == "user")


def with_deep_part(path: str, depth: int) -> bytes:
    """An 8-turn body (trimmed on ``small-1``) whose newest user message has a content
    part nested ``depth`` levels deep."""
    part: dict[str, Any] = {"type": "text", "text": "look", "meta": "__DEEP__"}
    body: dict[str, Any]
    if path.startswith("/v1beta"):
        body = gemini_contents(8)
        _last_user(body["contents"])["parts"].append({"text": "look", "meta": "__DEEP__"})
    elif path == "/v1/messages":
        body = anthropic_messages(8, model="small-1")
        _last_user(body["messages"])["content"] = [part]
    elif path == "/v1/responses":
        body = responses_input(8)
        _last_user(body["input"])["content"] = [{**part, "type": "input_text"}]
    else:
        body = openai_chat(8)
        _last_user(body["messages"])["content"] = [part]
    return orjson.dumps(body).decode().replace(PLACEHOLDER, nest(depth)).encode()


PATHS = [
    "/v1/chat/completions",
    "/v1/messages",
    "/v1/responses",
    "/v1beta/models/small-1:generateContent",
]


@pytest.mark.parametrize("depth", [300, 1000, 1500])
@pytest.mark.parametrize("path", PATHS)
async def test_a_deeply_nested_request_is_forwarded_untouched(
    make_stack: MakeStack, path: str, depth: int
) -> None:
    raw = with_deep_part(path, depth)
    stack = await make_stack()
    resp = await stack.client.post(path, data=raw, headers={"Content-Type": "application/json"})
    assert resp.status == 200
    assert resp.headers["x-trimgate-skipped"] == "too-deep"
    assert [r.body for r in stack.fake.requests] == [raw]


@pytest.mark.parametrize("depth", [1000, 1500])
async def test_a_deep_top_level_field_with_nothing_to_trim_is_forwarded(
    make_stack: MakeStack, depth: int
) -> None:
    body = orjson.dumps({**openai_chat(1), "metadata": "__DEEP__"}).decode()
    raw = body.replace(PLACEHOLDER, nest(depth)).encode()
    stack = await make_stack()
    resp = await stack.client.post(
        "/v1/chat/completions", data=raw, headers={"Content-Type": "application/json"}
    )
    assert resp.status == 200 and [r.body for r in stack.fake.requests] == [raw]
    assert resp.headers.get("x-trimgate-skipped") in (None, "too-deep")


@pytest.mark.parametrize("depth", [300, 1500])
async def test_a_deeply_nested_answer_is_relayed(make_stack: MakeStack, depth: int) -> None:
    deep = nest(depth).encode()
    as_json = b'{"choices":[],"usage":' + deep + b',"error":' + deep + b"}"
    event = b'data: {"choices":[{"delta":{"content":""}}],"x":' + deep + b"}\n\n"
    error_event = b'data: {"error":' + deep + b"}\n\n"
    fake = FakeProvider().then(
        Reply(status=200, body=as_json),
        Reply(status=400, body=as_json),
        Reply(events=[event, error_event, event]),
    )
    stack = await make_stack(fake)
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(3, model="gpt-4o"))
    assert resp.status == 200 and await resp.read() == as_json
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(3, model="gpt-4o"))
    assert resp.status == 400 and await resp.read() == as_json
    resp = await stack.client.post(
        "/v1/chat/completions", json=openai_chat(3, model="gpt-4o", stream=True)
    )
    assert await resp.read() == event + error_event + event
    assert len(fake.requests) == 3
