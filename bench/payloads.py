# Deterministic chat request bodies for the benchmark.
#
# Same (turns, result_bytes, seed, options) -> same bytes, on every machine: all randomness
# comes from one random.Random(seed). Every turn is an agent turn: a real user message, an
# assistant tool call (sometimes several in parallel), one tool result per call (sizes vary,
# a share of them several KB, some non-ASCII text and JSON that needs escaping), and a final
# assistant reply. The newest turn ends on its tool results by default (the agent loop asks
# the model to continue), so every request is valid for the real APIs: strict user/assistant
# alternation for Anthropic, every tool call answered.
#
# Presets: small (~2 KB, 3 turns), medium (~200 KB, 100 turns), large (~2 MB, 1,000 turns).

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import orjson

Format = Literal["openai", "anthropic"]

_WORDS = (
    "the",
    "request",
    "returned",
    "a",
    "list",
    "of",
    "items",
    "and",
    "the",
    "handler",
    "wrote",
    "them",
    "to",
    "the",
    "cache",
    "while",
    "retrying",
    "on",
    "timeout",
    "with",
    "backoff",
    "until",
    "the",
    "queue",
    "drained",
    "then",
    "the",
    "worker",
    "reported",
    "status",
    "ok",
    "for",
    "every",
    "shard",
    "except",
    "one",
    "where",
    "the",
    "index",
    "was",
    "stale",
    "so",
    "we",
    "rebuilt",
    "it",
    "from",
    "the",
    "snapshot",
    "and",
    "compared",
    "checksums",
    "before",
    "promoting",
    "the",
    "replica",
    "config",
    "value",
    "deadline",
    "budget",
    "token",
    "window",
    "context",
    "trim",
    "proxy",
    "upstream",
    "stream",
    "chunk",
    "latency",
)
_UNICODE = ("café", "naïve", "Zürich", "日本語", "données", "façade", "✓", "→", "emoji 🚀")
_TOOLS = ("read_file", "run_shell", "search_code", "http_get", "list_dir", "grep")


def _corpus(rng: random.Random, size: int = 96 * 1024) -> str:
    """A block of tool-output-like text (code, logs, JSON) to slice results from."""
    lines: list[str] = []
    total = 0
    n = 0
    while total < size:
        kind = rng.random()
        if kind < 0.4:
            words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 14)))
            line = f"    {rng.choice(('def', 'return', 'if', 'for', 'raise'))} {words}"
        elif kind < 0.7:
            line = (
                f"2025-01-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:"
                f"{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z INFO "
                f"worker[{rng.randint(1, 64)}] {' '.join(rng.sample(_WORDS, 6))}"
            )
        elif kind < 0.9:
            line = orjson.dumps(
                {"id": n, "name": rng.choice(_WORDS), "ok": rng.random() < 0.9, "v": rng.random()}
            ).decode()
        else:
            line = f'# {rng.choice(_UNICODE)} {" ".join(rng.sample(_WORDS, 5))} "quoted"\t'
        lines.append(line)
        total += len(line.encode()) + 1
        n += 1
    return "\n".join(lines)


def _slice(rng: random.Random, corpus: str, size: int) -> str:
    start = rng.randrange(0, max(1, len(corpus) - size - 1))
    piece = corpus[start : start + size]
    while len(piece.encode()) < size:  # corpus shorter than the request: repeat it
        piece += "\n" + corpus[: size - len(piece.encode())]
    return piece


def _text(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(lo, hi)))


def _id(rng: random.Random, prefix: str) -> str:
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    return prefix + "".join(rng.choice(alphabet) for _ in range(24))


@dataclass(frozen=True)
class _Call:
    id: str
    name: str
    arguments: dict[str, Any]
    result: str


@dataclass(frozen=True)
class _Turn:
    user: str
    thought: str | None
    calls: tuple[_Call, ...]
    reply: str | None  # None on the newest turn when it ends on tool results


def _result_size(rng: random.Random, mean: int) -> int:
    # Most results are below the mean, one in seven is a multi-KB dump; the mean holds.
    if rng.random() < 0.15:
        return max(64, int(mean * rng.uniform(3.0, 5.0)))
    return max(32, int(mean * rng.uniform(0.3, 1.0)))


def _turns(turns: int, result_bytes: int, seed: int, pending_tool: bool) -> list[_Turn]:
    rng = random.Random(seed)
    corpus = _corpus(rng)
    out: list[_Turn] = []
    for t in range(turns):
        r = rng.random()
        ncalls = 0 if r < 0.1 else (1 if r < 0.75 else rng.randint(2, 3))
        newest = t == turns - 1
        if newest and pending_tool and ncalls == 0:
            ncalls = 1
        calls = tuple(
            _Call(
                id=_id(rng, ""),
                name=rng.choice(_TOOLS),
                arguments={
                    "path": f"src/{rng.choice(_WORDS)}/module_{rng.randint(1, 400)}.py",
                    "query": _text(rng, 2, 6),
                    "limit": rng.randint(10, 500),
                },
                result=_slice(rng, corpus, _result_size(rng, result_bytes)),
            )
            for _ in range(ncalls)
        )
        out.append(
            _Turn(
                user=f"turn {t}: " + _text(rng, 12, 40),
                thought=_text(rng, 5, 15) if rng.random() < 0.5 else None,
                calls=calls,
                reply=None if (newest and pending_tool) else _text(rng, 15, 45),
            )
        )
    return out


