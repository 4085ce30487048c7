# A fake LLM provider for the benchmark: OpenAI chat completions and Anthropic messages.
#
# It is deliberately cheap (no full JSON parse of the request: a bounded regex finds
# "model" and "stream") so that it costs every target the same and leaves CPU to the
# proxy under test. Behaviour is steered per request by headers, which trimgate and the
# pass-through forward untouched:
#
#   x-bench-chunks: N        SSE content chunks in a stream (default 16)
#   x-bench-delay-ms: D      delay between SSE chunks; the first event goes out at once
#   x-bench-ttft-ms: T       delay before the response starts (model "thinking"), default 0
#   x-bench-reply-bytes: B   size of the reply text (default 200)
#   x-bench-max-bytes: M     overflow: a body larger than M bytes gets the provider's
#                            context-length error (tokens = ceil(bytes / 4))
#   x-bench-overflow: where  "status" (default: 400 JSON) or "stream" (200 SSE whose first
#                            event is the error, as some gateways do)
#
# usage.prompt_tokens / input_tokens = ceil(request body bytes / 4).
# GET /bench/stats returns counters the runner reads around each round.

from __future__ import annotations

import argparse
import asyncio
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass

import orjson
from aiohttp import web

_MODEL_RE = re.compile(rb'"model"\s*:\s*"([^"\\]{1,200})"')
_STREAM_RE = re.compile(rb'"stream"\s*:\s*true')
_HEAD = 8192  # "model" and "stream" are near the front in every body we send


@dataclass
class Stats:
    requests: int = 0
    bytes_in: int = 0
    overflows: int = 0
    streams: int = 0
    open_streams: int = 0
    peak_open_streams: int = 0


STATS = web.AppKey("stats", Stats)
DEFAULTS = web.AppKey("defaults", dict[str, int])


def _int_header(request: web.Request, name: str, default: int) -> int:
    raw = request.headers.get(name)
    if raw is None:
        return default
    try:
        return max(0, int(raw))
    except ValueError:
        return default


def _sniff(body: bytes) -> tuple[str, bool]:
    head = body[:_HEAD]
    m = _MODEL_RE.search(head) or _MODEL_RE.search(body)
    model = m.group(1).decode() if m else "unknown"
    stream = bool(_STREAM_RE.search(head) or (len(body) > _HEAD and _STREAM_RE.search(body)))
    return model, stream


def _reply_text(nbytes: int) -> str:
    base = "The tests pass after the fix in src/proxy/forward.py; the retry path now "
    return (base * (nbytes // len(base) + 1))[:nbytes]


def _chunks(text: str, n: int) -> list[str]:
    n = max(1, n)
    step = max(1, math.ceil(len(text) / n))
    parts = [text[i : i + step] for i in range(0, len(text), step)]
    while len(parts) < n:
        parts.append("")
    return parts[:n]


_SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}


class _Provider:
    def __init__(self) -> None:
        self._seq = 0

    def next_id(self) -> int:
        self._seq += 1
        return self._seq


PROVIDER = web.AppKey("provider", _Provider)


async def _read(request: web.Request) -> tuple[bytes, Stats, dict[str, int]]:
    body = await request.read()
    stats = request.app[STATS]
    stats.requests += 1
    stats.bytes_in += len(body)
    return body, stats, request.app[DEFAULTS]


def _overflow_limit(request: web.Request, body: bytes) -> int | None:
    limit = _int_header(request, "x-bench-max-bytes", -1)
    if limit >= 0 and len(body) > limit:
        return limit
    return None


async def _stream(
    request: web.Request, events: list[bytes], delay_ms: int, stats: Stats
) -> web.StreamResponse:
    resp = web.StreamResponse(status=200, headers=_SSE_HEADERS)
    stats.streams += 1
    stats.open_streams += 1
    stats.peak_open_streams = max(stats.peak_open_streams, stats.open_streams)
    try:
        await resp.prepare(request)
        for i, ev in enumerate(events):
            if i and delay_ms:
                await asyncio.sleep(delay_ms / 1000)
            await resp.write(ev)
        await resp.write_eof()
    finally:
        stats.open_streams -= 1
    return resp


def _openai_overflow(tokens: int, limit: int) -> bytes:
    maximum = math.ceil(limit / 4)
    return orjson.dumps(
        {
            "error": {
                "message": (
                    f"This model's maximum context length is {maximum} tokens. However, your "
                    f"messages resulted in {tokens} tokens. Please reduce the length of the "
                    "messages."
                ),
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        }
    )


def _anthropic_overflow(tokens: int, limit: int) -> bytes:
    maximum = math.ceil(limit / 4)
    return orjson.dumps(
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": f"prompt is too long: {tokens} tokens > {maximum} maximum",
            },
        }
    )


