# A fake provider with a context window and a prompt cache, for the session simulator.
#
# Unlike bench/fake_provider.py (cheap, for throughput), this one parses every request and
# counts tokens ITS OWN way, which is deliberately not trimgate's estimate:
#
#   a unit's tokens = ceil(len(canonical JSON of the unit) / 3.5), + 4 for a message
#   canonical JSON  = orjson with sorted keys, so the bytes trimgate re-encodes or keeps
#                     count alike
#   units           = OpenAI Chat: [tools] + messages (the system prompt is a message);
#                     Anthropic:   [tools] + [system] + messages
#
# Window: prompt tokens over the window get the provider's own context-overflow error
# (OpenAI 400 context_length_exceeded; Anthropic 400 invalid_request_error "prompt is too
# long"); prompt + max_tokens over it get the itemised variants both providers send.
#
# Prompt cache, per model: the longest prefix of units (message granularity) that some
# earlier successful request of the run also began with; only the last `memory` requests
# are remembered. OpenAI style: nothing under 1,024 tokens, then whole 128-token steps
# (usage.prompt_tokens_details.cached_tokens). Anthropic style: the whole prefix from 1,024
# tokens on, as if the client put a cache breakpoint on its last message (usage
# cache_read_input_tokens; the rest is written: cache_creation_input_tokens; input_tokens 0).
#
# The reply is scripted by the simulator (`CacheProvider.reply`): a text and at most one
# tool call, rendered in the request's shape, as JSON or as an SSE stream. Every call is
# recorded (`CacheProvider.calls`) with the digests of the messages it carried, so the
# simulator can tell which of its messages trimgate forwarded.

from __future__ import annotations

import hashlib
import math
import time
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
from aiohttp import web

Shape = Literal["openai", "anthropic"]

MESSAGE_OVERHEAD = 4
BYTES_PER_TOKEN = 3.5
CACHE_MIN_TOKENS = 1024
OPENAI_CACHE_STEP = 128
DEFAULT_MEMORY = 64  # recent successful requests whose prefixes stay in the cache


def canonical(item: object) -> bytes:
    return orjson.dumps(item, option=orjson.OPT_SORT_KEYS)


def digest(item: object) -> bytes:
    """A message's identity, whatever byte layout a proxy forwards it in."""
    return hashlib.blake2b(canonical(item), digest_size=16).digest()


def unit_tokens(item: object, *, message: bool) -> int:
    n = math.ceil(len(canonical(item)) / BYTES_PER_TOKEN)
    return n + MESSAGE_OVERHEAD if message else n


def cacheable(style: Shape, prefix_tokens: int) -> int:
    """The cached tokens a provider reports for a shared prefix of `prefix_tokens`."""
    if prefix_tokens < CACHE_MIN_TOKENS:
        return 0
    if style == "openai":
        steps = (prefix_tokens - CACHE_MIN_TOKENS) // OPENAI_CACHE_STEP
        return CACHE_MIN_TOKENS + steps * OPENAI_CACHE_STEP
    return prefix_tokens


class PrefixCache:
    """The prefixes of the last `memory` requests, as chained hashes of their units."""

    def __init__(self, memory: int = DEFAULT_MEMORY) -> None:
        self._recent: deque[tuple[bytes, ...]] = deque()
        self._count: Counter[bytes] = Counter()
        self._memory = max(1, memory)

    @staticmethod
    def chain(units: Sequence[bytes]) -> list[bytes]:
        out: list[bytes] = []
        h = b""
        for u in units:
            h = hashlib.blake2b(h + u, digest_size=16).digest()
            out.append(h)
        return out

    def shared_units(self, chain: Sequence[bytes]) -> int:
        """How many leading units some remembered request also began with."""
        n = 0
        for h in chain:  # a remembered request's prefixes are all remembered
            if self._count[h] <= 0:
                break
            n += 1
        return n

    def store(self, chain: Sequence[bytes]) -> None:
        self._recent.append(tuple(chain))
        self._count.update(chain)
        while len(self._recent) > self._memory:
            self._count.subtract(self._recent.popleft())


