"""The proxy end to end over loopback: a fake provider behind, raw HTTP in front."""

from __future__ import annotations

import asyncio
import gc
import gzip
import json
from typing import Any

import orjson
import pytest

from tests.data_files import CORPUS_PATH, load_entries
from tests.fakes import (
    FakeProvider,
    Reply,
    anthropic_ok,
    json_reply,
    openai_ok,
    openai_overflow,
    sse_data,
    sse_reply,
)
from tests.proxy.bodies import anthropic_messages, gemini_contents, openai_chat, responses_input
from tests.proxy.conftest import MakeStack
from trimgate.history import Message
from trimgate.providers.openai_chat import _scan
from trimgate.providers.overflow import detect_suspect, detect_unfixable
from trimgate.proxy.examine import Chat
from trimgate.proxy.retry import Retries

CRUMB = "[earlier turns omitted to fit the context window]"
CORPUS = load_entries(CORPUS_PATH)


def user_texts(messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "user" and isinstance(m["content"], str)]


@pytest.fixture(
    params=[
        ("trimgate", "trimgate"),
        pytest.param(("trimgate", "aiohttp"), marks=pytest.mark.shell),
        pytest.param(("aiohttp", "trimgate"), marks=pytest.mark.shell),
    ],
    ids=["front+h1", "front+aiohttp-client", "aiohttp-server+h1"],
)
def stack_kind(request: pytest.FixtureRequest) -> tuple[str, str]:
    """Every forwarding test runs on trimgate's front and upstream client, with aiohttp's
    client instead, and with aiohttp's server instead (those two test the shell: the
    core's path is the same on all three)."""
    http_server, upstream_client = request.param
    return str(http_server), str(upstream_client)


@pytest.fixture
def http_server(stack_kind: tuple[str, str]) -> str:
    return stack_kind[0]


@pytest.fixture
def upstream_client(stack_kind: tuple[str, str]) -> str:
    return stack_kind[1]


async def test_non_chat_paths_pass_through_byte_for_byte(make_stack: MakeStack) -> None:
    stack = await make_stack(
        FakeProvider(lambda r: Reply(body=b'{"data": [1, 2]}', headers={"x-upstream": "yes"}))
    )
    body = b'{"input": "hello",   "model": "text-embedding-3-small"}'
    resp = await stack.client.post(
        "/v1/embeddings?x=1",
        data=body,
        headers={
            "Authorization": "Bearer sk-secret",
            "Content-Type": "application/json",
            "x-trimgate-agent": "bot",
            "OpenAI-Organization": "org-1",
        },
    )
    assert resp.status == 200
    assert await resp.read() == b'{"data": [1, 2]}'
    assert resp.headers["x-upstream"] == "yes"
    assert "x-trimgate-trimmed" not in resp.headers
    assert resp.headers["x-trimgate-request-id"]
    (rec,) = stack.fake.requests
    assert rec.body == body and rec.path == "/v1/embeddings" and rec.query == "x=1"
    assert rec.headers["Authorization"] == "Bearer sk-secret"
    assert rec.headers["OpenAI-Organization"] == "org-1"
    assert not any(k.lower().startswith("x-trimgate") for k in rec.headers)
    assert rec.headers["Host"] == f"127.0.0.1:{stack.fake_server.port}"


async def test_answer_headers_relayed_without_hop_by_hop_ones_and_ours_win(
    make_stack: MakeStack,
) -> None:
    headers = {
        "X-Keep": "1",
        "Keep-Alive": "timeout=5",
        "Connection": "keep-alive, X-Drop",
        "X-Drop": "1",
        "X-Trimgate-Request-Id": "from-upstream",
        "Set-Cookie": "a=1",
    }
    fake = FakeProvider().then(json_reply(openai_ok(), 200, **headers))
    stack = await make_stack(fake)
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(2, model="gpt-4o"))
    assert resp.status == 200
    assert resp.headers["X-Keep"] == "1" and resp.headers["Set-Cookie"] == "a=1"
    assert "X-Drop" not in resp.headers and "Keep-Alive" not in resp.headers
    assert resp.headers.getall("x-trimgate-request-id") != ["from-upstream"]
    assert len(resp.headers.getall("x-trimgate-request-id")) == 1


async def test_get_models_passes_through(make_stack: MakeStack) -> None:
    stack = await make_stack(FakeProvider(lambda r: json_reply({"data": [{"id": "gpt-4o"}]})))
    resp = await stack.client.get("/v1/models")
    assert resp.status == 200 and (await resp.json())["data"][0]["id"] == "gpt-4o"
    assert stack.fake.requests[0].method == "GET"


async def test_untouched_chat_forwards_original_bytes(make_stack: MakeStack) -> None:
    stack = await make_stack()
    body = orjson.dumps(openai_chat(2, size=10, model="gpt-4o")).replace(b",", b", ")
    resp = await stack.client.post("/v1/chat/completions", data=body)
    assert resp.status == 200
    assert stack.fake.requests[0].body == body
    h = resp.headers
    assert h["x-trimgate-trimmed"] == "false" and "x-trimgate-reason" not in h
    assert int(h["x-trimgate-tokens-before"]) == int(h["x-trimgate-tokens-after"]) > 0
    assert int(h["x-trimgate-budget"]) == 128_000
    assert h["x-trimgate-kept-turns"] == "2" and h["x-trimgate-retries"] == "0"


