"""trimgate demo: a self-contained tour on loopback, no network, no API key.

A built-in fake provider speaks the OpenAI chat API with a small context
window (and, like a real tokenizer, counts about 30% more tokens than
trimgate's estimate). trimgate sits in front of it. A scripted coding agent
holds a long conversation with tool calls through trimgate, and the tour
prints what trimgate did on every request and where to look for it.
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


def _fake_provider() -> web.Application:
    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        text = sum(len(orjson.dumps(m)) for m in body["messages"])
        tokens = math.ceil(text / 4 * TOKEN_RATIO)
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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
        {"role": "tool", "tool_call_id": cid, "content": listing},
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

    out("trimgate demo")
    out(f"  fake provider (OpenAI chat API, {WINDOW}-token window) on 127.0.0.1:{fake_port}")
    out(f"  trimgate proxy on {base}  (the agent's base URL: {base}/v1)")
    out("")
    out(" req | history msgs | forwarded | trimmed | reason     | dropped turns | tokens ")
    out("-----+--------------+-----------+---------+------------+---------------+----------------")
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent. Use tools to read files."}
    ]
    last_headers: dict[str, str] = {}
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
                forwarded = h.get("x-demo-forwarded-messages", "-")
                if resp.status != 200:
                    forwarded = f"error {resp.status}: {answer}"
                out(
                    f" {t + 1:3d} | {len(history):12d} | {forwarded:>9} | "
                    f"{h['x-trimgate-trimmed']:7} | {h.get('x-trimgate-reason', ''):10} | "
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

    reactive = [e for e in events if e["reason"] == "reactive"]
    out("")
    out("The agent kept sending its whole history; trimgate forwarded only what fits the")
    out("window, dropping the oldest whole turns (a tool call never loses its result) and")
    out("telling the model so with a breadcrumb message.")
    out("The fake provider counts more tokens than trimgate's estimate (bytes / 4);")
    out("trimgate learned the ratio from the usage in each answer (calibration), so the")
    out("budget holds in the provider's own tokens.")
    if reactive:
        out(
            f"{len(reactive)} request(s) still overflowed at the provider: trimgate dropped "
            "more turns and retried before answering (reason 'reactive')."
        )
    out("")
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
