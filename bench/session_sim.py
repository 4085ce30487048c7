# The session simulator: what trimming costs a user in prompt-cache terms.
#
#   python -m bench.session_sim [--profile chat agent] [--shape openai anthropic]
#       [--requests 300] [--window 32000] [--stream]
#       [--variant NAME:CONFIG ...]    CONFIG: a YAML/JSON snippet merged over the base config;
#                                      NAME "direct" (no CONFIG) sends to the fake itself
#       [--trimgate-dir CHECKOUT]      run another checkout's trimgate (python -m from there)
#
# One run = one profile x shape x variant: a fresh fake provider (bench/cache_provider.py,
# in this process, on loopback) with its own token count, context window and prompt cache;
# for a trimgate variant a fresh `trimgate serve` subprocess in front of it (config: the
# base below with the variant's snippet merged in, refused variants reported as
# "unsupported config" after `trimgate check-config`). The client then replays a seeded,
# growing conversation request by request, as an agent does: it keeps its FULL history,
# appends the model's (scripted) answer and its next user or tool message after each
# request, and never sees the body trimgate forwarded. The direct variant stops at the
# first refused request (the session dies there); a trimgate variant goes on.
#
# Every loop is bounded by a count and by time; everything listens on 127.0.0.1.

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import math
import os
import platform
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson
import yaml
from aiohttp import ClientError, ClientSession, ClientTimeout, web

from bench.__main__ import Proc, free_port
from bench.cache_provider import CacheProvider, Reply, Shape, digest, make_app

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
MAX_TOKENS = 1024  # every request reserves this much output
MODEL_PREFIX = "sim-"
CACHE_READ_PRICE = 0.1  # a cache read costs this fraction of a fresh input token
DEFAULT_VARIANTS = ("direct", "base:{}", 'step0:{"trimming": {"cut_step": 0}}')
Profile = Literal["chat", "agent"]
SYSTEM_BYTES: dict[Profile, int] = {"chat": 1_200, "agent": 3_000}

# --------------------------------------------------------------------------- the script

# fmt: off
_WORDS = (
    "the", "proxy", "request", "history", "turn", "window", "token", "cache", "prefix",
    "budget", "message", "tool", "result", "call", "retry", "error", "config", "model",
    "stream", "usage", "trim", "keep", "drop", "anchor", "cut", "step", "buffer", "file",
    "path", "line", "test", "value", "check", "return", "async", "await", "parse", "encode",
    "decode", "bytes", "count", "index", "session", "client", "server", "upstream", "provider",
    "header", "status", "body", "json", "field", "list", "dict",
)
# fmt: on
_CODE = (
    "def handle(request):",
    "    body = await request.read()",
    "    if not body:",
    "        return None",
    "class Budget:",
    "    tokens: int = 0",
    "for item in history:",
    "    total += estimate(item)",
    "assert result.kept_turns >= 1",
    "import orjson",
)


def _text(rng: random.Random, nbytes: int) -> str:
    words: list[str] = []
    n = 0
    while n < nbytes:
        w = rng.choice(_WORDS)
        words.append(w)
        n += len(w) + 1
    return " ".join(words)[:nbytes]


def _tool_output(rng: random.Random, nbytes: int) -> str:
    lines: list[str] = []
    n = 0
    while n < nbytes:
        if rng.random() < 0.6:
            line = f"src/{rng.choice(_WORDS)}/{rng.choice(_WORDS)}.py:{rng.randint(1, 900)}: "
            line += rng.choice(_CODE).strip()
        else:
            line = _text(rng, rng.randint(20, 120))
        lines.append(line)
        n += len(line) + 1
    return "\n".join(lines)[:nbytes]


@dataclass(frozen=True)
class ToolResult:
    call_id: str
    name: str
    text: str


Item = str | ToolResult  # a user text, or a tool result


@dataclass(frozen=True)
class ToolDef:
    name: str
    description: str
    parameters: dict[str, Any]


