"""Overflow recognition in the relay, end to end over loopback: an overflow anywhere
before the first output byte is retried, never one after it; an upstream's own
``overflow_patterns`` apply to that upstream only."""

from __future__ import annotations

import time
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
    responses_cached_ok,
    sse_data,
)
from tests.proxy.bodies import anthropic_messages, openai_chat, responses_input
from tests.proxy.conftest import MakeStack
from trimgate.providers.overflow import detect_overflow
from trimgate.proxy import relay
from trimgate.proxy.relay import STREAM_HOLD_LIMIT

MESSAGE = (
    "This model's maximum context length is 4097 tokens. However, your messages resulted "
    "in 4619 tokens."
)
CORPUS = load_entries(CORPUS_PATH)
OPENAI_BODY = orjson.dumps({"error": {"message": MESSAGE, "code": "context_length_exceeded"}})
ROLE = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
EMPTY = {"choices": [{"index": 0, "delta": {"content": ""}}]}
ERROR_EVENT = {"error": {"message": MESSAGE, "code": "context_length_exceeded"}}


def text(value: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"content": value}}]}


LLAMA_CPP_REFUSAL = (
    "request (9412 tokens) exceeds the available context size (8192 tokens), try increasing it"
)


def ok_stream() -> Reply:
    return Reply(events=[*sse_data(ROLE, text("fine")), b"data: [DONE]\n\n"])


@pytest.fixture(params=["trimgate", "aiohttp"])
def upstream_client(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_an_overflow_after_many_empty_events_is_retried(make_stack: MakeStack) -> None:
    # a role opener, keep-alive comments and empty chunks (more than a head's worth of
    # events), then the error: nothing reached the client yet, so it is retried
    frames = [
        *sse_data(ROLE),
        *([b": keep-alive\n\n"] * 20),
        *sse_data(*[EMPTY] * 20),
        *sse_data(ERROR_EVENT),
    ]
    await _retried_stream(make_stack, frames)


async def test_a_stream_without_output_is_held_for_a_bounded_time(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a model thinking before its first output: keep-alive comments only, for longer
    # than the hold; the head and what was held go out, and an error after that is the
    # stream's own (relayed, not retried)
    monkeypatch.setattr(relay, "STREAM_HOLD_SECONDS", 0.2)
    frames = [*sse_data(ROLE), *([b": keep-alive\n\n"] * 6), *sse_data(ERROR_EVENT)]
    fake = FakeProvider().then(Reply(events=frames, event_delay=0.1), ok_stream())
    stack = await make_stack(fake)
    started = time.monotonic()
    resp = await stack.client.post(
        "/v1/chat/completions", json=openai_chat(8, model="gpt-4o", stream=True)
    )
    head_after = time.monotonic() - started
    body = await resp.read()
    assert resp.status == 200 and len(fake.requests) == 1
    assert head_after < 0.5 < time.monotonic() - started
    assert body.startswith(sse_data(ROLE)[0]) and b"maximum context length" in body
    assert "x-trimgate-reason" not in resp.headers


async def test_a_responses_stream_failing_after_lifecycle_events_is_retried(
    make_stack: MakeStack,
) -> None:
    created = {"type": "response.created", "response": {"id": "r1", "status": "in_progress"}}
    progress = {"type": "response.in_progress", "response": {"id": "r1"}}
    failed = {
        "type": "response.failed",
        "response": {
            "id": "r1",
            "status": "failed",
            "error": {"code": "context_length_exceeded", "message": MESSAGE},
        },
    }
    done = {"type": "response.output_text.delta", "delta": "fine"}
    fake = FakeProvider().then(
        Reply(events=[*sse_data(created, progress), *([b": ping\n\n"] * 30), *sse_data(failed)]),
        Reply(events=sse_data(created, done)),
    )
    stack = await make_stack(fake)
    body = {**responses_input(8, model="gpt-4o"), "stream": True}
    resp = await stack.client.post("/v1/responses", json=body)
    assert b"fine" in await resp.read() and len(fake.requests) == 2


async def test_an_overflow_after_output_is_relayed_as_it_came(make_stack: MakeStack) -> None:
    frames = [*sse_data(ROLE, text("partial"), ERROR_EVENT)]
    fake = FakeProvider().then(Reply(events=frames, event_delay=0.001))
    stack = await make_stack(fake)
    resp = await stack.client.post(
        "/v1/chat/completions", json=openai_chat(8, model="gpt-4o", stream=True)
    )
    assert await resp.read() == b"".join(frames)
    assert len(fake.requests) == 1 and resp.headers["x-trimgate-retries"] == "0"


async def test_a_stream_is_held_only_until_its_first_output(make_stack: MakeStack) -> None:
    frames = [*sse_data(ROLE, text("first")), *sse_data(text("second"))]
    fake = FakeProvider().then(Reply(events=frames, event_delay=0.5))
    stack = await make_stack(fake)
    resp = await stack.client.post(
        "/v1/chat/completions", json=openai_chat(2, model="gpt-4o", stream=True)
    )
    first = await resp.content.readany()
    assert b"first" in first and b"second" not in first  # role opener and output, no more
    assert (await resp.read()).endswith(b"".join(sse_data(text("second"))))


async def test_a_stream_without_output_is_relayed_past_the_hold_limit(
    make_stack: MakeStack,
) -> None:
    comment = b": " + b"x" * 8190 + b"\n\n"
    frames = [comment] * (STREAM_HOLD_LIMIT // len(comment) + 4) + sse_data(text("late"))
    fake = FakeProvider().then(Reply(events=frames))
    stack = await make_stack(fake)
    resp = await stack.client.post(
        "/v1/chat/completions", json=openai_chat(2, model="gpt-4o", stream=True)
    )
    assert await resp.read() == b"".join(frames) and len(fake.requests) == 1


async def test_an_error_inside_a_choice_is_retried(make_stack: MakeStack) -> None:
    answer = {
        "id": "gen-1",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": ""},
                "finish_reason": "error",
                "error": {"code": 400, "message": MESSAGE},
            }
        ],
    }
    raw = orjson.dumps(answer)
    cut = raw.index(b'"finish_reason"') + 30
    # sent chunked (no Content-Length), in two parts: the first decides to read it whole
    chunked = Reply(events=[raw[:cut], raw[cut:]], headers={"Content-Type": "application/json"})
    chunked.event_delay = 0.01
    fake = FakeProvider().then(chunked, json_reply(openai_ok(10)))
    stack = await make_stack(fake)
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(8, model="gpt-4o"))
    assert resp.status == 200 and (await resp.json())["choices"][0]["finish_reason"] == "stop"
    assert len(fake.requests) == 2 and resp.headers["x-trimgate-reason"] == "reactive"


@pytest.mark.parametrize("ctype", ["text/plain; charset=utf-8", "application/octet-stream"])
async def test_an_error_event_sent_as_another_type_is_held_as_a_stream(
    make_stack: MakeStack, ctype: str
) -> None:
    # a serverless Bedrock gateway answers a plain request with its stream's error event
    # and [DONE], under the Lambda's default type: held as a stream, retried
    frames = [b"data: " + OPENAI_BODY + b"\n\n", b"data: [DONE]\n\n"]
    fake = FakeProvider().then(
        Reply(events=frames, headers={"Content-Type": ctype}, event_delay=0.01),
        json_reply(openai_ok(10)),
    )
    stack = await make_stack(fake)
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(8, model="gpt-4o"))
    assert resp.status == 200 and (await resp.json())["choices"][0]["finish_reason"] == "stop"
    assert len(fake.requests) == 2 and resp.headers["x-trimgate-reason"] == "reactive"
    # a plain answer that starts otherwise, or an event with no error, goes through once
    for said in (b"error: " + OPENAI_BODY, b'data: {"note": "no errors here"}\n\n'):
        fake = FakeProvider().then(Reply(body=said, headers={"Content-Type": ctype}))
        stack = await make_stack(fake)
        resp = await stack.client.post("/v1/chat/completions", json=openai_chat(8, model="gpt-4o"))
        assert resp.status == 200 and await resp.read() == said and len(fake.requests) == 1