async def test_preemptive_trim_openai(make_stack: MakeStack) -> None:
    stack = await make_stack()
    resp = await stack.client.post(
        "/v1/chat/completions",
        json=openai_chat(8, model="small-1"),
        headers={"x-trimgate-agent": "coder", "x-trimgate-session": "s-1"},
    )
    assert resp.status == 200
    h = resp.headers
    assert h["x-trimgate-trimmed"] == "true" and h["x-trimgate-reason"] == "preemptive"
    assert int(h["x-trimgate-tokens-after"]) <= int(h["x-trimgate-budget"]) == 1000
    assert int(h["x-trimgate-dropped-turns"]) >= 1
    sent = stack.fake.requests[0].json()["messages"]
    assert sent[0]["role"] == "system" and sent[1] == {"role": "user", "content": CRUMB}
    assert sent[-1]["content"].startswith("task 7")
    assert (
        stack.metric(
            "trimgate_trims_total", upstream="openai", model="small-*", reason="preemptive"
        )
        == 1
    )
    (event,) = stack.events()
    assert event["type"] == "history_trimmed" and event["reason"] == "preemptive"
    assert event["agent_alias"] == "coder" and event["session_id"] == "s-1"
    assert event["model"] == "small-1" and event["request_id"] == h["x-trimgate-request-id"]
    assert event["dropped_turns"] == int(h["x-trimgate-dropped-turns"])


@pytest.mark.parametrize("reactive", [False, True], ids=["preemptive", "reactive"])
async def test_kept_openai_messages_reach_the_provider_as_the_client_wrote_them(
    make_stack: MakeStack, reactive: bool
) -> None:
    fake = FakeProvider().then(openai_overflow(150_000, 128_000)) if reactive else None
    stack = await make_stack(fake)
    chat = openai_chat(8, model="gpt-4o" if reactive else "small-1")
    # spaces, \u escapes and a 100-bit integer: a parse and re-encode would change each
    items = [
        json.dumps({**m, "note": "café"}, ensure_ascii=True)[:-1] + ', "n": ' + str(2**100) + "}"
        for m in chat["messages"]
    ]
    raw = '{"model": "' + chat["model"] + '", "messages": [ ' + " ,\n".join(items) + " ]}"
    resp = await stack.client.post("/v1/chat/completions", data=raw.encode())
    assert resp.status == 200
    assert resp.headers["x-trimgate-trimmed"] == "true"
    assert resp.headers["x-trimgate-reason"] == ("reactive" if reactive else "preemptive")
    sent = stack.fake.requests[-1].body
    kept = orjson.loads(sent)["messages"]
    assert 3 < len(kept) < len(items)
    originals = [orjson.loads(item) for item in items]  # the system prompt, crumb, the tail
    assert kept[0] == originals[0] and kept[1] == {"role": "user", "content": CRUMB}
    assert kept[2:] == originals[len(originals) - len(kept) + 2 :]
    if _scan is None:  # a pure-Python install parses and re-encodes: the same values
        return
    assert sum(item.encode() in sent for item in items) == len(kept) - 1  # and the breadcrumb
    assert items[-1].encode() in sent


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/messages", anthropic_messages(8)),
        ("/v1/responses", responses_input(8)),
        ("/v1beta/models/small-1:generateContent", gemini_contents(8)),
        ("/v1/models/small-1:generateContent", gemini_contents(8)),
        ("/v1alpha/models/small-1:streamGenerateContent", gemini_contents(8)),
    ],
    ids=["anthropic", "responses", "gemini", "gemini-v1", "gemini-v1alpha"],
)
async def test_preemptive_trim_other_formats(
    make_stack: MakeStack, path: str, body: dict[str, Any]
) -> None:
    stack = await make_stack()
    resp = await stack.client.post(path, json=body)
    assert resp.status == 200
    assert resp.headers["x-trimgate-reason"] == "preemptive"
    assert int(resp.headers["x-trimgate-tokens-after"]) <= 1000
    sent = stack.fake.requests[0]
    assert sent.path == path
    assert CRUMB.encode() in sent.body and b"task 7" in sent.body and b"task 0" not in sent.body


async def test_reactive_overflow_retry_then_success(make_stack: MakeStack) -> None:
    fake = FakeProvider().then(openai_overflow(150_000, 128_000))
    stack = await make_stack(fake)
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(10, model="gpt-4o"))
    assert resp.status == 200
    h = resp.headers
    assert h["x-trimgate-reason"] == "reactive" and h["x-trimgate-retries"] == "1"
    assert len(fake.requests) == 2
    first, second = (len(r.body) for r in fake.requests)
    assert second < first * 128 / 150
    assert CRUMB.encode() in fake.requests[1].body
    labels = {"upstream": "openai", "model": "gpt-4o"}
    assert stack.metric("trimgate_context_overflows_total", **labels) == 1
    assert stack.metric("trimgate_reactive_retries_total", **labels) == 1
    assert stack.events()[0]["reason"] == "reactive"