@dataclass
class Script:
    """A whole session: request i is sent after `first` and the first i steps."""

    system: str
    tools: list[ToolDef]
    first: str
    steps: list[tuple[Reply, Item]] = field(default_factory=list)


_TOOLS = [
    ToolDef(
        "read_file",
        "Read a file of the repository and return its text.",
        {
            "type": "object",
            "properties": {"path": {"type": "string", "description": "repository path"}},
            "required": ["path"],
        },
    ),
    ToolDef(
        "run_tests",
        "Run the test suite, or the tests matching an expression, and return the output.",
        {
            "type": "object",
            "properties": {"expr": {"type": "string"}, "verbose": {"type": "boolean"}},
        },
    ),
    ToolDef(
        "grep",
        "Search the repository for a regular expression.",
        {
            "type": "object",
            "properties": {"pattern": {"type": "string"}, "path": {"type": "string"}},
            "required": ["pattern"],
        },
    ),
    ToolDef(
        "edit_file",
        "Replace a unique snippet of a file with a new one.",
        {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "old": {"type": "string"},
                "new": {"type": "string"},
            },
            "required": ["path", "old", "new"],
        },
    ),
]


def _result_bytes(rng: random.Random) -> int:
    """Mostly small tool results (100 B to 3 KB), one in ten large (3 to 60 KB), log-uniform
    within each: about 2.6 KB on average, so a loop of ~10 calls makes ~7k tokens."""
    lo, hi = (3_000, 60_000) if rng.random() < 0.1 else (100, 3_000)
    return int(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def make_script(
    profile: Profile, requests: int, seed: int, system_bytes: int | None = None
) -> Script:
    rng = random.Random(f"{profile}:{seed}")
    system = _text(random.Random(f"system:{seed}"), system_bytes or SYSTEM_BYTES[profile])
    if profile == "chat":
        script = Script(system, [], _text(rng, rng.randint(200, 800)))
        for _ in range(requests):
            reply = Reply(_text(rng, rng.randint(150, 1_500)))
            script.steps.append((reply, _text(rng, rng.randint(80, 600))))
        return script
    script = Script(system, _TOOLS, _text(rng, rng.randint(200, 800)))
    left = -1  # tool calls left in the current loop; -1: a user message just came
    n_call = 0
    while len(script.steps) < requests:
        if left < 0:
            left = rng.randint(5, 13)  # a loop of ~10 requests per user turn
        if left > 0:
            left -= 1
            n_call += 1
            tool = rng.choice(_TOOLS)
            call_id = f"call_{seed}_{n_call:05d}"
            args = {k: _text(rng, rng.randint(8, 40)) for k in tool.parameters["properties"]}
            text = _text(rng, rng.randint(20, 200)) if rng.random() < 0.5 else ""
            reply = Reply(text, call_id, tool.name, args)
            out = _tool_output(rng, _result_bytes(rng))
            script.steps.append((reply, ToolResult(call_id, tool.name, out)))
        else:
            reply = Reply(_text(rng, rng.randint(300, 1_500)))
            script.steps.append((reply, _text(rng, rng.randint(100, 800))))
            left = -1
    return script


# --------------------------------------------------------------------------- wire shapes


def _openai_item(item: Item) -> dict[str, Any]:
    if isinstance(item, str):
        return {"role": "user", "content": item}
    return {"role": "tool", "tool_call_id": item.call_id, "content": item.text}


def _openai_reply(r: Reply) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": r.text or None}
    if r.tool_id:
        msg["tool_calls"] = [
            {
                "id": r.tool_id,
                "type": "function",
                "function": {
                    "name": r.tool_name,
                    "arguments": orjson.dumps(r.tool_args or {}).decode(),
                },
            }
        ]
    return msg


def _anthropic_item(item: Item) -> dict[str, Any]:
    if isinstance(item, str):
        return {"role": "user", "content": item}
    block = {"type": "tool_result", "tool_use_id": item.call_id, "content": item.text}
    return {"role": "user", "content": [block]}


def _anthropic_reply(r: Reply) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = []
    if r.text:
        blocks.append({"type": "text", "text": r.text})
    if r.tool_id:
        blocks.append(
            {"type": "tool_use", "id": r.tool_id, "name": r.tool_name, "input": r.tool_args or {}}
        )
    return {"role": "assistant", "content": blocks}


class Client:
    """The agent's side: its full history in one wire shape, and the request body."""

    def __init__(self, script: Script, shape: Shape, model: str, stream: bool) -> None:
        self.script = script
        self.shape = shape
        self.model = model
        self.stream = stream
        self.messages: list[dict[str, Any]] = []
        if shape == "openai":
            self.messages.append({"role": "system", "content": script.system})
        self.messages.append({"role": "user", "content": script.first})
        self.index: dict[bytes, int] = {digest(m): i for i, m in enumerate(self.messages)}

    def advance(self, step: int) -> None:
        reply, item = self.script.steps[step]
        if self.shape == "openai":
            new = [_openai_reply(reply), _openai_item(item)]
        else:
            new = [_anthropic_reply(reply), _anthropic_item(item)]
        for m in new:
            self.index.setdefault(digest(m), len(self.messages))
            self.messages.append(m)

    def body(self) -> bytes:
        b: dict[str, Any] = {"model": self.model, "max_tokens": MAX_TOKENS}
        if self.shape == "openai":
            if self.script.tools:
                b["tools"] = [
                    {
                        "type": "function",
                        "function": {
                            "name": t.name,
                            "description": t.description,
                            "parameters": t.parameters,
                        },
                    }
                    for t in self.script.tools
                ]
            b["messages"] = self.messages
            if self.stream:
                b["stream"] = True
                b["stream_options"] = {"include_usage": True}
        else:
            b["system"] = self.script.system
            if self.script.tools:
                b["tools"] = [
                    {"name": t.name, "description": t.description, "input_schema": t.parameters}
                    for t in self.script.tools
                ]
            b["messages"] = self.messages
            if self.stream:
                b["stream"] = True
        return orjson.dumps(b)

    def headers(self) -> dict[str, str]:
        if self.shape == "openai":
            return {"Authorization": "Bearer sk-sim", "Content-Type": "application/json"}
        return {
            "x-api-key": "sk-ant-sim",
            "anthropic-version": "2023-06-01",
            "Content-Type": "application/json",
        }

    @property
    def path(self) -> str:
        return "/v1/chat/completions" if self.shape == "openai" else "/v1/messages"


# --------------------------------------------------------------------------- one run


@dataclass
class Record:
    """One client request and what the fake saw for it."""

    i: int
    status: int
    upstream_calls: int
    prompt: int = 0  # the fake's count of the answered call
    cached: int = 0
    trimmed: bool = False  # some of the client's messages did not reach the provider
    cut: int | None = None  # client index of the first message of the kept tail
    header_trimmed: str | None = None  # x-trimgate-trimmed, where a proxy answered


@dataclass(frozen=True)
class Variant:
    name: str
    config: dict[str, Any] | None  # None: direct to the fake

    @classmethod
    def parse(cls, spec: str) -> Variant:
        name, sep, snippet = spec.partition(":")
        name = name.strip()
        if not name:
            raise ValueError(f"variant {spec!r}: no name")
        if not sep:
            if name != "direct":
                raise ValueError(f"variant {spec!r}: NAME:CONFIG (or just 'direct')")
            return cls(name, None)
        data = yaml.safe_load(snippet) if snippet.strip() else {}
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ValueError(f"variant {name}: the config snippet must be a mapping")
        return cls(name, data)


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = v
    return out


def trimgate_config(fake_url: str, port: int, window: int, over: dict[str, Any]) -> dict[str, Any]:
    base: dict[str, Any] = {
        "server": {"host": "127.0.0.1", "port": port},
        "upstreams": {
            "openai": {"provider": "openai", "base_url": fake_url},
            "anthropic": {"provider": "anthropic", "base_url": fake_url},
        },
        "models": [{"match": f"{MODEL_PREFIX}*", "context_window": window}],
    }
    return merge(base, over)


@dataclass
class RunSpec:
    profile: Profile
    shape: Shape
    variant: Variant
    requests: int
    window: int
    seed: int = 1
    system_bytes: int | None = None
    stream: bool = False
    run_seconds: float = 600.0
    request_seconds: float = 60.0
    memory: int = 64
    trimgate_cmd: Sequence[str] = (sys.executable, "-m", "trimgate")
    trimgate_dir: Path = ROOT  # the working directory: `python -m trimgate` runs its package
    workdir: Path = OUT / "session_sim"


def _cut(forwarded: Sequence[int], total: int) -> tuple[bool, int | None]:
    """Whether messages were dropped, and where the kept tail starts."""
    kept = set(forwarded)
    if len(kept) >= total:
        return False, None
    for i in sorted(kept):
        if i > 0 and i - 1 not in kept:
            return True, i
    return True, None


async def check_config(
    cmd: Sequence[str], path: Path, cwd: Path = ROOT, within: float = 60.0
) -> str | None:
    """None if trimgate accepts the config file, else its complaint."""
    proc = await asyncio.create_subprocess_exec(
        *cmd,
        "check-config",
        str(path),
        cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        _, err = await asyncio.wait_for(proc.communicate(), within)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return "check-config timed out"
    if proc.returncode == 0:
        return None
    text = err.decode(errors="replace").strip().splitlines()
    return "; ".join(text[-3:]) or f"exit status {proc.returncode}"


async def run_one(spec: RunSpec) -> dict[str, Any]:
    """One session through one variant; the figures and the per-request records."""
    script = make_script(spec.profile, spec.requests, spec.seed, spec.system_bytes)
    model = f"{MODEL_PREFIX}{spec.window // 1000}k"
    fake = CacheProvider(window=spec.window, memory=spec.memory)
    runner = web.AppRunner(make_app(fake), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    fake_url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    label = f"{spec.profile}-{spec.shape}-{spec.variant.name}"
    head: dict[str, Any] = {
        "profile": spec.profile,
        "shape": spec.shape,
        "variant": spec.variant.name,
        "config": spec.variant.config,
        "window": spec.window,
        "requests": spec.requests,
        "stream": spec.stream,
    }
    proc: Proc | None = None
    try:
        target = fake_url
        if spec.variant.config is not None:
            port = free_port()
            cfg = spec.workdir / f"{label}.yaml"
            cfg.parent.mkdir(parents=True, exist_ok=True)
            data = trimgate_config(fake_url, port, spec.window, spec.variant.config)
            cfg.write_text(yaml.safe_dump(data, sort_keys=False))
            problem = await check_config(spec.trimgate_cmd, cfg, spec.trimgate_dir)
            if problem is not None:
                return {**head, "unsupported": problem}
            argv = [*spec.trimgate_cmd, "serve", "--config", str(cfg), "--log-level", "WARNING"]
            log = spec.workdir / "logs" / f"{label}.log"
            proc = Proc(label, argv, port, log, "/healthz", cwd=spec.trimgate_dir)
            proc.start()
            await proc.wait_ready()
            target = proc.base_url
        records = await _drive(spec, script, model, fake, target)
    finally:
        if proc is not None:
            proc.stop()
        await runner.cleanup()
    return {**head, **summarize(records, spec.window, len(fake.calls))}


async def _drive(
    spec: RunSpec, script: Script, model: str, fake: CacheProvider, target: str
) -> list[Record]:
    client = Client(script, spec.shape, model, spec.stream)
    records: list[Record] = []
    deadline = time.monotonic() + spec.run_seconds
    transport_errors = 0
    timeout = ClientTimeout(total=spec.request_seconds)
    async with ClientSession(timeout=timeout) as http:
        for i in range(spec.requests):
            if time.monotonic() > deadline:
                break
            fake.reply = script.steps[i][0]
            before = len(fake.calls)
            tag = None
            try:
                async with http.post(
                    target + client.path, data=client.body(), headers=client.headers()
                ) as resp:
                    await resp.read()
                    status = resp.status
                    tag = resp.headers.get("x-trimgate-trimmed")
            except (ClientError, TimeoutError):
                status = 0  # no answer at all: recorded, and three in a row end the run
                transport_errors += 1
                if transport_errors >= 3:
                    records.append(Record(i, status, len(fake.calls) - before))
                    break
            else:
                transport_errors = 0
            calls = fake.calls[before:]
            rec = Record(i, status, len(calls), header_trimmed=tag)
            if status == 200 and calls and calls[-1].status == 200:
                last = calls[-1]
                rec.prompt, rec.cached = last.prompt_tokens, last.cached_tokens
                forwarded = [client.index.get(d, -1) for d in last.message_digests]
                rec.trimmed, rec.cut = _cut([f for f in forwarded if f >= 0], len(client.messages))
            records.append(rec)
            if status != 200 and spec.variant.config is None:
                break  # without a proxy the session dies at its first refused request
            client.advance(i)
    return records


def _ratio(a: float, b: float, nd: int = 3) -> float | None:
    return round(a / b, nd) if b else None


def summarize(records: Sequence[Record], window: int, upstream_calls: int) -> dict[str, Any]:
    ok = [r for r in records if r.status == 200]
    trimmed = [r for r in ok if r.trimmed]
    moves = 0
    pairs = 0
    for a, b in itertools.pairwise(records):
        if a.status == 200 and b.status == 200 and a.trimmed and b.trimmed:
            pairs += 1
            moves += a.cut != b.cut
    prompt = sum(r.prompt for r in ok)
    cached = sum(r.cached for r in ok)
    t_prompt = sum(r.prompt for r in trimmed)
    t_cached = sum(r.cached for r in trimmed)
    cost = (prompt - cached) + CACHE_READ_PRICE * cached
    first_fail = next((r.i for r in records if r.status != 200), None)
    util = [r.prompt / window for r in trimmed]
    return {
        "sent": len(records),
        "ok": len(ok),
        "first_failure": first_fail,
        "statuses": sorted({r.status for r in records}),
        "upstream_calls": upstream_calls,
        "upstream_calls_per_request": _ratio(upstream_calls, len(records)),
        "trimmed": len(trimmed),
        "trimmed_pairs": pairs,
        "cut_moves": moves,
        "prompt_tokens": prompt,
        "cached_tokens": cached,
        "cached_share": _ratio(cached, prompt),
        "cached_share_trimmed": _ratio(t_cached, t_prompt),
        "input_cost": round(cost),
        "input_cost_per_ok": round(cost / len(ok), 1) if ok else None,
        "utilisation_trimmed": round(sum(util) / len(util), 3) if util else None,
        "utilisation_trimmed_min": round(min(util), 3) if util else None,
        "records": [asdict(r) for r in records],
    }


# --------------------------------------------------------------------------- report


def _f(v: Any, nd: int = 2) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.{nd}f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def markdown(runs: Sequence[dict[str, Any]]) -> str:
    head = (
        "| profile | shape | variant | ok / sent | upstream calls / req | trimmed "
        "| cut moves / trimmed pairs | cached share: all | cached share: trimmed "
        "| input cost (k tokens) | cost / ok req | utilisation when trimmed |\n"
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n"
    )
    rows = []
    for r in runs:
        lead = f"| {r['profile']} | {r['shape']} | {r['variant']} "
        if "unsupported" in r:
            rows.append(lead + f"| unsupported config: {r['unsupported']} |" + " |" * 8)
            continue
        sent = f"{r['ok']} / {r['sent']}"
        if r["config"] is None and r["first_failure"] is not None:
            sent += f" (dies at {r['first_failure']})"
        rows.append(
            lead
            + f"| {sent} | {_f(r['upstream_calls_per_request'])} | {r['trimmed']} "
            + f"| {r['cut_moves']} / {r['trimmed_pairs']} | {_f(r['cached_share'])} "
            + f"| {_f(r['cached_share_trimmed'])} | {_f(r['input_cost'] / 1000, 1)} "
            + f"| {_f(r['input_cost_per_ok'], 0)} | {_f(r['utilisation_trimmed'])} |"
        )
    return head + "\n".join(rows) + "\n"


def _machine() -> dict[str, Any]:
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "argv": sys.argv[1:],
    }


async def amain(args: argparse.Namespace) -> list[dict[str, Any]]:
    variants = [Variant.parse(v) for v in (args.variant or DEFAULT_VARIANTS)]
    runs: list[dict[str, Any]] = []
    t0 = time.monotonic()
    for profile in args.profile:
        for shape in args.shape:
            for variant in variants:
                spec = RunSpec(
                    profile=profile,
                    shape=shape,
                    variant=variant,
                    requests=args.requests,
                    window=args.window,
                    seed=args.seed,
                    system_bytes=args.system_bytes,
                    stream=args.stream,
                    run_seconds=args.run_seconds,
                    trimgate_cmd=tuple(args.trimgate_cmd.split()),
                    trimgate_dir=args.trimgate_dir,
                )
                t = time.monotonic()
                r = await run_one(spec)
                r["seconds"] = round(time.monotonic() - t, 1)
                runs.append(r)
                state = r.get("unsupported") or f"{r['ok']}/{r['sent']} ok"
                print(
                    f"[{time.monotonic() - t0:6.1f}s] {profile} {shape} {variant.name}: {state}",
                    file=sys.stderr,
                    flush=True,
                )
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.session_sim",
        description="replay growing sessions through trimgate against a caching fake provider",
    )
    parser.add_argument("--profile", nargs="+", choices=("chat", "agent"), default=["chat"])
    parser.add_argument("--shape", nargs="+", choices=("openai", "anthropic"), default=["openai"])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--window", type=int, default=32_000, help="context window, tokens")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--stream", action="store_true", help="SSE requests")
    parser.add_argument(
        "--system-bytes",
        type=int,
        help="system prompt size (default: chat 1,200, agent 3,000; about 3.5 bytes a token)",
    )
    parser.add_argument(
        "--variant",
        action="append",
        metavar="NAME:CONFIG",
        help="'direct', or NAME:YAML-or-JSON merged over the base trimgate config "
        f"(repeatable; default: {' '.join(DEFAULT_VARIANTS)})",
    )
    parser.add_argument("--run-seconds", type=float, default=600.0, help="time limit per run")
    parser.add_argument(
        "--trimgate-cmd",
        default=f"{sys.executable} -m trimgate",
        help="command that starts trimgate (subcommand arguments are appended)",
    )
    parser.add_argument(
        "--trimgate-dir",
        default=str(ROOT),
        help="working directory of trimgate: with the default command, the checkout whose "
        "trimgate runs (default: this one)",
    )
    parser.add_argument("--out", default=str(OUT / "session_sim.json"))
    args = parser.parse_args(argv)
    if args.requests < 1 or args.window < 1:
        parser.error("--requests and --window must be positive")
    args.trimgate_dir = Path(args.trimgate_dir).resolve()
    try:
        runs = asyncio.run(amain(args))
    except ValueError as exc:
        print(f"session_sim: {exc}", file=sys.stderr)
        return 2
    table = markdown(runs)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(orjson.dumps({"meta": _machine(), "runs": runs}, option=orjson.OPT_INDENT_2))
    print(table)
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
