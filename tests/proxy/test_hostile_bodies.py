"""Hostile but valid bodies through the proxy: deep nesting in a request (at the top, in a
content part) or in an answer never turns into a trimgate error; the request goes
upstream as it came, with a clean ``x-trimgate-skipped`` reason."""

from __future__ import annotations

import gzip
import io
from typing import Any

import orjson
import pytest

from tests.fakes import FakeProvider, Reply
from tests.proxy.bodies import anthropic_messages, gemini_contents, openai_chat, responses_input
from tests.proxy.conftest import MakeStack

PLACEHOLDER = '"__DEEP__"'


def nest(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def _user(items: list[dict[str, Any]], oldest: bool) -> dict[str, Any]:
    """The newest user message (or the oldest: in a turn a trim drops) that opens a turn."""
    users = [m for m in items if m.get("role") == "user" and "tool_result" not in str(m)]
    users = [m for m in users if "functionResponse" not in str(m)]
    return users[0] if oldest else users[-1]


def with_deep_part(path: str, depth: int, *, oldest: bool = False) -> bytes:
    """An 8-turn body (trimmed on ``small-1``) whose newest user message (or oldest) has
    a content part nested ``depth`` levels deep."""
    part: dict[str, Any] = {"type": "text", "text": "look", "meta": "__DEEP__"}
    body: dict[str, Any]
    if path.startswith("/v1beta"):
        body = gemini_contents(8)
        _user(body["contents"], oldest)["parts"].append({"text": "look", "meta": "__DEEP__"})
    elif path == "/v1/messages":
        body = anthropic_messages(8, model="small-1")
        _user(body["messages"], oldest)["content"] = [part]
    elif path == "/v1/responses":
        body = responses_input(8)
        _user(body["input"], oldest)["content"] = [{**part, "type": "input_text"}]
    else:
        body = openai_chat(8)
        _user(body["messages"], oldest)["content"] = [part]
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


# past 1,023 levels nothing parses (too-deep, above); up to there a trim that drops the
# deep turn re-encodes only what it keeps
@pytest.mark.parametrize("depth", [256, 1000])
@pytest.mark.parametrize("path", PATHS)
async def test_a_deep_part_in_a_dropped_turn_is_trimmed_away(
    make_stack: MakeStack, path: str, depth: int
) -> None:
    raw = with_deep_part(path, depth, oldest=True)
    stack = await make_stack()
    resp = await stack.client.post(path, data=raw, headers={"Content-Type": "application/json"})
    assert resp.status == 200 and resp.headers["x-trimgate-trimmed"] == "true"
    assert "x-trimgate-skipped" not in resp.headers
    [sent] = stack.fake.requests
    assert b'{"a":{"a":' not in sent.body  # the turn holding it went, the rest re-encoded


@pytest.mark.parametrize("depth", [256, 1025, 10_000])
@pytest.mark.parametrize("path", PATHS)
async def test_a_deep_gzip_body_is_forwarded_as_it_came(
    make_stack: MakeStack, path: str, depth: int
) -> None:
    packed = gzip.compress(with_deep_part(path, depth))
    stack = await make_stack()
    resp = await stack.client.post(
        path, data=packed, headers={"Content-Type": "application/json", "Content-Encoding": "gzip"}
    )
    assert resp.status == 200 and resp.headers["x-trimgate-skipped"] == "too-deep"
    assert [r.body for r in stack.fake.requests] == [packed]


@pytest.mark.parametrize("depth", [256, 1025, 10_000])
async def test_deep_tool_arguments_in_a_kept_turn_are_forwarded_untouched(
    make_stack: MakeStack, depth: int
) -> None:
    body = anthropic_messages(8, model="small-1")
    calls = [
        m for m in body["messages"] if m["role"] == "assistant" and isinstance(m["content"], list)
    ]
    calls[-1]["content"][1]["input"] = {"d": "__DEEP__"}
    raw = orjson.dumps(body).decode().replace(PLACEHOLDER, nest(depth)).encode()
    stack = await make_stack()
    resp = await stack.client.post(
        "/v1/messages", data=raw, headers={"Content-Type": "application/json"}
    )
    assert resp.status == 200 and resp.headers["x-trimgate-skipped"] == "too-deep"
    assert [r.body for r in stack.fake.requests] == [raw]


async def test_a_body_of_too_many_objects_is_forwarded_as_it_came(make_stack: MakeStack) -> None:
    # 150,000 tiny messages (about 4.6 MB): parsing them would hold the process
    messages = [{"role": "user", "content": "x"} for _ in range(150_000)]
    raw = orjson.dumps({"model": "small-1", "messages": messages})
    stack = await make_stack()
    resp = await stack.client.post(  # a large body goes as a stream (aiohttp's advice)
        "/v1/chat/completions", data=io.BytesIO(raw), headers={"Content-Type": "application/json"}
    )
    assert resp.status == 200 and resp.headers["x-trimgate-skipped"] == "too-many-items"
    assert [r.body for r in stack.fake.requests] == [raw]


async def test_braces_inside_messages_are_not_objects(make_stack: MakeStack) -> None:
    # a tool result of JSON text: its braces are in a string and count for nothing, so
    # the history is examined (and trimmed to the small window) as any other
    body = openai_chat(6, model="small-1")
    body["messages"][2]["content"] = '{"a":{"b":1}}' * 120_000
    stack = await make_stack()
    resp = await stack.client.post(
        "/v1/chat/completions",
        data=io.BytesIO(orjson.dumps(body)),
        headers={"Content-Type": "application/json"},
    )
    assert resp.status == 200
    assert "x-trimgate-skipped" not in resp.headers
    assert resp.headers["x-trimgate-trimmed"] == "true"