async def test_a_plain_answer_slow_to_start_is_not_held_past_the_hold(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a text/plain answer whose first byte comes late: its head goes out within the hold
    monkeypatch.setattr(relay, "STREAM_HOLD_SECONDS", 0.2)
    late = Reply(events=[b"", b"a plain answer"], headers={"Content-Type": "text/plain"})
    late.event_delay = 0.6
    fake = FakeProvider().then(late)
    stack = await make_stack(fake)
    started = time.monotonic()
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(8, model="gpt-4o"))
    head_after = time.monotonic() - started
    assert resp.status == 200 and await resp.read() == b"a plain answer"
    assert head_after < 0.5 < time.monotonic() - started and len(fake.requests) == 1


# Gateways re-wrap the provider's answer: TensorZero nests the provider's raw body in a
# 502 message, LiteLLM's proxy streams its error as a bare ``data: {"error": ...}`` event,
# OpenRouter reports it in a choice after a role opener (tests/data/error_corpus.yaml,
# "gateways and hosted APIs").
TENSORZERO_502 = {
    "error": {
        "message": "All variants failed with errors: tensorzero::default: All model providers"
        " failed to infer with errors: openai: Error 400 Bad Request from openai client: "
        + orjson.dumps({"error": {"message": MESSAGE, "code": "context_length_exceeded"}}).decode()
        + " [request_id: req_1]"
    }
}
LITELLM_CHUNK = {
    "error": {
        "message": "litellm.ContextWindowExceededError: litellm.BadRequestError: "
        "ContextWindowExceededError: OpenAIException - " + MESSAGE,
        "type": None,
        "param": None,
        "code": "400",
    }
}
OPENROUTER_CHOICE = {
    "error": {"code": 400, "message": "prompt is too long: 209303 tokens > 200000 maximum"},
    "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
}


@pytest.mark.parametrize("status", [404, 429])
async def test_an_sdk_exceptions_status_stands_for_the_gateways_guess(
    make_stack: MakeStack, status: int
) -> None:
    # headroom answers the openai SDK's exception with a status guessed from its words:
    # 429 where they hold "limit", 404 where they hold "model"; the status it names stands
    said = "Error code: 400 - " + str({"error": {"message": MESSAGE, "type": "invalid_request"}})
    wrapped = {"error": {"message": said, "type": "rate_limit_exceeded"}}
    fake = FakeProvider().then(json_reply(wrapped, status=status), json_reply(openai_ok(10)))
    stack = await make_stack(fake)
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(8, model="gpt-4o"))
    assert resp.status == 200 and len(fake.requests) == 2
    assert resp.headers["x-trimgate-reason"] == "reactive"
    # ... and one naming a rate limit is one, whatever the wrapper's status
    limited = {"error": {"message": "Error code: 429 - {'error': {'message': 'Rate limit'}}"}}
    fake = FakeProvider().then(json_reply(limited, status=400))
    stack = await make_stack(fake)
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(8, model="gpt-4o"))
    assert resp.status == 400 and len(fake.requests) == 1


async def test_a_gateways_502_nesting_the_overflow_is_retried(make_stack: MakeStack) -> None:
    fake = FakeProvider().then(json_reply(TENSORZERO_502, status=502), json_reply(openai_ok(10)))
    stack = await make_stack(fake)
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(8, model="gpt-4o"))
    assert resp.status == 200 and len(fake.requests) == 2
    assert resp.headers["x-trimgate-reason"] == "reactive"
    assert len(fake.requests[1].body) < len(fake.requests[0].body)


@pytest.mark.parametrize(
    "ident", ["hb38-sagemaker-modelerror-424-tgi-inputs", "hb17-ds-free-api-openai-input-exceeds"]
)
async def test_a_refusal_relayed_as_424_or_502_is_retried(
    make_stack: MakeStack, ident: str
) -> None:
    # SageMaker's 424 quoting its container's 422, a relay's 502 naming the input too long
    (entry,) = [e for e in CORPUS if e["id"] == ident]
    refusal = Reply(status=entry["status"], body=entry["body"].encode())
    fake = FakeProvider().then(refusal, json_reply(openai_ok(10)))
    stack = await make_stack(fake)
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(8, model="gpt-4o"))
    assert resp.status == 200 and len(fake.requests) == 2
    assert resp.headers["x-trimgate-reason"] == "reactive"
    assert len(fake.requests[1].body) < len(fake.requests[0].body)


async def test_a_503_naming_the_window_is_retried_and_a_busy_one_relayed(
    make_stack: MakeStack,
) -> None:
    # afmbridge answers every failed generation with 503; one that speaks of load or
    # waiting is the upstream's own state, relayed as it came
    afmbridge = {
        "error": {
            "message": "Generation failed: Exceeded model context window size",
            "type": "api_error",
        }
    }
    refusal = json_reply(afmbridge, status=503)
    fake = FakeProvider().then(refusal, json_reply(openai_ok(10)))
    stack = await make_stack(fake)
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(8, model="gpt-4o"))
    assert resp.status == 200 and len(fake.requests) == 2
    assert resp.headers["x-trimgate-reason"] == "reactive"
    busy = b'{"error":{"message":"Context window exceeded: server busy, retry later"}}'
    # ... and so is one that says when to come back, whatever its words
    told = json_reply(afmbridge, status=503, **{"Retry-After": "5"})
    for answer in (Reply(status=503, body=busy), told):
        fake = FakeProvider().then(answer)
        stack = await make_stack(fake)
        chat = openai_chat(8, model="gpt-4o")
        resp = await stack.client.post("/v1/chat/completions", json=chat)
        assert resp.status == 503 and len(fake.requests) == 1
        assert "x-trimgate-reason" not in resp.headers
        assert resp.headers.get("Retry-After") == answer.headers.get("Retry-After")