@dataclass(frozen=True)
class Reply:
    """What the scripted model answers: a text and at most one tool call."""

    text: str
    tool_id: str | None = None
    tool_name: str | None = None
    tool_args: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Call:
    """One request the fake received."""

    seq: int
    model: str
    shape: Shape
    status: int
    stream: bool
    prompt_tokens: int  # the fake's own count
    cached_tokens: int  # cache read (0 for a refused call)
    message_digests: tuple[bytes, ...]


@dataclass
class CacheProvider:
    window: int
    memory: int = DEFAULT_MEMORY
    reply: Reply = field(default_factory=lambda: Reply("OK."))
    calls: list[Call] = field(default_factory=list)
    caches: dict[tuple[Shape, str], PrefixCache] = field(default_factory=dict)

    def count(self, shape: Shape, body: Mapping[str, Any]) -> tuple[list[int], list[bytes], int]:
        """Unit tokens, unit digests, and how many leading units are not messages."""
        units: list[object] = []
        if body.get("tools"):
            units.append(body["tools"])
        if shape == "anthropic" and body.get("system"):
            units.append(body["system"])
        head = len(units)
        messages = body.get("messages")
        if isinstance(messages, list):
            units += messages
        tokens = [unit_tokens(u, message=i >= head) for i, u in enumerate(units)]
        return tokens, [digest(u) for u in units], head

    def answer(self, shape: Shape, body: Mapping[str, Any]) -> tuple[int, bytes | list[bytes]]:
        """The status and the JSON body, or the SSE events, for one request."""
        model = str(body.get("model", ""))
        stream = body.get("stream") is True
        tokens, digests, head = self.count(shape, body)
        prompt = sum(tokens)
        max_tokens = body.get("max_tokens")
        completion = max_tokens if isinstance(max_tokens, int) and max_tokens > 0 else 0
        seq = len(self.calls)
        msgs = tuple(digests[head:])
        error = _overflow(shape, prompt, completion, self.window)
        if error is not None:
            self.calls.append(Call(seq, model, shape, 400, stream, prompt, 0, msgs))
            return 400, error
        cache = self.caches.setdefault((shape, model), PrefixCache(self.memory))
        chain = PrefixCache.chain(digests)
        shared = cache.shared_units(chain)
        cached = cacheable(shape, sum(tokens[:shared]))
        cache.store(chain)
        self.calls.append(Call(seq, model, shape, 200, stream, prompt, cached, msgs))
        out_tokens = math.ceil(len(canonical(_neutral(self.reply))) / BYTES_PER_TOKEN)
        if shape == "openai":
            return 200, _openai_reply(self.reply, model, seq, prompt, cached, out_tokens, stream)
        return 200, _anthropic_reply(self.reply, model, seq, prompt, cached, out_tokens, stream)


def _neutral(r: Reply) -> dict[str, Any]:
    return {"text": r.text, "id": r.tool_id, "name": r.tool_name, "args": r.tool_args}


def _overflow(shape: Shape, prompt: int, completion: int, window: int) -> bytes | None:
    if shape == "openai":
        if prompt > window:
            msg = (
                f"This model's maximum context length is {window} tokens. However, your "
                f"messages resulted in {prompt} tokens. Please reduce the length of the messages."
            )
        elif prompt + completion > window:
            msg = (
                f"This model's maximum context length is {window} tokens. However, you "
                f"requested {prompt + completion} tokens ({prompt} in the messages, "
                f"{completion} in the completion). Please reduce the length of the messages "
                "or completion."
            )
        else:
            return None
        return orjson.dumps(
            {
                "error": {
                    "message": msg,
                    "type": "invalid_request_error",
                    "param": "messages",
                    "code": "context_length_exceeded",
                }
            }
        )
    if prompt > window:
        msg = f"prompt is too long: {prompt} tokens > {window} maximum"
    elif prompt + completion > window:
        msg = (
            f"input length and `max_tokens` exceed context limit: {prompt} + {completion} > "
            f"{window}, decrease input length or `max_tokens` and try again"
        )
    else:
        return None
    return orjson.dumps(
        {"type": "error", "error": {"type": "invalid_request_error", "message": msg}}
    )