_SYSTEM = (
    "You are a coding agent working in a large repository. Use the tools to read files, "
    "search code and run commands. Keep answers short and cite file paths."
)


def _schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "file or directory path"},
            "query": {"type": "string", "description": "what to look for"},
            "limit": {"type": "integer", "description": "maximum results"},
        },
        "required": ["path"],
    }


def make_openai(
    turns: int,
    result_bytes: int,
    seed: int,
    *,
    model: str = "bench-big-openai",
    stream: bool = False,
    max_tokens: int = 256,
    pending_tool: bool = True,
    n_tools: int = len(_TOOLS),
) -> bytes:
    """An OpenAI chat.completions request body (orjson bytes)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": _SYSTEM}]
    for turn in _turns(turns, result_bytes, seed, pending_tool):
        messages.append({"role": "user", "content": turn.user})
        if turn.calls:
            messages.append(
                {
                    "role": "assistant",
                    "content": turn.thought,
                    "tool_calls": [
                        {
                            "id": "call_" + c.id,
                            "type": "function",
                            "function": {
                                "name": c.name,
                                "arguments": orjson.dumps(c.arguments).decode(),
                            },
                        }
                        for c in turn.calls
                    ],
                }
            )
            messages.extend(
                {"role": "tool", "tool_call_id": "call_" + c.id, "content": c.result}
                for c in turn.calls
            )
        if turn.reply is not None:
            messages.append({"role": "assistant", "content": turn.reply})
    body: dict[str, Any] = {"model": model, "stream": stream, "max_tokens": max_tokens}
    if stream:
        body["stream_options"] = {"include_usage": True}
    body["tools"] = [
        {
            "type": "function",
            "function": {"name": n, "description": f"{n} tool", "parameters": _schema()},
        }
        for n in _TOOLS[:n_tools]
    ]
    body["messages"] = messages
    return orjson.dumps(body)


def make_anthropic(
    turns: int,
    result_bytes: int,
    seed: int,
    *,
    model: str = "bench-big-anthropic",
    stream: bool = False,
    max_tokens: int = 256,
    pending_tool: bool = True,
    n_tools: int = len(_TOOLS),
) -> bytes:
    """An Anthropic messages request body (orjson bytes), strict role alternation."""
    messages: list[dict[str, Any]] = []
    for turn in _turns(turns, result_bytes, seed, pending_tool):
        messages.append({"role": "user", "content": turn.user})
        if turn.calls:
            content: list[dict[str, Any]] = []
            if turn.thought:
                content.append({"type": "text", "text": turn.thought})
            content.extend(
                {"type": "tool_use", "id": "toolu_" + c.id, "name": c.name, "input": c.arguments}
                for c in turn.calls
            )
            messages.append({"role": "assistant", "content": content})
            messages.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_" + c.id, "content": c.result}
                        for c in turn.calls
                    ],
                }
            )
            if turn.reply is not None:
                messages.append({"role": "assistant", "content": turn.reply})
        elif turn.reply is not None:
            messages.append({"role": "assistant", "content": turn.reply})
    body: dict[str, Any] = {
        "model": model,
        "stream": stream,
        "max_tokens": max_tokens,
        "system": _SYSTEM,
        "tools": [
            {"name": n, "description": f"{n} tool", "input_schema": _schema()}
            for n in _TOOLS[:n_tools]
        ],
        "messages": messages,
    }
    return orjson.dumps(body)


@dataclass(frozen=True)
class Preset:
    turns: int
    result_bytes: int
    n_tools: int


PRESETS: dict[str, Preset] = {
    "small": Preset(turns=2, result_bytes=120, n_tools=2),
    "medium": Preset(turns=100, result_bytes=820, n_tools=len(_TOOLS)),
    "large": Preset(turns=1000, result_bytes=820, n_tools=len(_TOOLS)),
}

_MAKERS: dict[Format, Callable[..., bytes]] = {"openai": make_openai, "anthropic": make_anthropic}


def make(fmt: Format, preset: str, seed: int = 0, **options: Any) -> bytes:
    """A named preset in either shape; options go to make_openai / make_anthropic."""
    p = PRESETS[preset]
    options.setdefault("n_tools", p.n_tools)
    return _MAKERS[fmt](p.turns, p.result_bytes, seed, **options)


def small_openai(seed: int = 0, **options: Any) -> bytes:
    return make("openai", "small", seed, **options)


def medium_openai(seed: int = 0, **options: Any) -> bytes:
    return make("openai", "medium", seed, **options)


def large_openai(seed: int = 0, **options: Any) -> bytes:
    return make("openai", "large", seed, **options)


def small_anthropic(seed: int = 0, **options: Any) -> bytes:
    return make("anthropic", "small", seed, **options)


def medium_anthropic(seed: int = 0, **options: Any) -> bytes:
    return make("anthropic", "medium", seed, **options)


def large_anthropic(seed: int = 0, **options: Any) -> bytes:
    return make("anthropic", "large", seed, **options)