@pytest.mark.parametrize(
    "frames",
    [
        [b": OPENROUTER PROCESSING\n\n", *sse_data(ROLE, OPENROUTER_CHOICE)],
        sse_data(LITELLM_CHUNK),
        # Flowise's event, after a "message:" line no SSE parser knows
        [
            next(e for e in CORPUS if e["id"].startswith("hb60-flowise-v2-prediction-sse"))[
                "body"
            ].encode()
            + b"\n\n"
        ],
        # Crane's error written as text into the data line
        [b"data: error: Prompt length (33210) exceeds server max_seq_len (32768)\n\n"],
        # LocalAI: llama.cpp's refusal as the reply's first text, then the error chunk
        sse_data(ROLE, text(LLAMA_CPP_REFUSAL), {"error": {"message": LLAMA_CPP_REFUSAL}}),
        # LibreChat's agents API: the openai-node SDK's error as the one finished chunk
        [
            *sse_data(
                ROLE,
                {
                    "choices": [
                        {
                            "index": 0,
                            "delta": {"content": "\n\nError: 400 " + MESSAGE},
                            "finish_reason": "stop",
                        }
                    ]
                },
            ),
            b"data: [DONE]\n\n",
        ],
        # LLM-Inference-Service: its refusal as the reply of a chunk finished with "error"
        [
            *sse_data(
                ROLE,
                {
                    "choices": [
                        {"index": 0, "delta": {"content": MESSAGE}, "finish_reason": "error"}
                    ]
                },
            ),
            b"data: [DONE]\n\n",
        ],
        # codex-pool: the upstream's failure as the whole reply, in brackets
        [
            *sse_data(
                ROLE,
                {
                    "choices": [
                        {
                            "index": 0,
                            "delta": {"content": f"[Error: {MESSAGE}]"},
                            "finish_reason": "stop",
                        }
                    ]
                },
            ),
            b"data: [DONE]\n\n",
        ],
        # Open WebUI's pipelines: "Error: 400 - <the provider's body>" as the reply's chunk
        [
            *sse_data(
                ROLE,
                {
                    "choices": [
                        {
                            "index": 0,
                            "delta": {"content": "Error: 400 - " + OPENAI_BODY.decode()},
                            "finish_reason": None,
                        }
                    ]
                },
                {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            ),
            b"data: [DONE]\n\n",
        ],
        # Dify's own stream event, passed on by a dify2openai adapter
        sse_data(
            {
                "event": "error",
                "code": "completion_request_error",
                "status": 400,
                "message": MESSAGE,
            }
        ),
        # agent-cli's memory proxy: OpenAI's pretty-printed body after "data: ", raw
        [
            b"data: "
            + orjson.dumps({"error": {"message": MESSAGE}}, option=orjson.OPT_INDENT_2)
            + b"\n\n"
        ],
        # AutoRAG's proxy: the upstream's body as a line of its own, then [DONE]
        [OPENAI_BODY + b"\n", b"data: [DONE]\n\n"],
    ],
    ids=[
        "openrouter-choice-after-role",
        "litellm-data-error",
        "flowise-event-error",
        "text",
        "localai-reply-then-error",
        "librechat-sdk-error-chunk",
        "error-finish-chunk",
        "bracketed-error-chunk",
        "status-and-body-chunk",
        "dify-event-error",
        "raw-json-after-data",
        "raw-json-line",
    ],
)
async def test_a_gateways_stream_error_before_output_is_retried(
    make_stack: MakeStack, frames: list[bytes]
) -> None:
    await _retried_stream(make_stack, frames)


@pytest.mark.parametrize(
    "after",
    [
        [*sse_data(text(" is what llama.cpp says")), b"data: [DONE]\n\n"],
        [b"data: [DONE]\n\n"],
        [],  # the stream ends there
        # an error that is no overflow: relayed as it came
        sse_data({"error": {"message": "upstream connection reset"}}),
        # one such reply is held a stream: a second is output
        [*sse_data(*[text(LLAMA_CPP_REFUSAL)] * 40), *sse_data(ERROR_EVENT)],
    ],
    ids=["more-output", "done", "end", "other-error", "many-worded"],
)
async def test_a_reply_stating_an_overflow_then_no_error_is_the_answer(
    make_stack: MakeStack, after: list[bytes]
) -> None:
    # a model whose answer starts with an overflow's words: what comes next decides, and
    # with no error the client gets the whole stream, sent once
    frames = [*sse_data(ROLE, text(LLAMA_CPP_REFUSAL)), *after]
    fake = FakeProvider().then(Reply(events=frames, event_delay=0.001))
    stack = await make_stack(fake)
    resp = await stack.client.post(
        "/v1/chat/completions", json=openai_chat(8, model="gpt-4o", stream=True)
    )
    body = await resp.read()
    assert resp.status == 200 and len(fake.requests) == 1
    assert body == b"".join(frames) and "x-trimgate-reason" not in resp.headers


def _worded_anthropic_opening() -> list[bytes]:
    """message_start, an empty text block, llama.cpp's refusal as the first text delta."""
    delta = {"type": "text_delta", "text": LLAMA_CPP_REFUSAL}
    return [
        *sse_data({"type": "message_start", "message": {"content": []}}, event="message_start"),
        *sse_data(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
            event="content_block_start",
        ),
        *sse_data(
            {"type": "content_block_delta", "index": 0, "delta": delta}, event="content_block_delta"
        ),
    ]


async def test_an_anthropic_reply_stating_an_overflow_then_the_error_is_retried(
    make_stack: MakeStack,
) -> None:
    # LocalAI's Anthropic route: message_start, an empty text block, llama.cpp's refusal
    # as the first text delta, then the error event
    failing = [
        *_worded_anthropic_opening(),
        *sse_data(
            {"type": "error", "error": {"type": "api_error", "message": LLAMA_CPP_REFUSAL}},
            event="error",
        ),
    ]
    done = sse_data({"type": "message_start", "message": {"content": []}}, event="message_start")
    fake = FakeProvider().then(Reply(events=failing), Reply(events=done))
    stack = await make_stack(fake)
    resp = await stack.client.post("/v1/messages", json=anthropic_messages(8, stream=True))
    text_ = await resp.text()
    assert resp.status == 200 and LLAMA_CPP_REFUSAL not in text_
    assert len(fake.requests) == 2 and resp.headers["x-trimgate-reason"] == "reactive"


@pytest.mark.parametrize(
    ("closing", "is_error"),
    [
        # LMDeploy: its engine's refusal as the text, then no output token counted for a
        # prompt it counted
        (
            {
                "delta": {"stop_reason": "end_turn"},
                "usage": {"input_tokens": 34120, "output_tokens": 0},
            },
            True,
        ),
        (
            {
                "delta": {"stop_reason": "end_turn"},
                "usage": {"input_tokens": 34120, "output_tokens": 12},
            },
            False,
        ),
        # tududes' claude-proxy: the upstream's refusal as the text, then a stop reason of
        # "error" (Anthropic gives none such)
        ({"delta": {"stop_reason": "error"}, "usage": {"output_tokens": 0}}, True),
        # the model's own stop reason and no count to say otherwise: its answer
        ({"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 0}}, False),
    ],
    ids=["no-output-counted", "output-counted", "stopped-on-error", "end-turn"],
)
async def test_an_anthropic_reply_in_an_overflows_words_is_judged_by_its_close(
    make_stack: MakeStack, closing: dict[str, Any], is_error: bool
) -> None:
    frames = [
        *_worded_anthropic_opening(),
        *sse_data({"type": "content_block_stop", "index": 0}, event="content_block_stop"),
        *sse_data({"type": "message_delta", **closing}, event="message_delta"),
        *sse_data({"type": "message_stop"}, event="message_stop"),
    ]
    done = sse_data({"type": "message_start", "message": {"content": []}}, event="message_start")
    fake = FakeProvider().then(Reply(events=frames, event_delay=0.001), Reply(events=done))
    stack = await make_stack(fake)
    resp = await stack.client.post("/v1/messages", json=anthropic_messages(8, stream=True))
    body = await resp.read()
    assert resp.status == 200
    if is_error:
        assert LLAMA_CPP_REFUSAL.encode() not in body and len(fake.requests) == 2
        assert resp.headers["x-trimgate-reason"] == "reactive"
        assert len(fake.requests[1].body) < len(fake.requests[0].body)
    else:
        assert body == b"".join(frames) and len(fake.requests) == 1
        assert resp.headers["x-trimgate-retries"] == "0"


BRACKETED_ANSWER = "[Error: prompt is too long: 250000 tokens > 200000 maximum]"


def _bracketed_answers() -> dict[str, Reply]:
    """A model's answer that is wholly "[Error: <an overflow's words>]", where a count or a
    finish reason says the model wrote it."""
    whole = openai_ok(10)
    whole["choices"][0]["message"]["content"] = BRACKETED_ANSWER  # usage counts output
    chunk = {
        "choices": [{"index": 0, "delta": {"content": BRACKETED_ANSWER}, "finish_reason": None}]
    }
    finish = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    delta = {"type": "text_delta", "text": BRACKETED_ANSWER}
    usage = {"input_tokens": 12000, "output_tokens": 1}
    anthropic = [
        *sse_data(
            {"type": "message_start", "message": {"content": [], "usage": usage}},
            event="message_start",
        ),
        *sse_data(
            {"type": "content_block_delta", "index": 0, "delta": delta}, event="content_block_delta"
        ),
        *sse_data({"type": "content_block_stop", "index": 0}, event="content_block_stop"),
        *sse_data(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": 25},
            },
            event="message_delta",
        ),
        *sse_data({"type": "message_stop"}, event="message_stop"),
    ]
    return {
        "whole": json_reply(whole),
        "chunk-then-more": Reply(
            events=[*sse_data(ROLE, chunk, text(" Retry later."), finish), b"data: [DONE]\n\n"],
            event_delay=0.001,
        ),
        "anthropic": Reply(events=anthropic, event_delay=0.001),
    }


@pytest.mark.parametrize("kind", ["whole", "chunk-then-more", "anthropic"])
async def test_a_model_answer_in_brackets_is_the_answer(make_stack: MakeStack, kind: str) -> None:
    # a completion whose usage counts output, a chunk with more text after it, an
    # Anthropic reply whose message_delta counts output: the model's, relayed once
    fake = FakeProvider().then(_bracketed_answers()[kind])
    stack = await make_stack(fake)
    if kind == "anthropic":
        resp = await stack.client.post("/v1/messages", json=anthropic_messages(8, stream=True))
    else:
        chat = openai_chat(8, model="gpt-4o", stream=kind != "whole")
        resp = await stack.client.post("/v1/chat/completions", json=chat)
    body = await resp.read()
    assert resp.status == 200 and len(fake.requests) == 1
    assert BRACKETED_ANSWER.encode() in body and resp.headers["x-trimgate-retries"] == "0"


async def test_a_result_objects_error_sent_chunked_is_retried(make_stack: MakeStack) -> None:
    # a Java platform's {"code": 500, "msg": ..., "data": null} with 200, no Content-Length
    raw = orjson.dumps({"code": 500, "msg": MESSAGE, "data": None})
    chunked = Reply(events=[raw[:20], raw[20:]], headers={"Content-Type": "application/json"})
    chunked.event_delay = 0.01
    fake = FakeProvider().then(chunked, json_reply(openai_ok(10)))
    stack = await make_stack(fake)
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(8, model="gpt-4o"))
    assert resp.status == 200 and len(fake.requests) == 2
    assert resp.headers["x-trimgate-reason"] == "reactive"


@pytest.mark.parametrize(
    "ident",
    [
        "hb296-codex-pool-claude-stream-response-failed-as-text",
        "hb296-tududes-claude-proxy-backend-overflow-as-text",
        "hb667-atikur01-foundry-stream-error-as-text",
    ],
)
async def test_a_gateways_anthropic_reply_that_is_its_error_is_retried(
    make_stack: MakeStack, ident: str
) -> None:
    # codex-pool's "[Error: ...]" text closed with no output counted; tududes' 556-character
    # refusal closed with stop_reason "error"; a Foundry proxy's "Error from upstream: 400 -
    # {...}" closed with no output counted: each the server's error, resent trimmed
    (entry,) = [e for e in CORPUS if e["id"] == ident]
    frames = [entry["body"].encode()]
    done = sse_data({"type": "message_start", "message": {"content": []}}, event="message_start")
    fake = FakeProvider().then(Reply(events=frames), Reply(events=done))
    stack = await make_stack(fake)
    resp = await stack.client.post("/v1/messages", json=anthropic_messages(8, stream=True))
    body = await resp.read()
    assert resp.status == 200 and len(fake.requests) == 2
    assert b"context" not in body and resp.headers["x-trimgate-reason"] == "reactive"
    assert len(fake.requests[1].body) < len(fake.requests[0].body)


CLI_REFUSAL = "Prompt is too long"


async def test_a_gateways_bracketed_error_then_its_finish_is_retried(make_stack: MakeStack) -> None:
    # local-ai-runtime writes the upstream's error as one chunk, "[Error: API stream 400:
    # {...}]", and finishes the reply in the next with nothing more: resent trimmed
    finish = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    framed = text("\n[Error: API stream 400: " + OPENAI_BODY.decode() + "]")
    await _retried_stream(make_stack, [*sse_data(ROLE, framed, finish), b"data: [DONE]\n\n"])


async def test_claude_codes_refusal_relayed_as_the_reply_is_retried(make_stack: MakeStack) -> None:
    # bridges over Claude Code stream its "Prompt is too long" as the reply's one text,
    # then a chunk that finishes it: the server's error, resent trimmed
    finish = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    frames = [*sse_data(ROLE, text(CLI_REFUSAL), finish), b"data: [DONE]\n\n"]
    await _retried_stream(make_stack, frames)


async def test_a_model_answering_in_claude_codes_words_is_the_answer(make_stack: MakeStack) -> None:
    # the same words with more after them, or a whole answer that counted the prompt: a
    # model's, relayed once
    finish = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    frames = [*sse_data(ROLE, text(CLI_REFUSAL), text(" here."), finish), b"data: [DONE]\n\n"]
    whole = openai_ok(10)
    whole["choices"][0]["message"]["content"] = CLI_REFUSAL
    fake = FakeProvider().then(Reply(events=frames, event_delay=0.001), json_reply(whole))
    stack = await make_stack(fake)
    chat = openai_chat(8, model="gpt-4o", stream=True)
    resp = await stack.client.post("/v1/chat/completions", json=chat)
    assert await resp.read() == b"".join(frames)
    resp = await stack.client.post("/v1/chat/completions", json={**chat, "stream": False})
    assert (await resp.json())["choices"][0]["message"]["content"] == CLI_REFUSAL
    assert len(fake.requests) == 2 and resp.headers["x-trimgate-retries"] == "0"


async def test_a_model_answer_in_brackets_streamed_is_the_answer(make_stack: MakeStack) -> None:
    # a model that answers "[Error: <an overflow's words>]" token by token: no chunk holds
    # the bracketed whole, so the client gets the stream, sent once
    answer = f"[Error: {MESSAGE}]"
    pieces = [answer[i : i + 12] for i in range(0, len(answer), 12)]
    frames = [*sse_data(ROLE, *[text(piece) for piece in pieces]), b"data: [DONE]\n\n"]
    fake = FakeProvider().then(Reply(events=frames, event_delay=0.001))
    stack = await make_stack(fake)
    resp = await stack.client.post(
        "/v1/chat/completions", json=openai_chat(8, model="gpt-4o", stream=True)
    )
    assert await resp.read() == b"".join(frames) and len(fake.requests) == 1


async def test_a_chat_stream_with_placeholder_usage_is_the_answer(make_stack: MakeStack) -> None:
    # a server (or gateway) that puts usage with 0 output on every chunk: a model's answer
    # in an overflow's words is relayed whole, sent once
    usage = {"prompt_tokens": 40, "completion_tokens": 0}
    frames = [
        *sse_data({**ROLE, "usage": usage}, {**text(LLAMA_CPP_REFUSAL), "usage": usage}),
        *sse_data(
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": usage}
        ),
        b"data: [DONE]\n\n",
    ]
    fake = FakeProvider().then(Reply(events=frames, event_delay=0.001))
    stack = await make_stack(fake)
    resp = await stack.client.post(
        "/v1/chat/completions", json=openai_chat(8, model="gpt-4o", stream=True)
    )
    assert await resp.read() == b"".join(frames) and len(fake.requests) == 1
    assert resp.headers["x-trimgate-retries"] == "0"


_LENGTH_STOP: dict[str, Any] = {"index": 0, "delta": {}, "finish_reason": "length"}


def _unspent(stream: bool) -> tuple[Reply, Reply]:
    """A local server's answer to a prompt that fills the window (mlx-omnia, InfiniLM):
    stopped at "length" with nothing said and no usage, streamed or whole; and an answer."""
    if stream:
        frames = [*sse_data(ROLE, {"choices": [_LENGTH_STOP]}), b"data: [DONE]\n\n"]
        return Reply(events=frames, event_delay=0.001), ok_stream()
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": ""},
        "finish_reason": "length",
    }
    return json_reply({"object": "chat.completion", "choices": [choice]}), json_reply(openai_ok(10))


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("unset", [{}, {"max_tokens": None}], ids=["absent", "null"])
async def test_an_unlimited_answer_stopped_before_any_output_is_retried(
    make_stack: MakeStack, stream: bool, unset: dict[str, Any]
) -> None:
    # no output limit in the request: only the window stops an answer before its first
    # token, so the retry sends fewer turns
    first, answer = _unspent(stream)
    fake = FakeProvider().then(first, answer)
    stack = await make_stack(fake)
    body = openai_chat(8, model="gpt-4o", stream=stream, **unset)
    resp = await stack.client.post("/v1/chat/completions", json=body)
    assert resp.status == 200 and len(fake.requests) == 2
    assert resp.headers["x-trimgate-reason"] == "reactive"
    assert len(fake.requests[1].body) < len(fake.requests[0].body)
    assert (b"fine" in await resp.read()) if stream else (await resp.json())["choices"]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    "limit",
    [
        {"max_tokens": 64},
        {"max_completion_tokens": 64},
        {"max_tokens": 64.0},  # a float or a string, as pydantic servers take them
        {"max_tokens": "64"},
        {"n_predict": 64},  # llama.cpp's own name
        {"max_new_tokens": 64},
        {"max_output_tokens": 64},
        {"max_length": 64},
    ],
    ids=[
        "max_tokens",
        "max_completion_tokens",
        "float",
        "string",
        "n_predict",
        "new_tokens",
        "output_tokens",
        "max_length",
    ],
)
async def test_a_limited_answer_stopped_before_any_output_is_the_answer(
    make_stack: MakeStack, stream: bool, limit: dict[str, Any]
) -> None:
    # with an output limit, a model whose hidden reasoning spent it answers the same
    first, _ = _unspent(stream)
    fake = FakeProvider().then(first)
    stack = await make_stack(fake)
    body = openai_chat(8, model="gpt-4o", stream=stream, **limit)
    resp = await stack.client.post("/v1/chat/completions", json=body)
    assert resp.status == 200 and len(fake.requests) == 1
    assert resp.headers["x-trimgate-retries"] == "0"
    assert b'"length"' in await resp.read()