async def test_parsed_history_is_freed_while_the_upstream_answers(make_stack: MakeStack) -> None:
    """No decoded message outlives the send: a retry parses the body again."""
    live: list[int] = []

    def count_messages(rec: Any) -> Reply:
        live.append(sum(1 for o in gc.get_objects() if type(o) is Message))
        return json_reply(openai_ok(10)) if len(live) > 1 else openai_overflow(150_000, 128_000)

    stack = await make_stack(FakeProvider(count_messages))
    body = openai_chat(40, model="gpt-4o")
    before = sum(1 for o in gc.get_objects() if type(o) is Message)
    resp = await stack.client.post("/v1/chat/completions", json=body)
    assert resp.status == 200 and resp.headers["x-trimgate-retries"] == "1"
    # 81 messages decoded for each attempt, none of them kept while the upstream works
    assert live == [before, before]
    first, second = (r.json()["messages"] for r in stack.fake.requests)
    assert first == body["messages"]
    assert second[1] == {"role": "user", "content": CRUMB}
    assert second[2:] == body["messages"][-len(second) + 2 :]  # the newest turns, intact


async def test_reactive_retry_of_a_compressed_body(make_stack: MakeStack) -> None:
    fake = FakeProvider().then(openai_overflow(150_000, 128_000))
    stack = await make_stack(fake)
    body = openai_chat(10, model="gpt-4o")
    resp = await stack.client.post(
        "/v1/chat/completions",
        data=gzip.compress(orjson.dumps(body)),
        headers={"Content-Encoding": "gzip"},
    )
    assert resp.status == 200 and resp.headers["x-trimgate-retries"] == "1"
    first, second = fake.requests
    assert first.headers["Content-Encoding"] == "gzip"  # untouched: the original bytes
    assert "Content-Encoding" not in second.headers
    sent = second.json()["messages"]
    assert sent[1] == {"role": "user", "content": CRUMB}
    assert sent[2:] == body["messages"][-len(sent) + 2 :]


async def test_a_compressed_body_is_not_kept_inflated_while_the_upstream_answers(
    make_stack: MakeStack,
) -> None:
    """What a chat request keeps while the provider works: the body as it came (gzip),
    the body it sent, never the inflated JSON; a retry inflates it again."""
    raw = orjson.dumps(openai_chat(40, model="gpt-4o"))
    compressed = gzip.compress(raw)
    held: list[list[int]] = []

    def responder(rec: Any) -> Reply:
        gc.collect()  # only what is alive counts (not another test's garbage)
        chats = [o for o in gc.get_objects() if type(o) is Chat]
        held.append([len(v) for c in chats for v in (c.body, c.send_body)])
        return json_reply(openai_ok(10)) if len(held) > 1 else openai_overflow(150_000, 128_000)

    stack = await make_stack(FakeProvider(responder))
    resp = await stack.client.post(
        "/v1/chat/completions", data=compressed, headers={"Content-Encoding": "gzip"}
    )
    assert resp.status == 200 and resp.headers["x-trimgate-retries"] == "1"
    # first attempt: the gzip body, also sent as it came; the retry's body lives in the
    # retry's state, not in the request's
    assert held == [[len(compressed), 0], [len(compressed), 0]]
    assert all(len(raw) not in sizes for sizes in held)


async def test_the_body_sent_is_not_kept_while_the_answer_is_relayed(
    make_stack: MakeStack,
) -> None:
    frames = sse_data(*({"choices": [{"index": 0, "delta": {"content": "x"}}]} for _ in range(3)))
    stack = await make_stack(FakeProvider().then(sse_reply(frames, event_delay=0.2)))
    resp = await stack.client.post(
        "/v1/chat/completions", json=openai_chat(40, model="small-1", stream=True)
    )
    assert resp.status == 200 and resp.headers["x-trimgate-trimmed"] == "true"
    await resp.content.readany()  # the relay has begun; the rest is still to come
    gc.collect()  # only what is alive counts (not another test's garbage)
    (chat,) = [o for o in gc.get_objects() if type(o) is Chat]
    assert chat.send_body == b""
    assert not [o for o in gc.get_objects() if type(o) is Retries]
    await resp.read()


async def test_a_retry_decodes_with_the_models_own_options(make_stack: MakeStack) -> None:
    """A per-model ``media_tokens`` holds for the retry's plan too, not only the first."""
    body = openai_chat(10, model="img-1")
    for message in body["messages"]:
        if message["role"] == "user":
            image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
            message["content"] = [{"type": "text", "text": message["content"]}, image]
    fake = FakeProvider().then(openai_overflow(150_000, 128_000))
    stack = await make_stack(
        fake,
        models=[{"match": "img-*", "context_window": 200_000, "trimming": {"media_tokens": 5}}],
    )
    resp = await stack.client.post("/v1/chat/completions", json=body)
    assert resp.status == 200 and resp.headers["x-trimgate-retries"] == "1"
    assert len(fake.requests) == 2
    images = fake.requests[1].body.count(b"a.png")
    assert images > 0
    # at the default 1,600 tokens an image, the kept turns alone would cost more
    assert int(resp.headers["x-trimgate-tokens-after"]) < 1600 * images


