"""trimgate demo: a one-second tour on loopback, no network, no API key.

A built-in fake provider speaks the OpenAI chat API with a small context
window (and, like a real tokenizer, counts about 30% more tokens than
trimgate's estimate). trimgate sits in front of it. A scripted coding agent
holds a long conversation with tool calls through trimgate, and the tour
prints what trimgate did on every request and where to look for it:

1. preemptive trims: the history outgrows the window, the oldest whole turns go;
2. a reactive retry: one tool result (a base64 file) costs the provider's tokenizer far
   more than trimgate's estimate, the provider answers "context length exceeded" once,
   and trimgate drops more turns and resends before the agent sees anything;
3. (to come) the cache-stable cut: its place in ``run_demo`` is marked "Step 3".
"""

from __future__ import annotations

import math
import socket
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from trimgate.config import parse_config
from trimgate.proxy.app import HUB, create_app
from trimgate.proxy.serve import proxy_site

WINDOW = 6000  # the fake model's real context window, in its own tokens
TOKEN_RATIO = 1.3  # the fake tokenizer counts this many tokens per estimated token
TURNS = 24
BLOB_TURN = 19  # this turn's tool result is a base64 file
BLOB_CHARS = 2400
BLOB_CHARS_PER_TOKEN = 1.6  # base64 tokenizes badly: far more tokens than bytes / 4