async def test_an_unlimited_answer_stopped_after_output_is_the_answer(
    make_stack: MakeStack,
) -> None:
    # text first, a reply held for its words, or an output the usage counts (hidden
    # reasoning), on the stop or in OpenAI's usage chunk after it: the answer as it came
    counted = {"prompt_tokens": 4000, "completion_tokens": 300, "total_tokens": 4300}
    stop = {"choices": [_LENGTH_STOP]}
    done = b"data: [DONE]\n\n"
    for frames in (
        [*sse_data(ROLE, text("partial"), stop), done],
        [*sse_data(ROLE, text(LLAMA_CPP_REFUSAL), stop), done],
        [*sse_data(ROLE, {**stop, "usage": counted}), done],
        [*sse_data(ROLE, {**stop, "usage": None}, {"choices": [], "usage": counted}), done],
        [*sse_data(ROLE, stop, {"choices": [], "x_groq": {"usage": counted}}), done],
        # a comment between the stop and its usage; the usage as the last bytes, no blank line
        [*sse_data(ROLE, stop), b": keep-alive\n\n", *sse_data({"choices": [], "usage": counted})],
        [*sse_data(ROLE, stop), b"data: " + orjson.dumps({"choices": [], "usage": counted})],
        # another choice's output after the first one's stop (n=2)
        [*sse_data(ROLE, stop, {"choices": [{"index": 1, "delta": {"content": "hi"}}]}), done],
    ):
        fake = FakeProvider().then(Reply(events=frames, event_delay=0.001))
        stack = await make_stack(fake)
        resp = await stack.client.post(
            "/v1/chat/completions", json=openai_chat(8, model="gpt-4o", stream=True)
        )
        assert await resp.read() == b"".join(frames) and len(fake.requests) == 1