async def test_reactive_without_counts_shrinks_to_two_thirds(make_stack: MakeStack) -> None:
    overflow = json_reply(
        {
            "type": "error",
            "error": {"type": "invalid_request_error", "message": "prompt is too long"},
        },
        status=400,
    )
    fake = FakeProvider(lambda r: json_reply(anthropic_ok())).then(overflow)
    stack = await make_stack(fake)
    resp = await stack.client.post("/v1/messages", json=anthropic_messages(9, model="claude-3-5"))
    assert resp.status == 200 and resp.headers["x-trimgate-retries"] == "1"
    before = int(resp.headers["x-trimgate-tokens-before"])
    assert int(resp.headers["x-trimgate-tokens-after"]) <= before * 2 // 3


async def test_exhausted_returns_provider_error_unchanged(make_stack: MakeStack) -> None:
    reply = openai_overflow(200_000, 128_000)
    fake = FakeProvider(lambda r: reply)
    stack = await make_stack(fake)
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(3, model="gpt-4o"))
    assert resp.status == 400
    assert await resp.json() == reply.data
    assert resp.headers["x-trimgate-exhausted"] == "true"
    # the stated deficit (200k vs 128k) leaves room for only the newest turn; that
    # lone turn still overflows and is not resent
    assert len(fake.requests) == 2 and resp.headers["x-trimgate-retries"] == "1"
    assert resp.headers["x-trimgate-kept-turns"] == "1"
    labels = {"upstream": "openai", "model": "gpt-4o"}
    assert stack.metric("trimgate_trim_exhausted_total", **labels, reason="one-turn") == 1
    assert stack.metric("trimgate_trim_exhausted_total", **labels, reason="retries-spent") == 0
    assert "x-trimgate-retries-spent" not in resp.headers


async def test_lone_turn_is_never_resent(make_stack: MakeStack) -> None:
    fake = FakeProvider(lambda r: openai_overflow(200_000, 128_000))
    stack = await make_stack(fake)
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(1, model="gpt-4o"))
    assert resp.status == 400 and len(fake.requests) == 1
    assert resp.headers["x-trimgate-exhausted"] == "true"


async def test_retries_stop_at_max_retries(make_stack: MakeStack) -> None:
    fake = FakeProvider(lambda r: openai_overflow(200_000, 128_000))
    stack = await make_stack(fake, trimming={"reactive": {"max_retries": 1}})
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(10, model="gpt-4o"))
    assert resp.status == 400 and len(fake.requests) == 2
    assert resp.headers["x-trimgate-retries-spent"] == "true"
    assert "x-trimgate-exhausted" not in resp.headers
    labels = {"upstream": "openai", "model": "gpt-4o", "reason": "retries-spent"}
    assert stack.metric("trimgate_trim_exhausted_total", **labels) == 1


async def test_reactive_disabled_never_retries(make_stack: MakeStack) -> None:
    fake = FakeProvider(lambda r: openai_overflow(200_000, 128_000))
    stack = await make_stack(fake, trimming={"reactive": {"enabled": False}})
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(10, model="gpt-4o"))
    assert resp.status == 400 and len(fake.requests) == 1


async def test_overflow_as_first_event_of_a_200_stream(make_stack: MakeStack) -> None:
    error = {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 250000 tokens > 200000 maximum",
        },
    }
    ok_frames = sse_data(
        {"type": "message_start", "message": {"usage": {"input_tokens": 50}}}, event="message_start"
    )
    fake = FakeProvider().then(sse_reply(sse_data(error, event="error")), sse_reply(ok_frames))
    stack = await make_stack(fake)
    resp = await stack.client.post(
        "/v1/messages", json=anthropic_messages(8, model="claude-sonnet-4-5", stream=True)
    )
    assert resp.status == 200
    text = await resp.text()
    assert "message_start" in text and "prompt is too long" not in text
    assert resp.headers["x-trimgate-reason"] == "reactive" and len(fake.requests) == 2


async def test_error_json_with_status_200_is_recognised(make_stack: MakeStack) -> None:
    body = {
        "error": {
            "message": "This model's maximum context length is 8192 tokens. However, "
            "your messages resulted in 9000 tokens.",
            "code": "context_length_exceeded",
        }
    }
    fake = FakeProvider(lambda r: json_reply(openai_ok(10))).then(json_reply(body, status=200))
    stack = await make_stack(fake)
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(6, model="gpt-4o"))
    assert resp.status == 200 and (await resp.json())["choices"]
    assert len(fake.requests) == 2