async def openai_chat(request: web.Request) -> web.StreamResponse:
    body, stats, defaults = await _read(request)
    model, stream = _sniff(body)
    prompt_tokens = math.ceil(len(body) / 4)
    ttft = _int_header(request, "x-bench-ttft-ms", defaults["ttft_ms"])
    if ttft:
        await asyncio.sleep(ttft / 1000)
    limit = _overflow_limit(request, body)
    if limit is not None:
        stats.overflows += 1
        err = _openai_overflow(prompt_tokens, limit)
        if stream and request.headers.get("x-bench-overflow") == "stream":
            return await _stream(request, [b"data: " + err + b"\n\n"], 0, stats)
        return web.Response(status=400, body=err, content_type="application/json")
    text = _reply_text(_int_header(request, "x-bench-reply-bytes", defaults["reply_bytes"]))
    completion_tokens = math.ceil(len(text.encode()) / 4)
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    cid = f"chatcmpl-bench{request.app[PROVIDER].next_id():012d}"
    created = int(time.time())
    if not stream:
        return web.Response(
            body=orjson.dumps(
                {
                    "id": cid,
                    "object": "chat.completion",
                    "created": created,
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text, "refusal": None},
                            "logprobs": None,
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": usage,
                    "system_fingerprint": "fp_bench",
                }
            ),
            content_type="application/json",
        )

    def chunk(delta: dict[str, object], finish: str | None) -> bytes:
        obj = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "system_fingerprint": "fp_bench",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        return b"data: " + orjson.dumps(obj) + b"\n\n"

    n = _int_header(request, "x-bench-chunks", defaults["chunks"])
    events = [chunk({"role": "assistant", "content": "", "refusal": None}, None)]
    events += [chunk({"content": part}, None) for part in _chunks(text, n)]
    events.append(chunk({}, "stop"))
    tail = {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [],
        "usage": usage,
    }
    events.append(b"data: " + orjson.dumps(tail) + b"\n\ndata: [DONE]\n\n")
    return await _stream(request, events, _int_header(request, "x-bench-delay-ms", 0), stats)


def _sse(event: str, data: Mapping[str, object]) -> bytes:
    return b"event: " + event.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


async def anthropic_messages(request: web.Request) -> web.StreamResponse:
    body, stats, defaults = await _read(request)
    model, stream = _sniff(body)
    input_tokens = math.ceil(len(body) / 4)
    ttft = _int_header(request, "x-bench-ttft-ms", defaults["ttft_ms"])
    if ttft:
        await asyncio.sleep(ttft / 1000)
    limit = _overflow_limit(request, body)
    if limit is not None:
        stats.overflows += 1
        err = _anthropic_overflow(input_tokens, limit)
        if stream and request.headers.get("x-bench-overflow") == "stream":
            return await _stream(request, [b"event: error\ndata: " + err + b"\n\n"], 0, stats)
        return web.Response(status=400, body=err, content_type="application/json")
    text = _reply_text(_int_header(request, "x-bench-reply-bytes", defaults["reply_bytes"]))
    output_tokens = math.ceil(len(text.encode()) / 4)
    mid = f"msg_bench{request.app[PROVIDER].next_id():015d}"
    if not stream:
        return web.Response(
            body=orjson.dumps(
                {
                    "id": mid,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [{"type": "text", "text": text}],
                    "stop_reason": "end_turn",
                    "stop_sequence": None,
                    "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
                }
            ),
            content_type="application/json",
        )
    n = _int_header(request, "x-bench-chunks", defaults["chunks"])
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
            "usage": {"input_tokens": input_tokens, "output_tokens": 1},
        },
    }
    events = [
        _sse("message_start", start),
        _sse(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        _sse("ping", {"type": "ping"}),
    ]
    events += [
        _sse(
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}},
        )
        for p in _chunks(text, n)
    ]
    events.append(
        _sse("content_block_stop", {"type": "content_block_stop", "index": 0})
        + _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": output_tokens},
            },
        )
        + _sse("message_stop", {"type": "message_stop"})
    )
    return await _stream(request, events, _int_header(request, "x-bench-delay-ms", 0), stats)


async def healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok")


async def stats(request: web.Request) -> web.Response:
    s = request.app[STATS]
    return web.Response(
        body=orjson.dumps(
            {
                "requests": s.requests,
                "bytes_in": s.bytes_in,
                "overflows": s.overflows,
                "streams": s.streams,
                "open_streams": s.open_streams,
                "peak_open_streams": s.peak_open_streams,
            }
        ),
        content_type="application/json",
    )


async def otlp_sink(request: web.Request) -> web.Response:
    """Accept an OTLP/HTTP export and drop it (an empty export response is all zeros)."""
    await request.read()
    return web.Response(body=b"", content_type="application/x-protobuf")


def make_app(*, chunks: int = 16, reply_bytes: int = 200, ttft_ms: int = 0) -> web.Application:
    """The fake provider; the keyword values are defaults that request headers override."""
    app = web.Application(client_max_size=256 * 1024 * 1024)
    app[STATS] = Stats()
    app[PROVIDER] = _Provider()
    app[DEFAULTS] = {"chunks": chunks, "reply_bytes": reply_bytes, "ttft_ms": ttft_ms}
    app.router.add_post("/v1/chat/completions", openai_chat)
    app.router.add_post("/v1/messages", anthropic_messages)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/bench/stats", stats)
    for path in ("/v1/traces", "/v1/metrics"):  # an OTLP/HTTP sink for bench.ablate's otel
        app.router.add_post(path, otlp_sink)
    return app


def install_uvloop() -> bool:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a trimgate dependency on POSIX
        return False
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return True


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.fake_provider")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8790)
    parser.add_argument("--chunks", type=int, default=16)
    parser.add_argument("--reply-bytes", type=int, default=200)
    parser.add_argument("--ttft-ms", type=int, default=0)
    args = parser.parse_args(argv)
    install_uvloop()
    app = make_app(chunks=args.chunks, reply_bytes=args.reply_bytes, ttft_ms=args.ttft_ms)
    web.run_app(app, host=args.host, port=args.port, access_log=None, print=None, backlog=2048)


if __name__ == "__main__":
    main()