@pytest.mark.parametrize(
    "frames",
    [
        # OpenAI's usage chunk after the stop, counting nothing past the prompt
        [
            *sse_data(ROLE, {"choices": [_LENGTH_STOP], "usage": None}),
            *sse_data({"choices": [], "usage": {"prompt_tokens": 9000, "completion_tokens": 0}}),
            b"data: [DONE]\n\n",
        ],
        # the stop as the stream's last bytes, with no blank line after it
        [*sse_data(ROLE), b"data: " + orjson.dumps({"choices": [_LENGTH_STOP]})],
        # an error after the stop is read for itself (its counts aim the retry)
        [*sse_data(ROLE, {"choices": [_LENGTH_STOP]}, ERROR_EVENT), b"data: [DONE]\n\n"],
        # Ollama: the one token a full window left counted, nothing written
        [
            *sse_data(ROLE, {"choices": [_LENGTH_STOP]}),
            *sse_data({"choices": [], "usage": {"prompt_tokens": 4095, "completion_tokens": 1}}),
            b"data: [DONE]\n\n",
        ],
    ],
    ids=["usage-chunk", "no-blank-line", "error-after", "one-token"],
)
async def test_an_unlimited_stop_is_read_however_the_stream_ends(
    make_stack: MakeStack, frames: list[bytes]
) -> None:
    await _retried_stream(make_stack, frames)


_PROMPT_ONLY = {"prompt_tokens": 9000, "completion_tokens": 0, "total_tokens": 9000}


@pytest.mark.parametrize(
    "frames",
    [
        # LlamaEdge: the stop with no usage, then OpenAI's usage chunk counting the prompt alone
        [
            *sse_data(ROLE, {"choices": [_LENGTH_STOP]}),
            *sse_data({"choices": [], "usage": _PROMPT_ONLY}),
            b"data: [DONE]\n\n",
        ],
        # the usage on the stop itself; the usage as the stream's last bytes
        [*sse_data(ROLE, {"choices": [_LENGTH_STOP], "usage": _PROMPT_ONLY}), b"data: [DONE]\n\n"],
        [
            *sse_data(ROLE, {"choices": [_LENGTH_STOP]}),
            b": keep-alive\n\n",
            b"data: " + orjson.dumps({"choices": [], "usage": _PROMPT_ONLY}),
        ],
    ],
    ids=["usage-chunk", "usage-on-stop", "usage-last"],
)
async def test_a_limited_stop_whose_usage_counts_the_prompt_alone_is_retried(
    make_stack: MakeStack, frames: list[bytes]
) -> None:
    # whatever the output limit, an answer that stopped at "length" counting no output
    # token and nothing past the prompt was stopped by the window, streamed as whole
    fake = FakeProvider().then(Reply(events=frames, event_delay=0.001), ok_stream())
    stack = await make_stack(fake)
    body = openai_chat(8, model="gpt-4o", stream=True, max_tokens=64)
    resp = await stack.client.post("/v1/chat/completions", json=body)
    assert resp.status == 200 and len(fake.requests) == 2 and b"fine" in await resp.read()
    assert resp.headers["x-trimgate-reason"] == "reactive"
    assert len(fake.requests[1].body) < len(fake.requests[0].body)