@pytest.mark.parametrize(
    ("status", "body", "retry_budget"),
    [
        # Zed's cloud: an overflow with status 403, counts stated
        (403, b"Context window exceeded: 9000 tokens exceeds the limit of 8000 tokens", True),
        # a 403 naming the window as exceeded, no counts
        (403, b'{"error":{"message":"Context window exceeded for this model"}}', False),
        # LightLLM answers with status 417
        (417, b'{"message":"the input prompt token len 9000 + max_new_tokens 100 > 8100"}', True),
        # an unlisted code, no words
        (400, b'{"error":{"code":"PromptTooLong","message":"Request rejected"}}', False),
        # an unlisted wording with exactly two counts
        (
            400,
            b'{"error":{"message":"The engine prompt length 9000 exceeds the limit 8000"}}',
            True,
        ),
    ],
)
async def test_unlisted_overflows_are_retried_end_to_end(
    make_stack: MakeStack, status: int, body: bytes, retry_budget: bool
) -> None:
    fake = FakeProvider(lambda r: json_reply(openai_ok(10))).then(Reply(status=status, body=body))
    stack = await make_stack(fake)
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(12, model="gpt-4o"))
    assert resp.status == 200 and (await resp.json())["choices"]
    assert resp.headers["x-trimgate-reason"] == "reactive"
    assert len(fake.requests) == 2
    first, second = (len(orjson.loads(r.body)["messages"]) for r in fake.requests)
    # stated counts aim the retry at the deficit (about 8/9 of the prompt); without counts it
    # aims at 2/3
    assert (second > first * 3 // 4) is retry_budget, (first, second)


NEGATIVES = [e for e in CORPUS if not e["overflow"]]


@pytest.mark.parametrize("entry", NEGATIVES, ids=[e["id"] for e in NEGATIVES])
async def test_negative_corpus_bodies_pass_through_untouched(
    make_stack: MakeStack, entry: dict[str, Any]
) -> None:
    """Each look-alike goes back byte for byte, after one call, or three when its words
    suspect an overflow: the probe's two steps get the same answer and refute it."""
    raw = entry["body"].encode()
    if entry.get("stream"):
        reply = Reply(status=entry["status"], events=[raw])
    else:
        reply = Reply(status=entry["status"], body=raw)
    fake = FakeProvider(lambda r: reply)
    stack = await make_stack(fake)
    path, body = {
        "openai": ("/v1/chat/completions", openai_chat(6, model="gpt-4o")),
        "openai-responses": ("/v1/responses", responses_input(6, model="gpt-4o")),
        "anthropic": ("/v1/messages", anthropic_messages(6, model="claude-sonnet-4-5")),
        "gemini": ("/v1beta/models/gemini-2.5-pro:generateContent", gemini_contents(6)),
    }[entry["format"]]
    resp = await stack.client.post(path, json=body)
    assert resp.status == entry["status"]
    assert await resp.read() == raw
    # an answer stating an overflow no trim can fix is never probed (MLC LLM's limit below 0)
    unfixable = detect_unfixable(entry["status"], raw)
    suspect = (
        not entry.get("stream")
        and not unfixable
        and detect_suspect(entry["status"], raw) is not None
    )
    assert len(fake.requests) == (3 if suspect else 1)
    assert resp.headers.get("x-trimgate-probe") == ("refuted" if suspect else None)
    assert resp.headers["x-trimgate-retries"] == "0"
    expected = "output-reservation" if unfixable else None
    assert resp.headers.get("x-trimgate-unfixable") == expected
    assert resp.headers["x-trimgate-trimmed"] == "false"
    assert "x-trimgate-exhausted" not in resp.headers


async def test_invalid_json_is_forwarded_untouched(make_stack: MakeStack) -> None:
    stack = await make_stack()
    resp = await stack.client.post("/v1/chat/completions", data=b'{"model": "gpt-4o", "messa')
    assert resp.status == 200
    assert resp.headers["x-trimgate-skipped"] == "invalid-json"
    assert stack.fake.requests[0].body == b'{"model": "gpt-4o", "messa'


async def test_unexpected_shape_is_forwarded_untouched(make_stack: MakeStack) -> None:
    stack = await make_stack()
    body = b'{"model": "gpt-4o", "messages": "not a list"}'
    resp = await stack.client.post("/v1/chat/completions", data=body)
    assert resp.headers["x-trimgate-skipped"] and stack.fake.requests[0].body == body


async def test_gzip_request_body_is_decoded_only_when_changed(make_stack: MakeStack) -> None:
    stack = await make_stack()
    small = gzip.compress(orjson.dumps(openai_chat(2, size=10, model="gpt-4o")))
    await stack.client.post(
        "/v1/chat/completions", data=small, headers={"Content-Encoding": "gzip"}
    )
    assert stack.fake.requests[0].body == small
    big = gzip.compress(orjson.dumps(openai_chat(8, model="small-1")))
    resp = await stack.client.post(
        "/v1/chat/completions", data=big, headers={"Content-Encoding": "gzip"}
    )
    assert resp.headers["x-trimgate-trimmed"] == "true"
    sent = stack.fake.requests[1]
    assert "Content-Encoding" not in sent.headers and CRUMB in sent.body.decode()


async def test_body_over_limit_gets_413(make_stack: MakeStack) -> None:
    stack = await make_stack(server={"max_body_bytes": 1000})
    resp = await stack.client.post("/v1/messages", data=b"x" * 5000)
    assert resp.status == 413
    assert (await resp.json())["error"]["type"] == "request_too_large"
    assert stack.fake.requests == []


async def test_unreachable_upstream_is_502_in_provider_envelope(make_stack: MakeStack) -> None:
    stack = await make_stack(
        upstreams={"anthropic": {"provider": "anthropic", "base_url": "http://127.0.0.1:9"}}
    )
    resp = await stack.client.post("/v1/messages", json=anthropic_messages(1))
    assert resp.status == 502
    body = await resp.json()
    assert body["type"] == "error" and body["error"]["type"] == "api_error"


async def test_upstream_timeout_is_504(make_stack: MakeStack) -> None:
    fake = FakeProvider().then(Reply(hang=True))
    stack = await make_stack(fake, server={"read_timeout": 0.3})
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(1, model="gpt-4o"))
    assert resp.status == 504
    assert (await resp.json())["error"]["code"] == "upstream_timeout"


