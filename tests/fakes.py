"""A scriptable fake provider on loopback.

Each request is recorded; the answer is the next scripted ``Reply`` or, when
the script is empty, what ``responder`` returns (an echo-like 200 by default).
Replies: JSON with any status, SSE events with delays, a connection reset, a
slow answer.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import socket
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web
from multidict import CIMultiDict


@dataclass
class Recorded:
    method: str
    path: str
    query: str
    headers: CIMultiDict[str]
    body: bytes
    raw_path: str = ""

    def json(self) -> Any:
        return orjson.loads(self.body)


@dataclass
class Reply:
    status: int = 200
    body: bytes | None = None  # raw body; JSON of ``data`` when None
    data: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    events: list[bytes] | None = None  # SSE: raw event frames, sent one by one
    delay: float = 0.0  # before the headers
    event_delay: float = 0.0  # between SSE frames
    reset: bool = False  # close the connection without answering
    hang: bool = False  # never answer (until cancelled)
    partial: int | None = None  # send only this many bytes of ``body`` (whole Content-Length)
    end: str = "eof"  # after the SSE frames or a partial body: "eof", "reset" or "hang"


def json_reply(data: Any, status: int = 200, **headers: str) -> Reply:
    return Reply(status=status, data=data, headers=dict(headers))


def sse_reply(frames: list[bytes], *, event_delay: float = 0.0) -> Reply:
    return Reply(events=frames, event_delay=event_delay)


def sse_data(*objects: Any, event: str | None = None) -> list[bytes]:
    out = []
    for obj in objects:
        prefix = f"event: {event}\n".encode() if event else b""
        out.append(prefix + b"data: " + orjson.dumps(obj) + b"\n\n")
    return out


def openai_ok(prompt_tokens: int | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "gpt-4o",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "ok"},
                "finish_reason": "stop",
            }
        ],
    }
    if prompt_tokens is not None:
        body["usage"] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": 1,
            "total_tokens": prompt_tokens + 1,
        }
    return body


def anthropic_ok(input_tokens: int = 10) -> dict[str, Any]:
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "ok"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": 1},
    }


def openai_overflow(real: int, maximum: int) -> Reply:
    return json_reply(
        {
            "error": {
                "message": (
                    f"This model's maximum context length is {maximum} tokens. However, your "
                    f"messages resulted in {real} tokens. Please reduce the length of the messages."
                ),
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
        status=400,
    )


def anthropic_overflow(real: int, maximum: int) -> Reply:
    return json_reply(
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": f"prompt is too long: {real} tokens > {maximum} maximum",
            },
        },
        status=400,
    )


class FakeProvider:
    def __init__(self, responder: Callable[[Recorded], Reply] | None = None) -> None:
        self.requests: list[Recorded] = []
        self.script: deque[Reply] = deque()
        self.responder = responder or (lambda r: json_reply(openai_ok(10)))
        self.cancelled = 0
        self.broken = 0  # answers whose connection went away while they were written
        self.app = web.Application(client_max_size=256 * 1024 * 1024)
        self.app.router.add_route("*", "/{tail:.*}", self._handle)

    def then(self, *replies: Reply) -> FakeProvider:
        self.script.extend(replies)
        return self

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        rec = Recorded(
            request.method,
            request.path,
            request.query_string,
            CIMultiDict(request.headers),
            await request.read(),
            request.raw_path,
        )
        self.requests.append(rec)
        reply = self.script.popleft() if self.script else self.responder(rec)
        try:
            return await self._answer(request, reply)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        except ConnectionResetError:
            self.broken += 1
            raise

    async def _answer(self, request: web.Request, reply: Reply) -> web.StreamResponse:
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if reply.hang:
            await asyncio.sleep(3600)
        if reply.reset:
            assert request.transport is not None
            request.transport.close()
            return web.Response(status=500)
        if reply.events is not None:
            resp = web.StreamResponse(
                status=reply.status,
                headers={"Content-Type": "text/event-stream", **reply.headers},
            )
            await resp.prepare(request)
            for i, frame in enumerate(reply.events):
                if i and reply.event_delay:
                    await asyncio.sleep(reply.event_delay)
                await resp.write(frame)
            return await self._end(request, resp, reply)
        body = reply.body if reply.body is not None else json.dumps(reply.data).encode()
        headers = {"Content-Type": "application/json", **reply.headers}
        if reply.partial is not None:
            resp = web.StreamResponse(status=reply.status, headers=headers)
            resp.content_length = len(body)
            await resp.prepare(request)
            await resp.write(body[: reply.partial])
            return await self._end(request, resp, reply)
        return web.Response(status=reply.status, body=body, headers=headers)

    async def _end(
        self, request: web.Request, resp: web.StreamResponse, reply: Reply
    ) -> web.StreamResponse:
        if reply.end == "hang":
            await asyncio.sleep(3600)
        if reply.end == "reset":
            assert request.transport is not None
            request.transport.close()
            return resp
        await resp.write_eof()
        return resp


# --- answers that report prompt-cache usage, as each provider words it ----------------


def openai_cached_usage(prompt: int, cached: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": 12,
        "total_tokens": prompt + 12,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
    }


def openai_cached_ok(prompt: int, cached: int) -> dict[str, Any]:
    return {**openai_ok(), "usage": openai_cached_usage(prompt, cached)}


def openai_cached_stream(prompt: int, cached: int) -> list[bytes]:
    """A Chat Completions stream with ``stream_options.include_usage``."""
    head = {"id": "chatcmpl-c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    frames = sse_data(
        {**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
        {**head, "choices": [{"index": 0, "delta": {"content": "ok"}}], "usage": None},
        {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": None},
        {**head, "choices": [], "usage": openai_cached_usage(prompt, cached)},
    )
    return [*frames, b"data: [DONE]\n\n"]


def responses_cached_ok(prompt: int, cached: int) -> dict[str, Any]:
    return {
        "id": "resp_c",
        "object": "response",
        "created_at": 1,
        "status": "completed",
        "model": "m",
        "output": [
            {
                "type": "message",
                "id": "msg_c",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "ok", "annotations": []}],
            }
        ],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": 12,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + 12,
        },
    }


def responses_cached_stream(prompt: int, cached: int) -> list[bytes]:
    done = responses_cached_ok(prompt, cached)
    created = {**done, "status": "in_progress", "output": [], "usage": None}
    return [
        *sse_data({"type": "response.created", "response": created}, event="response.created"),
        *sse_data(
            {"type": "response.output_text.delta", "delta": "ok", "item_id": "msg_c"},
            event="response.output_text.delta",
        ),
        *sse_data({"type": "response.completed", "response": done}, event="response.completed"),
    ]


def anthropic_cached_usage(fresh: int, read: int, written: int) -> dict[str, Any]:
    return {
        "input_tokens": fresh,
        "cache_creation_input_tokens": written,
        "cache_read_input_tokens": read,
        "cache_creation": {"ephemeral_5m_input_tokens": written, "ephemeral_1h_input_tokens": 0},
        "output_tokens": 12,
        "service_tier": "standard",
    }


def anthropic_cached_ok(fresh: int, read: int, written: int) -> dict[str, Any]:
    return {**anthropic_ok(), "usage": anthropic_cached_usage(fresh, read, written)}


def anthropic_text_stream(
    message: dict[str, Any], text: str, end_usage: dict[str, Any]
) -> list[bytes]:
    """A Messages stream of one text block, frame by frame: ``message`` (its usage
    included) opens it, ``end_usage`` is message_delta's usage."""
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": message}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": text},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": end_usage,
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return [frame for name, obj in events for frame in sse_data(obj, event=name)]