async def test_a_limited_stop_whose_usage_counts_more_is_the_answer(make_stack: MakeStack) -> None:
    # hidden reasoning counted (as output, in the total or in its details), a cached
    # prompt, no usage at all: a model may have spent the limit; the answer as it came
    stop = {"choices": [_LENGTH_STOP]}
    done = b"data: [DONE]\n\n"
    for usage in (
        {**_PROMPT_ONLY, "completion_tokens": 64, "total_tokens": 9064},
        {**_PROMPT_ONLY, "total_tokens": 9064},
        {**_PROMPT_ONLY, "completion_tokens_details": {"reasoning_tokens": 64}},
        {**_PROMPT_ONLY, "prompt_tokens_details": {"cached_tokens": 8000}},
        None,
    ):
        frames = [*sse_data(ROLE, stop, {"choices": [], "usage": usage}), done]
        fake = FakeProvider().then(Reply(events=frames, event_delay=0.001))
        stack = await make_stack(fake)
        body = openai_chat(8, model="gpt-4o", stream=True, max_tokens=64)
        resp = await stack.client.post("/v1/chat/completions", json=body)
        assert await resp.read() == b"".join(frames) and len(fake.requests) == 1, usage


async def test_only_the_first_answer_stopped_before_output_is_read(
    make_stack: MakeStack,
) -> None:
    # a gateway that caps the output itself, beside a model that reasons unseen, answers
    # every attempt so: one retry, whose answer goes back as it came
    first, _ = _unspent(True)
    again, _ = _unspent(True)
    fake = FakeProvider().then(first, again)
    stack = await make_stack(fake)
    body = openai_chat(8, model="gpt-4o", stream=True)
    resp = await stack.client.post("/v1/chat/completions", json=body)
    assert await resp.read() == b"".join(again.events or [])
    assert len(fake.requests) == 2 and resp.headers["x-trimgate-retries"] == "1"


async def test_an_unlimited_stop_under_another_success_status_is_the_answer(
    make_stack: MakeStack,
) -> None:
    whole, _ = _unspent(False)
    fake = FakeProvider().then(json_reply(whole.data, status=201))
    stack = await make_stack(fake)
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(8, model="gpt-4o"))
    assert resp.status == 201 and len(fake.requests) == 1
    assert await resp.json() == whole.data


@pytest.mark.parametrize(
    "envelope",
    [
        {"status": "error", "msg": MESSAGE, "data": None, "data2": None},  # Casibase
        {"status_code": 500, "status_message": MESSAGE},  # Bisheng
        {"success": False, "data": MESSAGE},  # BRConnector
        {"code": 500, "msg": MESSAGE, "data": None},  # a Java platform's result object
    ],
    ids=["status-error", "status-code", "success-false", "code"],
)
async def test_a_platforms_error_envelope_sent_with_200_is_retried(
    make_stack: MakeStack, envelope: dict[str, Any]
) -> None:
    fake = FakeProvider().then(json_reply(envelope), json_reply(openai_ok(10)))
    stack = await make_stack(fake)
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(8, model="gpt-4o"))
    assert resp.status == 200 and len(fake.requests) == 2
    assert resp.headers["x-trimgate-reason"] == "reactive"
    assert (await resp.json())["choices"][0]["message"]["content"] == "ok"


OWN = "sequence budget blown: (?P<real>\\d+)/(?P<max>\\d+)"
OWN_ERROR = {"error": {"message": "sequence budget blown: 9000/4096", "type": "server_error"}}


def test_the_own_wording_is_unknown_without_the_pattern() -> None:
    body = orjson.dumps(OWN_ERROR)
    assert detect_overflow(400, body, wire_format="openai") is None


async def test_an_upstreams_own_overflow_patterns_are_honoured_there_only(
    make_stack: MakeStack,
) -> None:
    fake = FakeProvider()
    stack = await make_stack(fake)
    base = str(stack.fake_server.make_url("")).rstrip("/")
    upstreams = {
        "mine": {
            "provider": "openai",
            "base_url": base,
            "prefix": "/mine",
            "overflow_patterns": [OWN],
        },
        "other": {"provider": "openai", "base_url": base, "prefix": "/other"},
    }
    stack = await make_stack(fake, upstreams=upstreams)
    body = openai_chat(8, model="gpt-4o")

    fake.then(json_reply(OWN_ERROR, status=400))
    resp = await stack.client.post("/mine/v1/chat/completions", json=body)
    assert resp.status == 200 and resp.headers["x-trimgate-reason"] == "reactive"
    first, second = fake.requests[-2:]
    assert len(second.body) < len(first.body) * 4096 / 9000
    labels = {"upstream": "mine", "model": "gpt-4o"}
    assert stack.metric("trimgate_context_overflows_total", **labels) == 1

    # (the same body passed there before: a plain error to it is not probed either)
    fake.then(json_reply(openai_ok(10)))
    assert (await stack.client.post("/other/v1/chat/completions", json=body)).status == 200
    seen = len(fake.requests)
    fake.then(json_reply(OWN_ERROR, status=400))
    resp = await stack.client.post("/other/v1/chat/completions", json=body)
    assert resp.status == 400 and await resp.json() == OWN_ERROR
    assert len(fake.requests) == seen + 1 and resp.headers["x-trimgate-retries"] == "0"

    # an answer that succeeds is never matched, even when its text matches
    fake.then(json_reply({**openai_ok(10), "note": "sequence budget blown: 9000/4096"}))
    resp = await stack.client.post("/mine/v1/chat/completions", json=body)
    assert resp.status == 200 and len(fake.requests) == seen + 2


WINDOW_STOP = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "glm-4.6",
    "content": [],
    "stop_reason": "model_context_window_exceeded",
    "usage": {"input_tokens": 0, "output_tokens": 0},
}


def _incomplete(
    output: list[dict[str, Any]], produced: int = 0, prompt: int = 199990
) -> dict[str, Any]:
    """A Responses object left incomplete for max_output_tokens, as LiteLLM answers a
    Claude window stop before any output."""
    usage = {"input_tokens": prompt, "output_tokens": produced, "total_tokens": prompt + produced}
    return {
        "id": "resp_1",
        "object": "response",
        "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
        "output": output,
        "usage": usage,
    }


_REASONING: dict[str, Any] = {"type": "reasoning", "id": "rs_1", "summary": []}


_EMPTY_MESSAGE: dict[str, Any] = {
    "type": "message",
    "id": "msg_1",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "", "annotations": []}],
}


def _incomplete_reply(stream: bool, response: dict[str, Any]) -> Reply:
    if not stream:
        return json_reply(response)
    part = _EMPTY_MESSAGE["content"][0]
    opened = {**response, "status": "in_progress", "output": [], "usage": None}
    events = [
        {"type": "response.created", "response": opened},
        {"type": "response.output_item.added", "item": {**_EMPTY_MESSAGE, "content": []}},
        {"type": "response.content_part.added", "part": part},
        {"type": "response.output_text.done", "text": ""},
        {"type": "response.content_part.done", "part": part},
        {"type": "response.output_item.done", "item": _EMPTY_MESSAGE},
        {"type": "response.incomplete", "response": response},
    ]
    return Reply(events=[b for e in events for b in sse_data(e, event=e["type"])])


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    "response",
    [
        _incomplete([_EMPTY_MESSAGE]),
        # the window's last tokens spent on reasoning (foveance over vLLM's gpt-oss)
        _incomplete([_REASONING], 128, prompt=130944),
    ],
    ids=["empty", "reasoned"],
)
async def test_an_unlimited_response_left_incomplete_before_output_is_retried(
    make_stack: MakeStack, stream: bool, response: dict[str, Any]
) -> None:
    # a Responses request with no max_output_tokens: only the window leaves its answer
    # incomplete for max_output_tokens with no text and the prompt nearly all of it, so
    # the retry sends fewer turns
    first = _incomplete_reply(stream, response)
    fake = FakeProvider().then(first, json_reply(responses_cached_ok(900, 0)))
    stack = await make_stack(fake)
    body = {**responses_input(8, model="gpt-4o"), "stream": stream}
    resp = await stack.client.post("/v1/responses", json=body)
    assert resp.status == 200 and len(fake.requests) == 2
    assert resp.headers["x-trimgate-reason"] == "reactive"
    assert len(fake.requests[1].body) < len(fake.requests[0].body)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    ("limit", "response"),
    [
        ({"max_output_tokens": 64}, _incomplete([_EMPTY_MESSAGE])),
        # hidden reasoning spent a server's default cap after a short prompt: a reasoning
        # item, or output tokens counted
        ({}, _incomplete([_REASONING], 300, prompt=4000)),
        ({}, _incomplete([], 300, prompt=4000)),
    ],
    ids=["limited", "reasoning", "counted"],
)
async def test_a_response_left_incomplete_otherwise_is_the_answer(
    make_stack: MakeStack, stream: bool, limit: dict[str, Any], response: dict[str, Any]
) -> None:
    fake = FakeProvider().then(_incomplete_reply(stream, response))
    stack = await make_stack(fake)
    body = {**responses_input(8, model="gpt-4o"), "stream": stream, **limit}
    resp = await stack.client.post("/v1/responses", json=body)
    assert resp.status == 200 and len(fake.requests) == 1
    assert resp.headers["x-trimgate-retries"] == "0"
    assert b"max_output_tokens" in await resp.read()