async def test_shadow_mode_reports_but_forwards_untouched(make_stack: MakeStack) -> None:
    stack = await make_stack()
    body = orjson.dumps(openai_chat(8, model="small-1"))
    resp = await stack.client.post(
        "/v1/chat/completions", data=body, headers={"x-trimgate-mode": "shadow"}
    )
    assert resp.headers["x-trimgate-shadow"] == "true"
    assert resp.headers["x-trimgate-trimmed"] == "true"
    assert stack.fake.requests[0].body == body
    assert stack.events()[0]["shadow"] is True


async def test_mode_off_forwards_untouched_without_signals(make_stack: MakeStack) -> None:
    stack = await make_stack(trimming={"mode": "off"})
    body = orjson.dumps(openai_chat(8, model="small-1"))
    resp = await stack.client.post("/v1/chat/completions", data=body)
    assert stack.fake.requests[0].body == body and "x-trimgate-trimmed" not in resp.headers
    on = await stack.client.post(
        "/v1/chat/completions", data=body, headers={"x-trimgate-mode": "enforce"}
    )
    assert on.headers["x-trimgate-trimmed"] == "true"


async def test_budget_header_only_lowers(make_stack: MakeStack) -> None:
    stack = await make_stack()
    body = openai_chat(4, size=100, model="gpt-4o")
    resp = await stack.client.post(
        "/v1/chat/completions", json=body, headers={"x-trimgate-budget": "200"}
    )
    assert resp.headers["x-trimgate-budget"] == "200"
    assert resp.headers["x-trimgate-trimmed"] == "true"
    resp = await stack.client.post(
        "/v1/chat/completions", json=body, headers={"x-trimgate-budget": "999999999"}
    )
    assert resp.headers["x-trimgate-budget"] == "128000"


async def test_output_reservation_lowers_the_budget(make_stack: MakeStack) -> None:
    stack = await make_stack()
    resp = await stack.client.post(
        "/v1/chat/completions", json=openai_chat(1, size=10, model="small-1", max_tokens=300)
    )
    assert resp.headers["x-trimgate-budget"] == "700"


async def test_prefix_upstream_strips_prefix(make_stack: MakeStack) -> None:
    fake = FakeProvider()
    stack = await make_stack(fake)
    base = str(stack.fake_server.make_url("")).rstrip("/")
    stack2 = await make_stack(
        fake,
        upstreams={"groq": {"provider": "openai", "base_url": base + "/openai", "prefix": "/groq"}},
    )
    resp = await stack2.client.post("/groq/v1/chat/completions", json=openai_chat(1, size=5))
    assert resp.status == 200 and "x-trimgate-trimmed" in resp.headers
    assert fake.requests[-1].path == "/openai/v1/chat/completions"
    assert (
        stack2.metric(
            "trimgate_requests_total",
            upstream="groq",
            provider="openai",
            model="small-*",
            status="200",
        )
        == 1
    )


async def test_streamed_answer_is_relayed_as_it_arrives(make_stack: MakeStack) -> None:
    frames = sse_data(*({"choices": [{"delta": {"content": str(i)}}]} for i in range(3)))
    fake = FakeProvider().then(Reply(events=[*frames, b"data: [DONE]\n\n"], event_delay=0.5))
    stack = await make_stack(fake)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    resp = await stack.client.post(
        "/v1/chat/completions", json=openai_chat(1, model="gpt-4o", stream=True)
    )
    first = await resp.content.readany()
    t_first = loop.time() - t0
    rest = await resp.read()
    t_all = loop.time() - t0
    assert b'"0"' in first
    assert t_first < 0.4 < 1.0 < t_all
    assert rest.endswith(b"data: [DONE]\n\n")
    assert resp.headers["x-trimgate-trimmed"] == "false"


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", openai_chat(1, model="gpt-4o", stream=True)),
        ("/v1/responses", {**responses_input(1), "stream": True}),
        ("/v1/messages", {**anthropic_messages(1), "stream": True}),
    ],
    ids=["openai", "responses", "anthropic"],
)
async def test_a_stream_whose_events_have_odd_types_is_relayed_whole(
    make_stack: MakeStack, path: str, body: dict[str, Any]
) -> None:
    # "type" as a list or an object: valid JSON no provider sends, but a relay must not
    # trip over it (a set lookup of a list raises), neither at the stream's head nor when
    # reading usage from its events.
    odd = [
        {"type": [], "input_tokens": 1, "response.x": 1, "prompt_tokens": 1},
        {"type": {"a": 1}, "usage": {"input_tokens": 2, "prompt_tokens": 2}},
    ]
    frames = [*sse_data(*odd), *sse_data(*odd, event="response.completed"), b"data: [DONE]\n\n"]
    stack = await make_stack(FakeProvider().then(Reply(events=frames)))
    resp = await stack.client.post(path, json=body)
    assert resp.status == 200
    assert await resp.read() == b"".join(frames)