def anthropic_cached_stream(fresh: int, read: int, written: int) -> list[bytes]:
    """A Messages stream: message_start states the prompt, message_delta restates it."""
    message = {**anthropic_ok(), "content": [], "stop_reason": None}
    start_usage = {**anthropic_cached_usage(fresh, read, written), "output_tokens": 1}
    end_usage = {
        "input_tokens": fresh,
        "cache_creation_input_tokens": written,
        "cache_read_input_tokens": read,
        "output_tokens": 12,
    }
    return anthropic_text_stream({**message, "usage": start_usage}, "ok", end_usage)


def gemini_cached_ok(prompt: int, cached: int) -> dict[str, Any]:
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP"}
        ],
        "usageMetadata": {
            "promptTokenCount": prompt,
            "candidatesTokenCount": 12,
            "totalTokenCount": prompt + 12,
            "cachedContentTokenCount": cached,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}],
            "cacheTokensDetails": [{"modality": "TEXT", "tokenCount": cached}],
        },
        "modelVersion": "gemini-2.5-flash",
    }


def free_port() -> int:
    """A free loopback port for a server a subprocess starts later. Taken below the
    kernel's ephemeral range, where no port-0 bind (of this test process or the one beside
    it, under pytest-xdist) lands in the meantime, and in this process's own residue class,
    so two test processes never pick the same one; a port-0 bind where there is no room."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 0
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    lane = int(worker[2:]) % 8 if worker[2:].isdigit() else 0
    for _ in range(200 if low > 10_000 else 0):
        port = random.randrange(low - 8_000, low, 8) + lane
        if port >= low:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