@pytest.mark.parametrize("stream", [False, True])
async def test_a_window_stop_before_any_output_is_retried(
    make_stack: MakeStack, stream: bool
) -> None:
    # Z.ai's Anthropic endpoint answers an overflow with 200, no content and this
    # stop_reason (as a stream: message_start, then message_delta saying so)
    if stream:
        start = {"type": "message_start", "message": {**WINDOW_STOP, "stop_reason": None}}
        delta = {"type": "message_delta", "delta": {"stop_reason": WINDOW_STOP["stop_reason"]}}
        first = Reply(
            events=[
                *sse_data(start, event="message_start"),
                *sse_data(delta, event="message_delta"),
                *sse_data({"type": "message_stop"}, event="message_stop"),
            ]
        )
    else:
        first = json_reply(WINDOW_STOP)
    fake = FakeProvider().then(first, json_reply(anthropic_ok()))
    stack = await make_stack(fake)
    body = anthropic_messages(8, model="claude-sonnet-4-5")
    resp = await stack.client.post("/v1/messages", json=body)
    assert resp.status == 200 and len(fake.requests) == 2
    assert resp.headers["x-trimgate-reason"] == "reactive"
    assert (await resp.json())["content"] != []


async def test_a_window_stop_after_output_is_the_answer(make_stack: MakeStack) -> None:
    truncated = {**WINDOW_STOP, "content": [{"type": "text", "text": "partial answer"}]}
    fake = FakeProvider().then(json_reply(truncated))
    stack = await make_stack(fake)
    resp = await stack.client.post("/v1/messages", json=anthropic_messages(8))
    assert resp.status == 200 and len(fake.requests) == 1
    assert (await resp.json()) == truncated


def _glm_window_stop(delta: dict[str, Any]) -> dict[str, Any]:
    """A chunk of GLM's OpenAI-compatible stream finished at the window (Z.ai, 2026)."""
    choice = {"index": 0, "finish_reason": "model_context_window_exceeded", "delta": delta}
    return {"id": "2026032301", "created": 1774204420, "model": "glm-5", "choices": [choice]}


@pytest.mark.parametrize("stream", [False, True])
async def test_an_openai_format_window_stop_before_any_output_is_retried(
    make_stack: MakeStack, stream: bool
) -> None:
    # GLM's OpenAI-compatible API ends a prompt over its window with that finish_reason
    # and nothing said: as a chunk, then [DONE]; or as a whole completion
    if stream:
        chunk = _glm_window_stop({"role": "assistant", "content": ""})
        first = Reply(events=[*sse_data(chunk), b"data: [DONE]\n\n"])
        retry = ok_stream()
    else:
        reply = _glm_window_stop({})
        reply["choices"][0]["message"] = reply["choices"][0].pop("delta")
        reply["choices"][0]["message"].update(role="assistant", content="")
        first, retry = json_reply(reply), json_reply(openai_ok(10))
    fake = FakeProvider().then(first, retry)
    stack = await make_stack(fake)
    resp = await stack.client.post(
        "/v1/chat/completions", json=openai_chat(8, model="glm-5", stream=stream)
    )
    assert resp.status == 200 and len(fake.requests) == 2
    assert resp.headers["x-trimgate-reason"] == "reactive"


_OPENER = {"role": "assistant", "content": ""}


@pytest.mark.parametrize(
    "chunks",
    [
        [_glm_window_stop({"role": "assistant", "content": "partial"})],
        [_glm_window_stop({**_OPENER, "tool_calls": [{"index": 0, "id": "c1"}]})],
        [_glm_window_stop({**_OPENER, "reasoning_content": "thinking"})],
        # a text chunk, then the stop's tail with nothing in it
        [{"choices": [{"index": 0, "delta": {"content": "partial"}}]}, _glm_window_stop(_OPENER)],
        # a gateway's translated tail ("delta": {}) after chunks in keys no reader knows
        [{"choices": [{"index": 0, "delta": {"thinking": "hm"}}]}, _glm_window_stop({})],
        # usage that counts output: something was written, whatever the chunks showed
        [{**_glm_window_stop(_OPENER), "usage": {"prompt_tokens": 9, "completion_tokens": 30}}],
    ],
    ids=["text", "tool-call", "reasoning", "text-then-tail", "gateway-tail", "usage-output"],
)
async def test_an_openai_format_window_stop_with_output_is_the_answer(
    make_stack: MakeStack, chunks: list[dict[str, Any]]
) -> None:
    frames = [*sse_data(*chunks), b"data: [DONE]\n\n"]
    fake = FakeProvider().then(Reply(events=frames))
    stack = await make_stack(fake)
    resp = await stack.client.post(
        "/v1/chat/completions", json=openai_chat(8, model="glm-5", stream=True)
    )
    assert await resp.read() == b"".join(frames) and len(fake.requests) == 1


async def test_a_whole_openai_format_window_stop_that_counted_output_is_the_answer(
    make_stack: MakeStack,
) -> None:
    # a gateway's whole answer over Claude, whose thinking it dropped but counted
    reply = _glm_window_stop({})
    reply["choices"][0].pop("delta")
    reply["choices"][0]["message"] = {"role": "assistant", "content": ""}
    reply["usage"] = {"prompt_tokens": 9000, "completion_tokens": 412, "total_tokens": 9412}
    fake = FakeProvider().then(json_reply(reply))
    stack = await make_stack(fake)
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(8, model="glm-5"))
    assert await resp.json() == reply and len(fake.requests) == 1


@pytest.mark.parametrize(
    "raw",
    [
        # xllm writes its error raw into the event stream it opened, and ends it
        b"Prompt is too long",
        # FastDeploy's push mode: JSON lines with no SSE field
        b'{"req_id": "5f1c2a7e", "error_msg": "Input text is too long, input_ids_len (8300)'
        b' + min_dec_len (1) >= max_seq_len ", "error_code": 200}\n',
        # CLIProxyAPI 1.0: keep-alive comments every 500 ms, then its error JSON, no field
        b": CLI-PROXY-API PROCESSING\n\n"
        * 3
        + b'{"error":{"message":"api streaming request failed with status 400: The input'
        b' token count (9000) exceeds the maximum number of tokens allowed (8192).",'
        b'"type":"server_error"}}',
    ],
    ids=["text", "json-line", "after-comments"],
)
async def test_an_overflow_written_raw_into_a_stream_is_retried(
    make_stack: MakeStack, raw: bytes
) -> None:
    await _retried_stream(make_stack, [raw])