async def test_client_disconnect_cancels_upstream(make_stack: MakeStack) -> None:
    fake = FakeProvider().then(Reply(hang=True))
    stack = await make_stack(fake)
    task = asyncio.ensure_future(
        stack.client.post("/v1/chat/completions", json=openai_chat(1, model="gpt-4o"))
    )
    for _ in range(100):
        if fake.requests:
            break
        await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(100):
        if fake.cancelled:
            break
        await asyncio.sleep(0.02)
    assert fake.cancelled == 1


async def test_calibration_learns_from_usage(make_stack: MakeStack) -> None:
    fake = FakeProvider(lambda r: json_reply(openai_ok(1600)))
    stack = await make_stack(fake)
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(6, model="gpt-4o"))
    estimate = int(resp.headers["x-trimgate-tokens-before"])
    ratio = stack.metric("trimgate_estimate_calibration_ratio", model="gpt-4o")
    assert ratio == pytest.approx(1600 / estimate, rel=0.01)
    # the next request is planned with it: the estimate is now in provider tokens,
    # with a little headroom while the spread of the ratio is unknown
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(6, model="gpt-4o"))
    assert 1600 <= int(resp.headers["x-trimgate-tokens-before"]) <= 1600 * 1.06


async def test_calibration_learns_from_streamed_usage(make_stack: MakeStack) -> None:
    frames = sse_data(
        {"choices": [{"delta": {"content": "hi"}}]},
        {"choices": [], "usage": {"prompt_tokens": 3000, "completion_tokens": 1}},
    )
    fake = FakeProvider(lambda r: sse_reply([*frames, b"data: [DONE]\n\n"]))
    stack = await make_stack(fake)
    resp = await stack.client.post(
        "/v1/chat/completions", json=openai_chat(6, model="gpt-4o", stream=True)
    )
    await resp.read()
    estimate = int(resp.headers["x-trimgate-tokens-before"])
    ratio = stack.metric("trimgate_estimate_calibration_ratio", model="gpt-4o")
    assert ratio == pytest.approx(3000 / estimate, rel=0.01)


