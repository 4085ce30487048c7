"""A scripted fake model provider for running real coding agents on loopback.

One aiohttp app answers three wire formats the way the agents expect them:

- OpenAI Responses: ``POST /v1/responses`` (SSE when ``stream`` is true, JSON
  otherwise) and, when ``websocket=True``, the Responses WebSocket mode on
  ``GET /v1/responses`` with ``Upgrade: websocket`` (the client sends
  ``{"type": "response.create", ...}`` text frames and gets the stream events back
  as text frames, one JSON object per frame; ``previous_response_id`` continues a
  response kept on that connection). With ``websocket=False`` the GET is answered
  405, as by a server without the mode.
- Anthropic Messages: ``POST /v1/messages`` (SSE or JSON, ``tool_use`` blocks) and
  ``/v1/messages/count_tokens``.
- Gemini: ``POST /v1beta/models/{model}:generateContent`` / ``:streamGenerateContent``
  (``alt=sse``) with ``functionCall`` parts, and ``:countTokens``.

The script: every request is answered statelessly from its own history. The tool
results after the last real user message (one carrying no tool results) are
counted; while fewer than ``rounds``, the answer is a call of the request's shell
tool (``exec_command`` / ``shell`` / ``Bash`` / ``run_shell_command``, whichever is
offered) running ``commands[k]``; then a final text that starts with ``FAKE-DONE``.
A request without such a tool gets a short text (or, for a JSON-schema request,
a JSON object filled from the schema).

The context window: ``windows`` maps a model name to a token limit; a request whose
body is longer than ``limit * 4`` bytes (the fake's own rough count) is answered
the provider's real overflow error (HTTP 400 in each format's shape; an ``error``
event on the WebSocket).

Every request is recorded (transport, method, path, model, headers with
credential values replaced by ``<redacted>``, parsed body, status, tokens): ``GET /_fake/requests``;
``POST /_fake/reset`` clears them; ``POST /_fake/config`` sets ``windows`` /
``rounds`` / ``commands``.

``python -m bench.agent_fake --port P [--websocket] [--rounds N]``
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

DONE_MARK = "FAKE-DONE"
SHELL_TOOLS = ("exec_command", "shell_command", "shell", "Bash", "run_shell_command")
DEFAULT_COMMANDS = ("ls", "cat notes1.txt", "cat notes2.txt", "cat notes3.txt")
SECRET_HEADERS = frozenset({"authorization", "x-api-key", "x-goog-api-key", "cookie"})
OPENAI_OVERFLOW = (
    "Your input exceeds the context window of this model. Please adjust your input and try again."
)

Json = dict[str, Any]


@dataclass
class Record:
    transport: str  # "http" | "ws" | "ws-handshake"
    method: str
    path: str
    fmt: str  # "responses" | "anthropic" | "gemini" | "other"
    model: str
    headers: dict[str, str]
    body: Any
    tokens: int
    status: int = 200
    answer: str = ""  # "tool:<command>" | "text" | "overflow" | "prewarm" | ...
    at: float = field(default_factory=time.time)
    # a WebSocket request continuing an earlier response: its body with the whole input
    effective: Any = None

    def as_json(self) -> Json:
        return {
            "transport": self.transport,
            "method": self.method,
            "path": self.path,
            "fmt": self.fmt,
            "model": self.model,
            "headers": self.headers,
            "body": self.body,
            "tokens": self.tokens,
            "status": self.status,
            "answer": self.answer,
            "at": self.at,
            "effective": self.effective,
        }


@dataclass
class Script:
    rounds: int = 3
    commands: tuple[str, ...] = DEFAULT_COMMANDS
    windows: dict[str, int] = field(default_factory=dict)

    def window(self, model: str) -> int | None:
        return self.windows.get(model)


@dataclass(frozen=True)
class Decision:
    kind: str  # "tool" | "text" | "json"
    tool: str = ""
    args: Json = field(default_factory=dict)
    text: str = ""

    @property
    def label(self) -> str:
        return f"tool:{self.args.get('_cmd', '')}" if self.kind == "tool" else self.kind


def public_headers(headers: Any) -> dict[str, str]:
    """The headers, credentials replaced by a placeholder (their presence is kept)."""
    return {
        k.lower(): "<redacted>" if k.lower() in SECRET_HEADERS else v for k, v in headers.items()
    }


def rough_tokens(raw: bytes | str) -> int:
    return (len(raw) + 3) // 4


# --------------------------------------------------------------------------- the script


def _fill(schema: Any, name: str) -> Any:
    if not isinstance(schema, dict):
        return "ok"
    if schema.get("enum"):
        return schema["enum"][0]
    kind = str(schema.get("type", "string")).lower()
    if kind == "object":
        props = schema.get("properties") or {}
        return {k: _fill(v, k) for k, v in props.items()}
    if kind == "array":
        return []
    if kind == "boolean":
        return False
    if kind in ("integer", "number"):
        return 0
    return "user" if name == "next_speaker" else "ok"


def tool_args(params: Any, command: str) -> Json:
    """Arguments for a shell tool with JSON schema ``params`` that run ``command``."""
    props: Json = params.get("properties", {}) if isinstance(params, dict) else {}
    required = params.get("required", []) if isinstance(params, dict) else []
    args: Json = {}
    key = next((k for k in ("cmd", "command") if k in props), "command")
    kind = str(props.get(key, {}).get("type", "string")).lower()
    args[key] = ["bash", "-lc", command] if kind == "array" else command
    for name in required:
        if name not in args:
            args[name] = f"run {command}" if name == "description" else _fill(props.get(name), name)
    return args


def decide(script: Script, tools: dict[str, Any], tool_results: int, schema: Any) -> Decision:
    """What to answer: ``tools`` maps offered tool names to their parameter schema."""
    if schema is not None:
        return Decision("json", text=json.dumps(_fill(schema, "")))
    name = next((t for t in SHELL_TOOLS if t in tools), None)
    if name is None:
        return Decision("text", text="ok")
    if tool_results < script.rounds:
        cmd = script.commands[tool_results % len(script.commands)]
        args = tool_args(tools[name], cmd)
        return Decision("tool", tool=name, args={**args, "_cmd": cmd})
    return Decision("text", text=f"{DONE_MARK}: ran {tool_results} commands; the notes are read.")


def _args_of(d: Decision) -> Json:
    return {k: v for k, v in d.args.items() if k != "_cmd"}


def _count_after_last_user(items: list[Any], is_user: Any, is_result: Any) -> int:
    count = 0
    for item in items:
        if is_user(item):
            count = 0
        count += is_result(item)
    return count


# --------------------------------------------------------------------------- OpenAI Responses


def responses_decide(script: Script, body: Json, items: list[Any]) -> Decision:
    tools: dict[str, Any] = {}
    for t in body.get("tools") or []:
        if isinstance(t, dict) and t.get("type") == "function" and "name" in t:
            tools[t["name"]] = t.get("parameters") or {}

    def is_user(it: Any) -> bool:
        return (
            isinstance(it, dict)
            and it.get("role") == "user"
            and it.get("type", "message") == "message"
        )

    def is_result(it: Any) -> int:
        return int(isinstance(it, dict) and it.get("type") == "function_call_output")

    fmt = (
        ((body.get("text") or {}).get("format") or {}) if isinstance(body.get("text"), dict) else {}
    )
    schema = (
        fmt.get("schema") if isinstance(fmt, dict) and fmt.get("type") == "json_schema" else None
    )
    return decide(script, tools, _count_after_last_user(items, is_user, is_result), schema)


_ids = itertools.count(1)


def responses_output(d: Decision) -> list[Json]:
    n = next(_ids)
    if d.kind == "tool":
        return [
            {
                "type": "function_call",
                "id": f"fc_{n}",
                "call_id": f"call_{n}",
                "name": d.tool,
                "arguments": json.dumps(_args_of(d)),
                "status": "completed",
            }
        ]
    return [
        {
            "type": "message",
            "id": f"msg_{n}",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": d.text, "annotations": []}],
        }
    ]


def responses_events(model: str, rid: str, output: list[Json], in_tokens: int) -> Iterator[Json]:
    seq = itertools.count()
    base = {"id": rid, "object": "response", "created_at": int(time.time()), "model": model}
    yield {
        "type": "response.created",
        "sequence_number": next(seq),
        "response": {**base, "status": "in_progress", "output": []},
    }
    for i, item in enumerate(output):
        started = {**item, "status": "in_progress"}
        if item["type"] == "message":
            started["content"] = []
        elif item["type"] == "function_call":
            started["arguments"] = ""
        yield {
            "type": "response.output_item.added",
            "sequence_number": next(seq),
            "output_index": i,
            "item": started,
        }
        if item["type"] == "message":
            text = item["content"][0]["text"]
            part = {"type": "output_text", "text": "", "annotations": []}
            yield {
                "type": "response.content_part.added",
                "sequence_number": next(seq),
                "item_id": item["id"],
                "output_index": i,
                "content_index": 0,
                "part": part,
            }
            yield {
                "type": "response.output_text.delta",
                "sequence_number": next(seq),
                "item_id": item["id"],
                "output_index": i,
                "content_index": 0,
                "delta": text,
            }
            yield {
                "type": "response.output_text.done",
                "sequence_number": next(seq),
                "item_id": item["id"],
                "output_index": i,
                "content_index": 0,
                "text": text,
            }
            yield {
                "type": "response.content_part.done",
                "sequence_number": next(seq),
                "item_id": item["id"],
                "output_index": i,
                "content_index": 0,
                "part": {**part, "text": text},
            }
        else:
            args = item["arguments"]
            yield {
                "type": "response.function_call_arguments.delta",
                "sequence_number": next(seq),
                "item_id": item["id"],
                "output_index": i,
                "delta": args,
            }
            yield {
                "type": "response.function_call_arguments.done",
                "sequence_number": next(seq),
                "item_id": item["id"],
                "output_index": i,
                "arguments": args,
            }
        yield {
            "type": "response.output_item.done",
            "sequence_number": next(seq),
            "output_index": i,
            "item": item,
        }
    usage = {
        "input_tokens": in_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 20,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": in_tokens + 20,
    }
    yield {
        "type": "response.completed",
        "sequence_number": next(seq),
        "response": {**base, "status": "completed", "output": output, "usage": usage},
    }


def openai_overflow() -> Json:
    return {
        "error": {
            "message": OPENAI_OVERFLOW,
            "type": "invalid_request_error",
            "param": "input",
            "code": "context_length_exceeded",
        }
    }


# --------------------------------------------------------------------------- Anthropic Messages


def anthropic_decide(script: Script, body: Json) -> Decision:
    tools = {
        t["name"]: t.get("input_schema") or {}
        for t in body.get("tools") or []
        if isinstance(t, dict) and "name" in t
    }

    def blocks(m: Any) -> list[Any]:
        c = m.get("content") if isinstance(m, dict) else None
        return c if isinstance(c, list) else []

    def is_user(m: Any) -> bool:
        return (
            isinstance(m, dict)
            and m.get("role") == "user"
            and not any(isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks(m))
        )

    def is_result(m: Any) -> int:
        return sum(1 for b in blocks(m) if isinstance(b, dict) and b.get("type") == "tool_result")

    fmt = body.get("output_format")
    schema = fmt.get("schema") if isinstance(fmt, dict) else None
    return decide(
        script,
        tools,
        _count_after_last_user(body.get("messages") or [], is_user, is_result),
        schema,
    )


def anthropic_message(model: str, d: Decision, in_tokens: int) -> Json:
    n = next(_ids)
    if d.kind == "tool":
        content: list[Json] = [
            {"type": "tool_use", "id": f"toolu_{n:08d}", "name": d.tool, "input": _args_of(d)}
        ]
        stop = "tool_use"
    else:
        content = [{"type": "text", "text": d.text}]
        stop = "end_turn"
    return {
        "id": f"msg_{n:08d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {
            "input_tokens": in_tokens,
            "output_tokens": 20,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }


def anthropic_events(msg: Json) -> Iterator[tuple[str, Json]]:
    start = {
        **msg,
        "content": [],
        "stop_reason": None,
        "usage": {**msg["usage"], "output_tokens": 1},
    }
    yield "message_start", {"type": "message_start", "message": start}
    for i, block in enumerate(msg["content"]):
        if block["type"] == "tool_use":
            yield (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": i,
                    "content_block": {**block, "input": {}},
                },
            )
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            yield (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": i,
                    "content_block": {"type": "text", "text": ""},
                },
            )
            delta = {"type": "text_delta", "text": block["text"]}
        yield "content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": i}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": msg["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": 20},
        },
    )
    yield "message_stop", {"type": "message_stop"}


def anthropic_overflow(tokens: int, limit: int) -> Json:
    return {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": f"prompt is too long: {tokens} tokens > {limit} maximum",
        },
    }


# --------------------------------------------------------------------------- Gemini


def gemini_decide(script: Script, body: Json) -> Decision:
    tools: dict[str, Any] = {}
    for t in body.get("tools") or []:
        for f in (t or {}).get("functionDeclarations") or [] if isinstance(t, dict) else []:
            if isinstance(f, dict) and "name" in f:
                tools[f["name"]] = f.get("parametersJsonSchema") or f.get("parameters") or {}

    def parts(c: Any) -> list[Any]:
        p = c.get("parts") if isinstance(c, dict) else None
        return p if isinstance(p, list) else []

    def is_user(c: Any) -> bool:
        return (
            isinstance(c, dict)
            and c.get("role", "user") == "user"
            and not any(isinstance(p, dict) and "functionResponse" in p for p in parts(c))
        )

    def is_result(c: Any) -> int:
        return sum(1 for p in parts(c) if isinstance(p, dict) and "functionResponse" in p)

    gen = body.get("generationConfig") or {}
    schema = None
    if isinstance(gen, dict) and gen.get("responseMimeType") == "application/json":
        schema = gen.get("responseJsonSchema") or gen.get("responseSchema") or {"type": "object"}
    return decide(
        script,
        tools,
        _count_after_last_user(body.get("contents") or [], is_user, is_result),
        schema,
    )


def gemini_response(model: str, d: Decision, in_tokens: int) -> Json:
    if d.kind == "tool":
        part: Json = {"functionCall": {"name": d.tool, "args": _args_of(d)}}
    else:
        part = {"text": d.text}
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {
            "promptTokenCount": in_tokens,
            "candidatesTokenCount": 20,
            "totalTokenCount": in_tokens + 20,
        },
        "modelVersion": model,
        "responseId": f"fake-{next(_ids)}",
    }


def gemini_overflow(tokens: int, limit: int) -> Json:
    return {
        "error": {
            "code": 400,
            "message": f"The input token count ({tokens}) exceeds the maximum number of tokens"
            f" allowed ({limit}).",
            "status": "INVALID_ARGUMENT",
        }
    }


# --------------------------------------------------------------------------- the app


class AgentFake:
    def __init__(
        self,
        *,
        websocket: bool = False,
        script: Script | None = None,
        ws_headers: dict[str, str] | None = None,
    ) -> None:
        self.websocket = websocket
        self.script = script or Script()
        self.records: list[Record] = []
        # headers of the 101 answer (a client's x-codex-turn-state is echoed back)
        self.ws_headers = dict(ws_headers or {})
        self.ws_closes: list[tuple[int, str]] = []  # close frames received: code, reason

    def app(self) -> web.Application:
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_get("/_fake/requests", self._h_records)
        app.router.add_post("/_fake/reset", self._h_reset)
        app.router.add_post("/_fake/config", self._h_config)
        app.router.add_post("/v1/responses", self._h_responses)
        app.router.add_get("/v1/responses", self._h_responses_ws)
        app.router.add_post("/v1/messages", self._h_messages)
        app.router.add_post("/v1/messages/count_tokens", self._h_count_tokens)
        app.router.add_post("/v1beta/models/{call}", self._h_gemini)
        app.router.add_route("*", "/{tail:.*}", self._h_other)
        return app

    # control ---------------------------------------------------------------

    async def _h_records(self, request: web.Request) -> web.Response:
        return web.json_response([r.as_json() for r in self.records])

    async def _h_reset(self, request: web.Request) -> web.Response:
        self.records.clear()
        return web.json_response({"ok": True})

    async def _h_config(self, request: web.Request) -> web.Response:
        cfg = await request.json()
        if "windows" in cfg:
            self.script.windows = {str(k): int(v) for k, v in cfg["windows"].items()}
        if "rounds" in cfg:
            self.script.rounds = int(cfg["rounds"])
        if "commands" in cfg:
            self.script.commands = tuple(str(c) for c in cfg["commands"])
        return web.json_response({"ok": True})

    # helpers ---------------------------------------------------------------

    def _record(
        self, request: web.Request, transport: str, fmt: str, model: str, body: Any, raw: bytes
    ) -> Record:
        rec = Record(
            transport,
            request.method,
            request.path,
            fmt,
            model,
            public_headers(request.headers),
            body,
            rough_tokens(raw),
        )
        self.records.append(rec)
        return rec

    def _over(self, model: str, tokens: int) -> int | None:
        limit = self.script.window(model)
        return limit if limit is not None and tokens > limit else None

    @staticmethod
    async def _json(request: web.Request) -> tuple[bytes, Any]:
        raw = await request.read()
        try:
            return raw, json.loads(raw)
        except ValueError:
            return raw, None

    # OpenAI Responses ------------------------------------------------------

    async def _h_responses(self, request: web.Request) -> web.StreamResponse:
        raw, body = await self._json(request)
        model = str(body.get("model", "")) if isinstance(body, dict) else ""
        rec = self._record(request, "http", "responses", model, body, raw)
        if not isinstance(body, dict):
            rec.status, rec.answer = 400, "bad json"
            return web.json_response(
                {"error": {"message": "invalid JSON", "type": "invalid_request_error"}}, status=400
            )
        if self._over(model, rec.tokens) is not None:
            rec.status, rec.answer = 400, "overflow"
            return web.json_response(openai_overflow(), status=400)
        given = body.get("input")
        items: list[Any] = (
            given if isinstance(given, list) else [{"role": "user", "content": given}]
        )
        d = responses_decide(self.script, body, items)
        rec.answer = d.label
        output = responses_output(d)
        events = list(responses_events(model, f"resp_{next(_ids)}", output, rec.tokens))
        if not body.get("stream"):
            return web.json_response(events[-1]["response"])
        resp = web.StreamResponse(
            headers={"content-type": "text/event-stream", "cache-control": "no-cache"}
        )
        await resp.prepare(request)
        for ev in events:
            await resp.write(f"event: {ev['type']}\ndata: {json.dumps(ev)}\n\n".encode())
        await resp.write_eof()
        return resp

    async def _h_responses_ws(self, request: web.Request) -> web.StreamResponse:
        upgrade = request.headers.get("upgrade", "").lower() == "websocket"
        rec = Record(
            "ws-handshake",
            request.method,
            request.path,
            "responses",
            "",
            public_headers(request.headers),
            None,
            0,
        )
        self.records.append(rec)
        if not (self.websocket and upgrade):
            rec.status, rec.answer = 405, "refused"
            return web.json_response(
                {"error": {"message": "Method Not Allowed", "type": "invalid_request_error"}},
                status=405,
            )
        ws = web.WebSocketResponse(compress=True, max_msg_size=256 * 1024 * 1024)
        ws.headers.update(self.ws_headers)
        if self.ws_headers and "x-codex-turn-state" in request.headers:
            ws.headers["x-codex-turn-state"] = request.headers["x-codex-turn-state"]
        await ws.prepare(request)
        rec.status, rec.answer = 101, "upgraded"
        kept: dict[str, list[Any]] = {}  # response id -> its full input and output
        while True:
            msg = await ws.receive()
            if msg.type == WSMsgType.CLOSE:
                self.ws_closes.append((int(msg.data), str(msg.extra or "")))
            if msg.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED):
                break
            if msg.type != WSMsgType.TEXT:
                continue
            try:
                event = json.loads(msg.data)
            except ValueError:
                await ws.send_json(
                    {
                        "type": "error",
                        "status": 400,
                        "error": {"type": "invalid_request_error", "message": "invalid JSON"},
                    }
                )
                continue
            body = (
                {k: v for k, v in event.items() if k != "type"} if isinstance(event, dict) else {}
            )
            model = str(body.get("model", ""))
            r = Record(
                "ws", "WS", request.path, "responses", model, {}, event, rough_tokens(msg.data)
            )
            self.records.append(r)
            if not isinstance(event, dict) or event.get("type") != "response.create":
                r.answer = f"ignored {event.get('type') if isinstance(event, dict) else '?'}"
                continue
            items = list(body.get("input") or []) if isinstance(body.get("input"), list) else []
            prev = body.get("previous_response_id")
            if prev:
                if prev not in kept:
                    r.status, r.answer = 400, "unknown previous_response_id"
                    err = {
                        "type": "invalid_request_error",
                        "code": "previous_response_not_found",
                        "message": f"Previous response with id '{prev}' not found.",
                        "param": "previous_response_id",
                    }
                    await ws.send_json({"type": "error", "status": 400, "error": err})
                    continue
                items = kept[prev] + items
                r.effective = {**body, "input": items}
                r.tokens = rough_tokens(json.dumps(r.effective))
            if self._over(model, r.tokens) is not None:
                r.status, r.answer = 400, "overflow"
                await ws.send_json(
                    {"type": "error", "status": 400, "error": openai_overflow()["error"]}
                )
                continue
            rid = f"resp_{next(_ids)}"
            if body.get("generate") is False:  # a warm-up: the input is kept, nothing is generated
                r.answer = "prewarm"
                kept[rid] = items
                for ev in responses_events(model, rid, [], r.tokens):
                    await ws.send_str(json.dumps(ev))
                continue
            d = responses_decide(self.script, body, items)
            r.answer = d.label
            output = responses_output(d)
            kept[rid] = items + output
            for ev in responses_events(model, rid, output, r.tokens):
                await ws.send_str(json.dumps(ev))
        return ws

    # Anthropic -------------------------------------------------------------

    async def _h_messages(self, request: web.Request) -> web.StreamResponse:
        raw, body = await self._json(request)
        model = str(body.get("model", "")) if isinstance(body, dict) else ""
        rec = self._record(request, "http", "anthropic", model, body, raw)
        if not isinstance(body, dict):
            rec.status, rec.answer = 400, "bad json"
            return web.json_response(
                {
                    "type": "error",
                    "error": {"type": "invalid_request_error", "message": "invalid JSON"},
                },
                status=400,
            )
        limit = self._over(model, rec.tokens)
        if limit is not None:
            rec.status, rec.answer = 400, "overflow"
            return web.json_response(anthropic_overflow(rec.tokens, limit), status=400)
        d = anthropic_decide(self.script, body)
        rec.answer = d.label
        msg = anthropic_message(model, d, rec.tokens)
        if not body.get("stream"):
            return web.json_response(msg)
        resp = web.StreamResponse(
            headers={"content-type": "text/event-stream", "cache-control": "no-cache"}
        )
        await resp.prepare(request)
        for name, ev in anthropic_events(msg):
            await resp.write(f"event: {name}\ndata: {json.dumps(ev)}\n\n".encode())
        await resp.write_eof()
        return resp

    async def _h_count_tokens(self, request: web.Request) -> web.Response:
        raw, body = await self._json(request)
        model = str(body.get("model", "")) if isinstance(body, dict) else ""
        rec = self._record(request, "http", "anthropic", model, body, raw)
        rec.answer = "count"
        return web.json_response({"input_tokens": rec.tokens})

    # Gemini ----------------------------------------------------------------

    async def _h_gemini(self, request: web.Request) -> web.StreamResponse:
        model, _, method = request.match_info["call"].partition(":")
        raw, body = await self._json(request)
        rec = self._record(request, "http", "gemini", model, body, raw)
        if method == "countTokens":
            rec.answer = "count"
            return web.json_response({"totalTokens": rec.tokens})
        if method not in ("generateContent", "streamGenerateContent") or not isinstance(body, dict):
            rec.status, rec.answer = 400, "bad request"
            return web.json_response(
                {"error": {"code": 400, "message": "bad request", "status": "INVALID_ARGUMENT"}},
                status=400,
            )
        limit = self._over(model, rec.tokens)
        if limit is not None:
            rec.status, rec.answer = 400, "overflow"
            return web.json_response(gemini_overflow(rec.tokens, limit), status=400)
        d = gemini_decide(self.script, body)
        rec.answer = d.label
        out = gemini_response(model, d, rec.tokens)
        if method == "generateContent":
            return web.json_response(out)
        if request.query.get("alt") != "sse":
            return web.json_response([out])
        resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(f"data: {json.dumps(out)}\r\n\r\n".encode())
        await resp.write_eof()
        return resp

    # anything else ---------------------------------------------------------

    async def _h_other(self, request: web.Request) -> web.Response:
        raw, body = await self._json(request)
        rec = self._record(request, "http", "other", "", body, raw)
        rec.status, rec.answer = 404, "unknown path"
        return web.json_response(
            {"error": {"message": f"no route {request.path}", "type": "not_found"}}, status=404
        )


async def _serve(port: int, websocket: bool, rounds: int) -> None:
    fake = AgentFake(websocket=websocket, script=Script(rounds=rounds))
    runner = web.AppRunner(fake.app())
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    print(
        f"agent fake on http://127.0.0.1:{port} (websocket {'on' if websocket else 'off'})",
        flush=True,
    )
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--port", type=int, default=8790)
    ap.add_argument("--websocket", action="store_true", help="offer the Responses WebSocket mode")
    ap.add_argument("--rounds", type=int, default=3, help="tool calls before the final text")
    a = ap.parse_args()
    asyncio.run(_serve(a.port, a.websocket, a.rounds))


if __name__ == "__main__":
    main()