def _loading_chunks(model: str) -> list[bytes]:
    """llama-swap's loading status (sendLoadingState), as it streams it while it starts a
    model: bits of text as chunks of reasoning and nothing else."""
    said = f"━━━━━\nllama-swap loading model: {model}\n\nDone! (0.93s)\n━━━━━\n \n"
    bits = [said[at : at + 5] for at in range(0, len(said), 5)]
    return [sse_data({"choices": [{"delta": {"reasoning_content": bit}}]})[0] for bit in bits]


async def test_an_overflow_after_a_model_loading_status_is_retried(
    make_stack: MakeStack,
) -> None:
    # llama-swap then hands the stream to llama-server, whose 400 body it copies in raw
    error = {
        "error": {
            "code": 400,
            "message": "request (9416 tokens) exceeds the available context size (8192 tokens),"
            " try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 9416,
            "n_ctx": 8192,
        }
    }
    await _retried_stream(make_stack, [*_loading_chunks("qwen3-30b"), orjson.dumps(error)])


async def test_a_model_loading_status_then_output_is_relayed_whole(
    make_stack: MakeStack,
) -> None:
    loading = _loading_chunks("qwen3-30b")
    answer = [sse_data(text("fine"))[0], b"data: [DONE]\n\n"]
    fake = FakeProvider().then(Reply(events=[*loading, *answer]))
    stack = await make_stack(fake)
    resp = await stack.client.post(
        "/v1/chat/completions", json=openai_chat(8, model="gpt-4o", stream=True)
    )
    assert resp.status == 200 and await resp.read() == b"".join([*loading, *answer])
    assert len(fake.requests) == 1


async def test_a_raw_error_ended_by_a_blank_line_is_retried(make_stack: MakeStack) -> None:
    await _retried_stream(make_stack, [b"Prompt is too long\n\n"])


@pytest.mark.parametrize("kind", ["error", "stream"])
async def test_a_bug_in_reading_an_answer_lets_it_through(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug in a reader")

    if kind == "error":
        monkeypatch.setattr(relay, "detect_unfixable", broken)
        first = json_reply({"error": {"message": "something else"}}, status=400)
    else:
        monkeypatch.setattr(relay, "stream_event_output", broken)
        first = ok_stream()
    fake = FakeProvider().then(first)
    stack = await make_stack(fake)
    chat = openai_chat(8, model="gpt-4o", stream=kind == "stream")
    resp = await stack.client.post("/v1/chat/completions", json=chat)
    body = await resp.read()
    assert len(fake.requests) == 1
    if kind == "error":
        assert resp.status == 400 and orjson.loads(body) == {"error": {"message": "something else"}}
    else:
        assert resp.status == 200 and b"fine" in body and body.endswith(b"data: [DONE]\n\n")


@pytest.mark.parametrize(
    "raw",
    [b"Internal error, please retry", b"Rate limit reached: input tokens per minute exceeded"],
    ids=["fault", "rate"],
)
async def test_other_text_written_raw_into_a_stream_is_relayed(
    make_stack: MakeStack, raw: bytes
) -> None:
    fake = FakeProvider().then(Reply(events=[raw]))
    stack = await make_stack(fake)
    resp = await stack.client.post(
        "/v1/chat/completions", json=openai_chat(8, model="gpt-4o", stream=True)
    )
    assert resp.status == 200 and await resp.read() == raw
    assert len(fake.requests) == 1 and "x-trimgate-reason" not in resp.headers


# servers that answer an error as a 200 completion whose reply is its text
SPOOFERS = (
    "oai-reverse-proxy",
    "alcf FIRST",
    "zuisong/gemini-openai-proxy",
    "gemini-openai-proxy (zuisong",
    "GPT4All desktop",
    "RelayFreeLLM",
    "Apple-Intelligence-API",
    "gomcptest",
)
SPOOFED = {e["id"]: e for e in CORPUS if e["server"].startswith(SPOOFERS) and e["status"] == 200}


@pytest.mark.parametrize("ident", sorted(SPOOFED), ids=sorted(SPOOFED))
async def test_an_error_sent_as_a_200_completion_is_read_as_its_status_says(
    make_stack: MakeStack, ident: str
) -> None:
    # oai-reverse-proxy sends its own errors as a completion whose reply text is the
    # error, Argonne's FIRST as a chunk of its own id, zuisong's proxy Google's SDK error
    # as the reply, GPT4All its backend's refusal, RelayFreeLLM its last upstream's error
    # body after "All retries failed", Apple-Intelligence-API "Error: <its refusal>",
    # gomcptest its own words around the upstream's: an overflow is retried, anything else
    # (a quota, a safety block) goes back as it came
    entry = SPOOFED[ident]
    raw = entry["body"].encode()
    first = Reply(events=[raw]) if entry["stream"] else Reply(body=raw)
    fake = FakeProvider().then(first, ok_stream() if entry["stream"] else json_reply(openai_ok(5)))
    stack = await make_stack(fake)
    chat = openai_chat(8, model="gpt-4o", stream=entry["stream"])
    resp = await stack.client.post("/v1/chat/completions", json=chat)
    body = await resp.read()
    assert resp.status == 200
    if entry["overflow"]:
        assert len(fake.requests) == 2 and raw not in body
        assert resp.headers["x-trimgate-reason"] == "reactive"
    else:
        assert len(fake.requests) == 1 and body == raw


async def test_an_error_sent_with_another_success_status_is_read_too(
    make_stack: MakeStack,
) -> None:
    # NovelAI answers its errors with 201 Created
    raw = (
        b'{"error":"ModelMaxLength: model \'euterpe-v2\' has 2048 tokens maximum, 2584 tokens'
        b' context requested"}'
    )
    fake = FakeProvider().then(
        Reply(status=201, body=raw, headers={"Content-Type": "application/json"}),
        json_reply(openai_ok(5)),
    )
    stack = await make_stack(fake)
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(8, model="gpt-4o"))
    assert resp.status == 200 and raw not in await resp.read()
    assert len(fake.requests) == 2 and resp.headers["x-trimgate-reason"] == "reactive"


@pytest.mark.parametrize("status", [400, 404])
async def test_an_http_exception_returned_with_200_is_read_as_its_status(
    make_stack: MakeStack, status: int
) -> None:
    # gallama returns FastAPI's HTTPException rather than raising it: an overflow in it is
    # retried, a 404 in it goes back as it came
    raw = orjson.dumps(
        {
            "status_code": status,
            "detail": "Token length exceeds max length of 32768",
            "headers": None,
        }
    )
    fake = FakeProvider().then(Reply(body=raw), json_reply(openai_ok(5)))
    stack = await make_stack(fake)
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(8, model="gpt-4o"))
    body = await resp.read()
    assert resp.status == 200
    if status == 400:
        assert len(fake.requests) == 2 and raw not in body
        assert resp.headers["x-trimgate-reason"] == "reactive"
    else:
        assert len(fake.requests) == 1 and body == raw


async def _retried_stream(make_stack: MakeStack, frames: list[bytes]) -> None:
    """A stream whose error arrives before any output: the client gets the retry's answer,
    with none of the error's words, and the retry sent less."""
    fake = FakeProvider().then(Reply(events=frames, event_delay=0.001), ok_stream())
    stack = await make_stack(fake)
    resp = await stack.client.post(
        "/v1/chat/completions", json=openai_chat(8, model="gpt-4o", stream=True)
    )
    body = await resp.read()
    assert resp.status == 200 and len(fake.requests) == 2
    assert b"fine" in body and b"too long" not in body and b"maximum context" not in body
    assert resp.headers["x-trimgate-reason"] == "reactive"
    assert len(fake.requests[1].body) < len(fake.requests[0].body)