async def test_a_bug_in_examination_forwards_the_request_untouched(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trimgate.providers.registry import CODECS

    class Broken:
        """The real codec with a decode that raises (codecs are compiled: no patching)."""

        def __init__(self, real: object) -> None:
            self._real = real

        def __getattr__(self, name: str) -> object:
            return getattr(self._real, name)

        def decode(self, *args: object, **kwargs: object) -> None:
            raise RuntimeError("secret user text that must not be logged")

        decode_raw = decode  # the decode from bytes, tried first

    monkeypatch.setitem(CODECS, "openai", Broken(CODECS["openai"]))
    stack = await make_stack()
    body = orjson.dumps(openai_chat(8, model="small-1"))
    resp = await stack.client.post("/v1/chat/completions", data=body)
    assert resp.status == 200
    assert resp.headers["x-trimgate-skipped"] == "internal-error"
    assert stack.fake.requests[0].body == body


async def test_a_bug_while_recording_signals_is_logged_not_raised(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from trimgate.proxy import forward

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(forward, "record", broken)
    stack = await make_stack()
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(8, model="small-1"))
    assert resp.status == 200
    await resp.read()
    await asyncio.sleep(0)  # the callback has run by now
    failures = [r for r in caplog.records if getattr(r, "event", None) == "record_error"]
    assert len(failures) == 1
    assert failures[0].__dict__["request_id"] == resp.headers["x-trimgate-request-id"]


def test_log_lines_never_carry_exception_messages() -> None:
    import logging

    from trimgate.logs import JsonFormatter

    try:
        raise ValueError("secret user text")
    except ValueError:
        record = logging.LogRecord("trimgate", logging.ERROR, "f", 1, "failed", (), None)
        import sys

        record.exc_info = sys.exc_info()
    line = JsonFormatter().format(record)
    assert "secret" not in line
    parsed = orjson.loads(line)
    assert parsed["exc_type"] == "ValueError" and parsed["exc_where"].startswith("test_forward.py:")


async def test_compressed_answers_are_relayed_as_they_are(make_stack: MakeStack) -> None:
    packed = gzip.compress(orjson.dumps(openai_ok(10)))
    reply = Reply(body=packed, headers={"Content-Encoding": "gzip"})
    stack = await make_stack(FakeProvider(lambda r: reply))
    resp = await stack.client.post(
        "/v1/chat/completions",
        json=openai_chat(2, size=10, model="gpt-4o"),
        auto_decompress=False,
    )
    assert resp.status == 200 and resp.headers["Content-Encoding"] == "gzip"
    assert await resp.read() == packed


async def test_gemini_count_tokens_counts_the_clients_body(make_stack: MakeStack) -> None:
    stack = await make_stack(FakeProvider(lambda r: json_reply({"totalTokens": 77})))
    body = {"contents": gemini_contents(8)["contents"]}
    resp = await stack.client.post("/v1beta/models/small-1:countTokens", json=body)
    assert resp.status == 200 and (await resp.json()) == {"totalTokens": 77}
    assert resp.headers["x-trimgate-trimmed"] == "false"
    assert "x-trimgate-skipped" not in resp.headers
    before = int(resp.headers["x-trimgate-tokens-before"])  # the client's body
    assert before > int(resp.headers["x-trimgate-tokens-after"])  # what would be forwarded
    sent = stack.fake.requests[0]
    assert sent.path == "/v1beta/models/small-1:countTokens"
    assert orjson.loads(sent.body) == body  # untouched
    labels = {"upstream": "gemini", "model": "small-*"}
    assert stack.metric("trimgate_trims_total", **labels, reason="preemptive") == 0


async def test_gemini_count_tokens_trimmed_is_planned_like_a_call(make_stack: MakeStack) -> None:
    fake = FakeProvider(lambda r: json_reply({"totalTokens": 77}))
    stack = await make_stack(fake, trimming={"count_tokens": "trimmed"})
    resp = await stack.client.post(
        "/v1beta/models/small-1:countTokens", json={"contents": gemini_contents(8)["contents"]}
    )
    assert resp.status == 200 and (await resp.json()) == {"totalTokens": 77}
    assert resp.headers["x-trimgate-trimmed"] == "true"
    before = int(resp.headers["x-trimgate-tokens-before"])  # the pre-trim estimate
    assert before > int(resp.headers["x-trimgate-tokens-after"])
    sent = stack.fake.requests[0]
    assert sent.path == "/v1beta/models/small-1:countTokens"
    assert CRUMB.encode() in sent.body and b"task 0:" not in sent.body


async def test_logs_carry_no_credentials_and_no_message_contents(
    make_stack: MakeStack, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    from trimgate.logs import JsonFormatter

    caplog.set_level(logging.DEBUG)
    fake = FakeProvider().then(openai_overflow(150_000, 128_000))
    stack = await make_stack(fake)
    body = openai_chat(10, model="gpt-4o")
    body["messages"][1]["content"] = "TOP-SECRET-PROMPT " + body["messages"][1]["content"]
    await stack.client.post(
        "/v1/chat/completions",
        json=body,
        headers={"Authorization": "Bearer sk-LEAKCHECK", "x-api-key": "sk-ant-LEAKCHECK"},
    )
    await stack.client.post("/v1/chat/completions", data=b"{TOP-SECRET-PROMPT")
    lines = [JsonFormatter().format(r) for r in caplog.records]
    assert any('"event":"history_trimmed"' in ln for ln in lines)
    assert any('"event":"request"' in ln for ln in lines)
    text = "\n".join(lines)
    assert "LEAKCHECK" not in text and "TOP-SECRET" not in text and "uuuu" not in text


async def test_input_cap_bounds_the_budget(make_stack: MakeStack) -> None:
    stack = await make_stack()
    body = openai_chat(1, size=10, model="gpt-5-mini", max_completion_tokens=128_000)
    resp = await stack.client.post("/v1/chat/completions", json=body)
    assert resp.headers["x-trimgate-budget"] == "272000"  # 400k - 128k, and the 272k cap
    resp = await stack.client.post(
        "/v1/chat/completions", json=openai_chat(1, size=10, model="gpt-5-mini")
    )
    assert resp.headers["x-trimgate-budget"] == "272000"  # no output limit: the cap


async def test_orphans_removed_are_not_dropped_messages(make_stack: MakeStack) -> None:
    stack = await make_stack()
    call = {"id": "call_lost", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": None, "tool_calls": [call]},  # its result never came
        {"role": "user", "content": "second"},
        {"role": "tool", "tool_call_id": "call_never_made", "content": "stray"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "third"},
    ]
    resp = await stack.client.post(
        "/v1/chat/completions", json={"model": "gpt-4o", "messages": messages}
    )
    assert resp.status == 200
    h = resp.headers
    assert h["x-trimgate-trimmed"] == "false" and h["x-trimgate-dropped-turns"] == "0"
    assert h["x-trimgate-orphans-removed"] == "2"
    assert h["x-trimgate-dropped-messages"] == "0"
    sent = stack.fake.requests[0].json()["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "user", "assistant", "user"]
