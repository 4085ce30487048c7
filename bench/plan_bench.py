"""CPU cost of the pure core: decode (the estimate) + plan, JSON parsing excluded.

    python -m bench.plan_bench [--repeat N] [--turns 100 1000 10000]

For each format and history size (100, 1,000, 10,000 turns) it reports the
best-of-N process CPU time of: orjson parsing (for reference, excluded from
the target), codec decode (token estimation), plan with a budget that needs a
trim, decode + plan together (the target: under 5 ms at 1,000 turns), and
plan with no trim needed (the orphan sweep and the sums over every message),
and, for a codec that can size a body from its bytes (OpenAI Chat: ``decode_raw``,
``_chatscan.c``), that decode from the raw bytes, which replaces parse + decode
in the proxy. Ratios between sizes show the work grows linearly.

The OpenAI Chat and Anthropic bodies come from ``bench.payloads``; the
Responses and Gemini bodies are the same conversation (same turns, tool calls,
results and texts) converted to those wire shapes here.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import orjson

from bench.payloads import make_anthropic, make_openai
from trimgate.providers.base import DecodeOptions
from trimgate.providers.registry import CODECS
from trimgate.trimming.estimate import text_tokens
from trimgate.trimming.pipeline import Policy, plan

BREADCRUMB = "[earlier turns omitted to fit the context window]"
OPTIONS = DecodeOptions(breadcrumb=BREADCRUMB)


def make_responses(turns: int, result_bytes: int, seed: int) -> bytes:
    """The ``make_openai`` conversation as a Responses ``input`` list.

    Users are ``{"role": "user", "content": str}``; assistant texts are echoed
    output messages with an ``output_text`` part; each tool call is a
    ``function_call`` item and each result a ``function_call_output``.
    """
    chat = orjson.loads(make_openai(turns, result_bytes, seed))
    items: list[dict[str, Any]] = []
    instructions = None
    for n, m in enumerate(chat["messages"]):
        role, content = m["role"], m.get("content")
        if role == "system":
            instructions = content
        elif role == "user":
            items.append({"role": "user", "content": content})
        elif role == "assistant":
            if content:
                items.append(
                    {
                        "type": "message",
                        "id": f"msg_{n}",
                        "role": "assistant",
                        "status": "completed",
                        "content": [{"type": "output_text", "text": content, "annotations": []}],
                    }
                )
            for call in m.get("tool_calls") or ():
                items.append(
                    {
                        "type": "function_call",
                        "id": f"fc_{call['id']}",
                        "call_id": call["id"],
                        "name": call["function"]["name"],
                        "arguments": call["function"]["arguments"],
                        "status": "completed",
                    }
                )
        elif role == "tool":
            items.append(
                {"type": "function_call_output", "call_id": m["tool_call_id"], "output": content}
            )
    tools = [{"type": "function", **t["function"]} for t in chat["tools"]]
    body = {
        "model": "bench-big-responses",
        "instructions": instructions,
        "tools": tools,
        "max_output_tokens": chat["max_tokens"],
        "input": items,
    }
    return orjson.dumps(body)


def make_gemini(turns: int, result_bytes: int, seed: int) -> bytes:
    """The ``make_openai`` conversation as Gemini ``contents``.

    Calls carry no ids (the common Gemini shape), so responses pair by name and
    order; the results of one assistant step travel in one ``user`` content.
    """
    chat = orjson.loads(make_openai(turns, result_bytes, seed))
    contents: list[dict[str, Any]] = []
    system = None
    names: dict[str, str] = {}
    responses: list[dict[str, Any]] = []

    def flush() -> None:
        if responses:
            contents.append({"role": "user", "parts": list(responses)})
            responses.clear()

    for m in chat["messages"]:
        role, content = m["role"], m.get("content")
        if role != "tool":
            flush()
        if role == "system":
            system = content
        elif role == "user":
            contents.append({"role": "user", "parts": [{"text": content}]})
        elif role == "assistant":
            parts: list[dict[str, Any]] = [{"text": content}] if content else []
            for call in m.get("tool_calls") or ():
                fn = call["function"]
                names[call["id"]] = fn["name"]
                parts.append(
                    {"functionCall": {"name": fn["name"], "args": orjson.loads(fn["arguments"])}}
                )
            contents.append({"role": "model", "parts": parts})
        elif role == "tool":
            name = names[m["tool_call_id"]]
            responses.append({"functionResponse": {"name": name, "response": {"result": content}}})
    flush()
    body = {
        "systemInstruction": {"parts": [{"text": system}]},
        "tools": [{"functionDeclarations": [dict(t["function"]) for t in chat["tools"]]}],
        "generationConfig": {"maxOutputTokens": chat["max_tokens"]},
        "contents": contents,
    }
    return orjson.dumps(body)


FORMATS: dict[str, tuple[Callable[[int, int, int], bytes], str]] = {
    "openai": (make_openai, "/v1/chat/completions"),
    "anthropic": (make_anthropic, "/v1/messages"),
    "openai-responses": (make_responses, "/v1/responses"),
    "gemini": (make_gemini, "/v1beta/models/bench-big-gemini:generateContent"),
}


def best_ms(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.process_time()
        fn()
        best = min(best, time.process_time() - t)
    return best * 1000


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--turns", type=int, nargs="*", default=[100, 1000, 10000])
    parser.add_argument("--formats", nargs="*", default=list(FORMATS), choices=list(FORMATS))
    args = parser.parse_args()
    policy = Policy(budget=16_000, breadcrumb_tokens=text_tokens(BREADCRUMB))
    print(
        "| format | turns | body MB | messages | parse ms | decode ms | plan (trim) ms "
        "| decode+plan ms | plan (no trim) ms | decode from bytes ms |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for wire in args.formats:
        make, path = FORMATS[wire]
        codec = CODECS[wire]
        for turns in args.turns:
            raw = make(turns, 820, 1)
            repeat = max(3, args.repeat if turns <= 1000 else args.repeat // 3)
            # first, while no parsed body is alive for the collector to walk (as in the proxy)
            from_bytes = "–"
            if codec.decode_raw(raw, path=path, options=OPTIONS, tool_texts=False) is not None:
                ms = best_ms(
                    lambda: codec.decode_raw(raw, path=path, options=OPTIONS, tool_texts=False),  # noqa: B023
                    repeat,
                )
                from_bytes = f"{ms:.2f}"
            body = orjson.loads(raw)
            decoded = codec.decode(body, path=path, options=OPTIONS)
            conv = decoded.conversation
            assert decoded.skip is None and plan(conv, policy).report.trimmed
            parse = best_ms(lambda: orjson.loads(raw), repeat)  # noqa: B023
            dec = best_ms(lambda: codec.decode(body, path=path, options=OPTIONS), repeat)  # noqa: B023
            trim = best_ms(lambda: plan(conv, policy), repeat)  # noqa: B023
            untouched = best_ms(lambda: plan(conv, Policy(budget=0)), repeat)  # noqa: B023
            both = best_ms(
                lambda: plan(codec.decode(body, path=path, options=OPTIONS).conversation, policy),  # noqa: B023
                repeat,
            )
            print(
                f"| {wire} | {turns} | {len(raw) / 1e6:.2f} | {len(conv.messages)} | {parse:.2f} "
                f"| {dec:.2f} | {trim:.2f} | {both:.2f} | {untouched:.2f} | {from_bytes} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