def _fake_provider() -> web.Application:
    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        tokens = sum(_fake_tokens(m) for m in body["messages"])
        if tokens > WINDOW:
            error = {
                "message": (
                    f"This model's maximum context length is {WINDOW} tokens. However, your "
                    f"messages resulted in {tokens} tokens. Please reduce the length of the "
                    "messages."
                ),
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
            return web.json_response({"error": error}, status=400)
        n = len(body["messages"])
        answer = {
            "id": "chatcmpl-demo",
            "object": "chat.completion",
            "model": body.get("model"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": f"(saw {n} messages)"},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": tokens, "completion_tokens": 5, "total_tokens": tokens + 5},
        }
        return web.json_response(answer, headers={"x-demo-forwarded-messages": str(n)})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    return app


def _fake_tokens(message: dict[str, Any]) -> int:
    """The fake tokenizer: 30% above trimgate's estimate, base64 far more."""
    content = message.get("content")
    if isinstance(content, str) and content.startswith("data:image/png;base64,"):
        return math.ceil(len(content) / BLOB_CHARS_PER_TOKEN)
    return math.ceil(len(orjson.dumps(message)) / 4 * TOKEN_RATIO)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _blob() -> str:
    """A screenshot the agent's tool returned as base64 (deterministic bytes)."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    return "data:image/png;base64," + "".join(
        alphabet[(i * 37 + i // 7) % 64] for i in range(BLOB_CHARS)
    )


def _turn(t: int) -> list[dict[str, Any]]:
    cid = f"call_{t}"
    listing = "\n".join(f"src/module_{t}_{i}.py: def handler_{i}(request): ..." for i in range(14))
    return [
        {"role": "user", "content": f"Step {t}: look at module {t} and fix the failing test."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": cid,
                    "type": "function",
                    "function": {"name": "read_file", "arguments": f'{{"path": "module_{t}.py"}}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": cid, "content": _blob() if t == BLOB_TURN else listing},
        {"role": "assistant", "content": f"Module {t} fixed: the handler now validates input."},
    ]


async def run_demo(out: Any = print) -> int:
    fake_runner = web.AppRunner(_fake_provider(), access_log=None)
    await fake_runner.setup()
    fake_port = _free_port()
    await web.TCPSite(fake_runner, "127.0.0.1", fake_port).start()

    config = parse_config(
        {
            "upstreams": {
                "openai": {"provider": "openai", "base_url": f"http://127.0.0.1:{fake_port}"}
            },
            "models": [{"match": "demo-coder", "context_window": WINDOW}],
            "trimming": {"reserve_output_tokens": True},
        }
    )
    app = create_app(config)
    runner = web.AppRunner(app, access_log=None, handler_cancellation=True, auto_decompress=False)
    await runner.setup()
    port = _free_port()
    await proxy_site(runner, "127.0.0.1", port).start()  # as `trimgate serve` listens
    base = f"http://127.0.0.1:{port}"

    out("trimgate demo: a one-second tour on loopback (no network, no API key)")
    out(f"  fake provider (OpenAI chat API, {WINDOW}-token window) on 127.0.0.1:{fake_port}")
    out(f"  trimgate proxy on {base}  (the agent's base URL: {base}/v1)")
    out("")
    out(f"A scripted coding agent sends its whole history, {TURNS} requests:")
    out("")
    out(" req | history msgs | forwarded | trimmed | reason     | retries | dropped turns | tokens")
    out("-----+--------------+-----------+---------+------------+---------+---------------+-------")
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent. Use tools to read files."}
    ]
    last_headers: dict[str, str] = {}
    retried: tuple[int, dict[str, str]] | None = None  # the first reactive request
    try:
        async with aiohttp.ClientSession() as session:
            for t in range(TURNS):
                history.extend(_turn(t)[:1])
                body = {"model": "demo-coder", "messages": history, "max_tokens": 300}
                async with session.post(
                    f"{base}/v1/chat/completions",
                    json=body,
                    headers={"Authorization": "Bearer demo-key", "x-trimgate-agent": "demo"},
                ) as resp:
                    answer = await resp.json()
                    h = resp.headers
                    last_headers = {k: v for k, v in h.items() if k.startswith("x-trimgate-")}
                if retried is None and h.get("x-trimgate-reason") == "reactive":
                    retried = (t + 1, last_headers)
                forwarded = h.get("x-demo-forwarded-messages", "-")
                if resp.status != 200:
                    forwarded = f"error {resp.status}: {answer}"
                out(
                    f" {t + 1:3d} | {len(history):12d} | {forwarded:>9} | "
                    f"{h['x-trimgate-trimmed']:7} | {h.get('x-trimgate-reason', ''):10} | "
                    f"{h.get('x-trimgate-retries', '0'):>7} | "
                    f"{h['x-trimgate-dropped-turns']:>13} | "
                    f"{h['x-trimgate-tokens-before']} -> {h['x-trimgate-tokens-after']}"
                    f" (budget {h['x-trimgate-budget']})"
                )
                history.extend(_turn(t)[1:])
            async with session.get(f"{base}/metrics") as resp:
                metrics = await resp.text()
    finally:
        events = app[HUB].history()
        await runner.cleanup()
        await fake_runner.cleanup()

    out("")
    out("1. Preemptive trims. Once the history outgrew the window, trimgate forwarded only")
    out("   what fits, dropping the oldest whole turns (a tool call never loses its result)")
    out("   and telling the model so with a breadcrumb message. The fake provider counts")
    out("   more tokens than trimgate's estimate (bytes / 4); trimgate learned the ratio")
    out("   from the usage in each answer (calibration), so the budget holds in the")
    out("   provider's own tokens.")
    out("")
    if retried is not None:
        n, headers = retried
        out(f"2. A reactive retry (request {n}). The agent's tool had returned a screenshot as")
        out("   base64, which the provider's tokenizer counts at about 2.5 times trimgate's")
        out('   estimate. The provider answered 400 "maximum context length ... resulted in N')
        out('   tokens"; trimgate dropped more whole turns and resent before answering, so no')
        out("   byte of the failed attempt reached the agent, which got a 200 with:")
        for k in ("x-trimgate-reason", "x-trimgate-retries", "x-trimgate-dropped-turns"):
            out(f"     {k}: {headers.get(k)}")
    else:  # pragma: no cover - the script above always overflows once
        out("2. (no request overflowed at the provider this time)")
    out("")
    # Step 3 (a later change adds it here): the cache-stable cut, i.e. a session whose
    # trims keep their cut where the provider's prompt cache still holds.
    out("Response headers of the last request:")
    for k, v in sorted(last_headers.items()):
        out(f"  {k}: {v}")
    out("")
    out("GET /metrics (excerpt):")
    for line in metrics.splitlines():
        if line.startswith(
            (
                "trimgate_trims_total",
                "trimgate_dropped_turns_total",
                "trimgate_context_overflows_total",
                "trimgate_reactive_retries_total",
                "trimgate_estimate_calibration_ratio",
            )
        ):
            out(f"  {line}")
    out("")
    out(f"GET /api/events/history: {len(events)} history_trimmed events; the last one:")
    if events:
        out("  " + orjson.dumps(events[-1]).decode())
    out("")
    out("Next: `trimgate serve` and point your SDK's base URL at http://127.0.0.1:8788/v1")
    out("(Anthropic SDKs: http://127.0.0.1:8788). Watch trims live: curl -N .../api/events")
    return 0