def _openai_reply(
    r: Reply, model: str, seq: int, prompt: int, cached: int, out: int, stream: bool
) -> bytes | list[bytes]:
    cid = f"chatcmpl-sim{seq:012d}"
    created = int(time.time())
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": out,
        "total_tokens": prompt + out,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
    }
    calls = (
        [
            {
                "id": r.tool_id,
                "type": "function",
                "function": {
                    "name": r.tool_name,
                    "arguments": orjson.dumps(r.tool_args or {}).decode(),
                },
            }
        ]
        if r.tool_id
        else None
    )
    finish = "tool_calls" if calls else "stop"
    if not stream:
        message: dict[str, Any] = {"role": "assistant", "content": r.text or None, "refusal": None}
        if calls:
            message["tool_calls"] = calls
        return orjson.dumps(
            {
                "id": cid,
                "object": "chat.completion",
                "created": created,
                "model": model,
                "choices": [
                    {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
                ],
                "usage": usage,
            }
        )

    def chunk(delta: dict[str, Any], fin: str | None) -> bytes:
        obj = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": fin}],
        }
        return b"data: " + orjson.dumps(obj) + b"\n\n"

    events = [chunk({"role": "assistant", "content": ""}, None)]
    if r.text:
        events.append(chunk({"content": r.text}, None))
    if calls:
        events.append(chunk({"tool_calls": [{"index": 0, **calls[0]}]}, None))
    events.append(chunk({}, finish))
    tail = {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [],
        "usage": usage,
    }
    events.append(b"data: " + orjson.dumps(tail) + b"\n\ndata: [DONE]\n\n")
    return events


def _sse(event: str, data: Mapping[str, Any]) -> bytes:
    return b"event: " + event.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


def _anthropic_reply(
    r: Reply, model: str, seq: int, prompt: int, cached: int, out: int, stream: bool
) -> bytes | list[bytes]:
    mid = f"msg_sim{seq:016d}"
    usage = {
        "input_tokens": 0,
        "cache_creation_input_tokens": prompt - cached,
        "cache_read_input_tokens": cached,
        "output_tokens": out,
    }
    blocks: list[dict[str, Any]] = []
    if r.text:
        blocks.append({"type": "text", "text": r.text})
    if r.tool_id:
        blocks.append(
            {"type": "tool_use", "id": r.tool_id, "name": r.tool_name, "input": r.tool_args or {}}
        )
    stop = "tool_use" if r.tool_id else "end_turn"
    if not stream:
        return orjson.dumps(
            {
                "id": mid,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": blocks,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": usage,
            }
        )
    start = {
        "type": "message_start",
        "message": {
            "id": mid,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {**usage, "output_tokens": 1},
        },
    }
    events = [_sse("message_start", start)]
    for i, b in enumerate(blocks):
        if b["type"] == "text":
            first: dict[str, Any] = {"type": "text", "text": ""}
            delta: dict[str, Any] = {"type": "text_delta", "text": b["text"]}
        else:
            first = {**b, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": orjson.dumps(b["input"]).decode()}
        events.append(
            _sse(
                "content_block_start",
                {"type": "content_block_start", "index": i, "content_block": first},
            )
            + _sse(
                "content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}
            )
            + _sse("content_block_stop", {"type": "content_block_stop", "index": i})
        )
    events.append(
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": out},
            },
        )
        + _sse("message_stop", {"type": "message_stop"})
    )
    return events


PROVIDER = web.AppKey("cache_provider", CacheProvider)
_SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}


async def _handle(request: web.Request, shape: Shape) -> web.StreamResponse:
    raw = await request.read()
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        body = None
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        return web.json_response(
            {"error": {"message": "not a request body", "type": "invalid_request_error"}},
            status=400,
        )
    status, out = request.app[PROVIDER].answer(shape, body)
    if isinstance(out, bytes):
        return web.Response(status=status, body=out, content_type="application/json")
    resp = web.StreamResponse(status=200, headers=_SSE_HEADERS)
    await resp.prepare(request)
    for ev in out:
        await resp.write(ev)
    await resp.write_eof()
    return resp


async def openai_chat(request: web.Request) -> web.StreamResponse:
    return await _handle(request, "openai")


async def anthropic_messages(request: web.Request) -> web.StreamResponse:
    return await _handle(request, "anthropic")


async def healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok")


def make_app(provider: CacheProvider) -> web.Application:
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app[PROVIDER] = provider
    app.router.add_post("/v1/chat/completions", openai_chat)
    app.router.add_post("/v1/messages", anthropic_messages)
    app.router.add_get("/healthz", healthz)
    return app
