"""Run the real coding agents (Codex CLI, Claude Code, Gemini CLI) through trimgate.

Everything stays on loopback: the agents come from the npm registry into
``bench/out/agents-npm`` (once; ``--npm-prefix`` moves it), a scripted fake
provider (``bench.agent_fake``) answers them, and ``trimgate serve`` sits in
between. Each agent runs twice in one session in a temp workdir (a first prompt,
then a resumed second one), and the fake makes it call its shell tool a few times
per prompt (``ls``, ``cat notes1.txt``, ...), so the history grows.

Per agent: a DIRECT run (agent -> fake, no window) gives the wall-time baseline
and the prompt sizes; the TRIMGATE run sets a window above the first prompt's
largest request and below the second's, enforced by the fake (real overflow
errors) and configured in trimgate (``models: [{match, context_window}]``), so
trimgate has to trim the resumed session. Codex runs three ways: the fake offers
the Responses WebSocket mode, the fake refuses it, or Codex has it off
(``supports_websockets=false``). Each pair runs ``--repeat`` times.

Printed and written to ``bench/out/agents.json`` / ``agents.md``: transport seen
by the fake, exit codes, the final answer, wall times, trims (trimgate's
``/api/events/history``), whether the agent's project file and preamble (Codex's
AGENTS.md and ``<environment_context>``, Claude Code's CLAUDE.md and
``<system-reminder>`` blocks, Gemini's GEMINI.md and session context) are still in
the last request the fake got, Codex's WebSocket handshakes and fallback time, and
what reached the egress trap (the agents' HTTP(S)_PROXY).

``python -m bench.agents [--only codex claude gemini] [--repeat 3] [--rounds 3]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

import aiohttp
import yaml
from aiohttp import web

from bench.agent_fake import DONE_MARK, AgentFake, Record, Script

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
PACKAGES = {
    "codex": "@openai/codex",
    "claude": "@anthropic-ai/claude-code",
    "gemini": "@google/gemini-cli",
}
MODELS = {"codex": "fake-codex", "claude": "fake-claude", "gemini": "fake-gemini"}
FMT = {"codex": "responses", "claude": "anthropic", "gemini": "gemini"}
AGENTS_MD_MARK = "AGENTS-MD-MARK-41c7"
PROMPTS = (
    "List the files here, then read notes1.txt and notes2.txt and summarise them.",
    "Now read notes3.txt and say whether it agrees with the others.",
)
TIMEOUT = 240.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --------------------------------------------------------------------------- install


def install(prefix: Path) -> dict[str, str]:
    """npm-install the three CLIs into ``prefix`` (once); their versions."""
    bins = prefix / "node_modules" / ".bin"
    if not all((bins / name).exists() for name in PACKAGES):
        prefix.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                "npm",
                "install",
                "--prefix",
                str(prefix),
                "--no-audit",
                "--no-fund",
                *PACKAGES.values(),
            ],
            check=True,
        )
    versions = {}
    for name in PACKAGES:
        p = subprocess.run(
            [str(bins / name), "--version"], capture_output=True, text=True, timeout=60
        )
        versions[name] = (
            (p.stdout.strip() or p.stderr.strip()).splitlines()[-1]
            if p.returncode == 0
            else f"error {p.returncode}"
        )
    return versions


# --------------------------------------------------------------------------- the agents' setups


def make_workdir(base: Path) -> Path:
    work = base / "work"
    work.mkdir(parents=True)
    memory = (
        f"# Project notes for agents\n\nMarker {AGENTS_MD_MARK}. Keep answers short. "
        "Never modify the notes files.\n"
    )
    for name in ("AGENTS.md", "CLAUDE.md", "GEMINI.md"):  # each agent's project file
        (work / name).write_text(memory)
    for i in (1, 2, 3):
        para = (
            f"Note {i}: the build uses plain make; tests live under tests/; line {{n}} of filler.\n"
        )
        (work / f"notes{i}.txt").write_text("".join(para.format(n=n) for n in range(90)))
    return work


class EgressTrap:
    """An HTTP proxy on loopback that forwards nothing: the agents get it as
    HTTP(S)_PROXY, so whatever they try to reach beyond loopback (and that honours
    the proxy variables) is answered 403 here and written down."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.server: asyncio.Server | None = None
        self.url = ""

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception):
            line = await asyncio.wait_for(reader.readline(), 5)
            parts = line.decode(errors="replace").split()
            if len(parts) >= 2:
                self.seen.append(f"{parts[0]} {parts[1][:120]}")
            writer.write(
                b"HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            )
            await writer.drain()
        writer.close()

    async def __aenter__(self) -> EgressTrap:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


def _env(home: Path, extra: dict[str, str], proxy: str) -> dict[str, str]:
    keep = {
        k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TERM", "TMPDIR")
    }
    return {
        **keep,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "HTTP_PROXY": proxy,
        "HTTPS_PROXY": proxy,
        "http_proxy": proxy,
        "https_proxy": proxy,
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        "NO_COLOR": "1",
        "CI": "1",
        **extra,
    }


def codex_commands(
    bins: Path, base_url: str, work: Path, home: Path, client_ws: bool
) -> tuple[list[list[str]], dict[str, str]]:
    provider = (
        f'{{name="fake", base_url="{base_url}/v1", env_key="FAKE_OPENAI_API_KEY", '
        f'wire_api="responses", supports_websockets={str(client_ws).lower()}}}'
    )
    common = [
        "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox",
        "-C",
        str(work),
        "-m",
        MODELS["codex"],
        "-c",
        'model_provider="fake"',
        "-c",
        f"model_providers.fake={provider}",
        "-c",
        "check_for_update_on_startup=false",
        "-c",
        "analytics.enabled=false",
        "-c",
        'otel.exporter="none"',
        *("--disable", "plugins", "--disable", "remote_plugin", "--disable", "apps"),
        *("--disable", "in_app_updates", "--disable", "browser_use"),
    ]
    exe = str(bins / "codex")
    cmds = [
        [exe, "exec", *common, PROMPTS[0]],
        [exe, "exec", *common, "resume", "--last", PROMPTS[1]],
    ]
    env = {
        "CODEX_HOME": str(home / ".codex"),
        "FAKE_OPENAI_API_KEY": "sk-fake-loopback",
        "RUST_LOG": "warn",
    }
    (home / ".codex").mkdir(parents=True, exist_ok=True)
    return cmds, env


def claude_commands(
    bins: Path, base_url: str, work: Path, home: Path, client_ws: bool
) -> tuple[list[list[str]], dict[str, str]]:
    exe = str(bins / "claude")
    common = [
        "--model",
        MODELS["claude"],
        "--allowedTools",
        "Bash",
        "Read",
        "--output-format",
        "text",
    ]
    cmds = [[exe, "-p", PROMPTS[0], *common], [exe, "-p", "--continue", PROMPTS[1], *common]]
    env = {
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "sk-ant-fake-loopback",
        "ANTHROPIC_MODEL": MODELS["claude"],
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": MODELS["claude"],
        "ANTHROPIC_DEFAULT_SONNET_MODEL": MODELS["claude"],
        "ANTHROPIC_DEFAULT_OPUS_MODEL": MODELS["claude"],
        "ANTHROPIC_SMALL_FAST_MODEL": MODELS["claude"],
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_BUG_COMMAND": "1",
        "CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1",
    }
    return cmds, env


def gemini_commands(
    bins: Path, base_url: str, work: Path, home: Path, client_ws: bool
) -> tuple[list[list[str]], dict[str, str]]:
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
        "model": {"name": MODELS["gemini"]},
    }
    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings, indent=2))
    exe = str(bins / "gemini")
    common = ["-m", MODELS["gemini"], "--approval-mode", "yolo", "--output-format", "text"]
    cmds = [
        [exe, *common, "-p", PROMPTS[0]],
        [exe, *common, "--resume", "latest", "-p", PROMPTS[1]],
    ]
    env = {
        "GEMINI_API_KEY": "fake-gemini-loopback",
        "GOOGLE_GEMINI_BASE_URL": base_url,
        "GEMINI_CLI_NO_RELAUNCH": "true",
        "GEMINI_TELEMETRY_ENABLED": "false",
    }
    return cmds, env


SETUPS = {"codex": codex_commands, "claude": claude_commands, "gemini": gemini_commands}


# --------------------------------------------------------------------------- processes


@contextlib.asynccontextmanager
async def serve_fake(fake: AgentFake) -> AsyncIterator[str]:
    runner = web.AppRunner(fake.app())
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


@contextlib.asynccontextmanager
async def serve_trimgate(
    fake_url: str, windows: dict[str, int], logdir: Path
) -> AsyncIterator[str]:
    cfg = {
        "upstreams": {
            "openai": {"provider": "openai", "base_url": fake_url},
            "anthropic": {"provider": "anthropic", "base_url": fake_url},
            "gemini": {"provider": "gemini", "base_url": fake_url},
        },
        "models": [{"match": m, "context_window": w} for m, w in windows.items()],
        "trimming": {
            "reserve_output_tokens": False,
            "reactive": {"enabled": True, "max_retries": 3},
        },
    }
    path = logdir / "trimgate-agents.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    port = free_port()
    log = (logdir / "trimgate-agents.log").open("ab")
    argv = [
        sys.executable,
        "-m",
        "trimgate",
        "serve",
        "--config",
        str(path),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    proc = subprocess.Popen(  # noqa: ASYNC220 (started once, before any agent runs)
        argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=ROOT
    )
    url = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as s:
            for _ in range(200):
                if proc.poll() is not None:
                    msg = (
                        f"trimgate exited with {proc.returncode}; see {logdir}/trimgate-agents.log"
                    )
                    raise RuntimeError(msg)
                with contextlib.suppress(aiohttp.ClientError):
                    async with s.get(url + "/healthz") as r:
                        if r.status == 200:
                            break
                await asyncio.sleep(0.05)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
        log.close()


async def run_cmd(
    argv: list[str], env: dict[str, str], cwd: Path, log: Path
) -> tuple[int, str, float]:
    t0 = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        *argv,
        env=env,
        cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), TIMEOUT)
        rc = proc.returncode if proc.returncode is not None else -1
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = await proc.communicate()
        rc = -9
    wall = time.perf_counter() - t0
    with log.open("a") as f:
        f.write(f"$ {' '.join(argv)}\n[rc={rc} wall={wall:.2f}s]\n")
        f.write(f"--- stdout\n{out.decode(errors='replace')}\n")
        f.write(f"--- stderr\n{err.decode(errors='replace')}\n\n")
    return rc, out.decode(errors="replace"), wall


# --------------------------------------------------------------------------- one run


@dataclass
class Run:
    agent: str
    target: str  # "direct" | "trimgate"
    fake_ws: bool
    client_ws: bool  # Codex: supports_websockets in its provider entry
    rcs: list[int] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    transports: dict[str, int] = field(default_factory=dict)
    handshakes: list[dict[str, Any]] = field(default_factory=list)
    requests: int = 0
    overflows: int = 0
    first_tokens: int = 0
    last_tokens: int = 0
    max_tokens: int = 0
    window: int | None = None
    trims: int = 0
    trim_events: list[dict[str, Any]] = field(default_factory=list)
    preamble_last: dict[str, bool] = field(default_factory=dict)
    preamble_first: dict[str, bool] = field(default_factory=dict)
    other_paths: list[str] = field(default_factory=list)
    first_prompt_max: int = 0  # the largest request before the second prompt
    egress: list[str] = field(default_factory=list)  # what reached the egress trap
    ws_fallback_s: list[float] = field(default_factory=list)
    walls: list[float] = field(default_factory=list)  # every repetition's wall_s
    failures: int = 0  # repetitions that did not finish both prompts

    @property
    def ok(self) -> bool:
        return (
            all(rc == 0 for rc in self.rcs)
            and len(self.rcs) == len(PROMPTS)
            and all(DONE_MARK in a for a in self.answers)
        )


def main_requests(agent: str, records: list[Record]) -> list[Record]:
    """The agent loop's model requests (with the shell tool), in order."""
    fmt = FMT[agent]
    return [
        r
        for r in records
        if r.fmt == fmt
        and r.transport in ("http", "ws")
        and r.answer.startswith(("tool:", "text", "overflow"))
        and _has_tools(r.body)
    ]


def _has_tools(body: Any) -> bool:
    return isinstance(body, dict) and bool(body.get("tools"))


def preamble(agent: str, body: Any) -> dict[str, bool]:
    """Which parts of the agent's preamble the conversation still holds (the system
    prompt and tool descriptions are left out: they mention the same tags)."""
    if isinstance(body, dict):
        body = body.get("messages") or body.get("contents") or body.get("input") or []
    text = json.dumps(body)
    mark = AGENTS_MD_MARK in text
    if agent == "codex":
        return {"AGENTS.md": mark, "<environment_context>": "<environment_context>" in text}
    if agent == "claude":
        return {"CLAUDE.md": mark, "<system-reminder>": "<system-reminder>" in text}
    return {"GEMINI.md": mark, "session context": "This is the Gemini CLI" in text}


def ws_label(r: Run) -> str:
    if r.agent != "codex":
        return "-"
    if not r.client_ws:
        return "off in Codex"
    return "offered" if r.fake_ws else "refused"


def _suffix(r: Run) -> str:
    return "" if r.agent != "codex" else "-" + ws_label(r).replace(" ", "-")


async def run_agent(
    agent: str,
    target: str,
    fake: AgentFake,
    fake_url: str,
    bins: Path,
    window: int | None,
    logdir: Path,
    trap: EgressTrap,
    client_ws: bool = True,
) -> Run:
    run = Run(agent, target, fake.websocket, client_ws, window=window)
    second_started = float("inf")
    starts: list[float] = []
    egress_before = len(trap.seen)
    fake.records.clear()
    model = MODELS[agent]
    fake.script.windows = {model: window} if window else {}
    base = Path(tempfile.mkdtemp(prefix=f"trimgate-{agent}-", dir=OUT / "tmp"))
    try:
        work = make_workdir(base)
        home = base / "home"
        home.mkdir()
        log = logdir / f"{agent}-{target}{_suffix(run)}.log"
        log.unlink(missing_ok=True)
        async with contextlib.AsyncExitStack() as stack:
            url = fake_url
            if target == "trimgate":
                url = await stack.enter_async_context(
                    serve_trimgate(fake_url, {model: window or 10_000_000}, logdir)
                )
            cmds, extra = SETUPS[agent](bins, url, work, home, client_ws)
            env = _env(home, extra, trap.url)
            for i, argv in enumerate(cmds):
                starts.append(time.time())
                if i == 1:
                    second_started = starts[-1]
                rc, out, wall = await run_cmd(argv, env, work, log)
                run.rcs.append(rc)
                run.answers.append(out.strip()[-300:])
                run.wall_s += wall
                if rc != 0:
                    break
            if target == "trimgate":
                async with aiohttp.ClientSession() as s, s.get(url + "/api/events/history") as r:
                    events = (await r.json())["events"]
                run.trim_events = [
                    {
                        k: e.get(k)
                        for k in (
                            "reason",
                            "dropped_turns",
                            "dropped_messages",
                            "kept_turns",
                            "tokens_before",
                            "tokens_after",
                            "budget",
                        )
                    }
                    for e in (ev.get("data", ev) for ev in events)
                    if e.get("type") == "history_trimmed"
                ]
                run.trims = len(run.trim_events)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    recs = list(fake.records)
    run.egress = sorted(set(trap.seen[egress_before:]))
    # per invocation: from its first WebSocket handshake to its first HTTP model request
    for lo, hi in zip(starts, [*starts[1:], float("inf")], strict=True):
        mine = [r for r in recs if lo <= r.at < hi]
        shake = next((r.at for r in mine if r.transport == "ws-handshake"), None)
        post = next((r.at for r in mine if r.transport == "http" and r.fmt == FMT[agent]), None)
        if shake is not None and post is not None:
            run.ws_fallback_s.append(round(post - shake, 3))
    for rec in recs:
        run.transports[rec.transport] = run.transports.get(rec.transport, 0) + 1
        if rec.transport == "ws-handshake":
            run.handshakes.append({"status": rec.status, "headers": rec.headers})
        if rec.fmt == "other":
            run.other_paths.append(f"{rec.method} {rec.path}")
    mains = main_requests(agent, recs)
    run.requests = len(mains)
    run.overflows = sum(1 for r in recs if r.answer == "overflow")
    if mains:
        run.first_tokens, run.last_tokens = mains[0].tokens, mains[-1].tokens
        run.max_tokens = max(r.tokens for r in mains)
        run.preamble_first = preamble(agent, mains[0].effective or mains[0].body)
        ok = [r for r in mains if r.answer != "overflow"]
        last = (ok or mains)[-1]
        run.preamble_last = preamble(agent, last.effective or last.body)
        run.first_prompt_max = max((r.tokens for r in mains if r.at < second_started), default=0)
    (logdir / f"{agent}-{target}{_suffix(run)}-requests.json").write_text(
        json.dumps([r.as_json() for r in recs], indent=1)[:20_000_000]
    )
    return run


# --------------------------------------------------------------------------- report


def transport_of(run: Run) -> str:
    parts = []
    if run.handshakes:
        codes = sorted({str(h["status"]) for h in run.handshakes})
        parts.append(f"WS upgrade x{len(run.handshakes)} ({'/'.join(codes)})")
    if run.transports.get("ws"):
        parts.append(f"WS frames {run.transports['ws']}")
    if run.transports.get("http"):
        parts.append(f"HTTP {run.transports['http']}")
    return ", ".join(parts)


COLUMNS = (
    "agent",
    "WS (Responses)",
    "target",
    "transport seen by the fake",
    "exit codes",
    "final answer",
    "wall s (median of N)",
    "vs direct",
    "model requests (overflows)",
    "prompt tokens first → max (window)",
    "trims",
    "preamble in last request",
)


def _trims(r: Run) -> str:
    if r.target != "trimgate":
        return "-"
    if not r.trims:
        return "0"
    kinds = sorted({str(e["reason"]) for e in r.trim_events})
    return f"{r.trims} ({'/'.join(kinds)})"


def _answer(r: Run) -> str:
    if not r.failures:
        return f"{DONE_MARK} x{len(r.answers)}, {len(r.walls)}/{len(r.walls)} runs"
    last = r.answers[-1].splitlines()[-1] if r.answers and r.answers[-1] else "(none)"
    return last[:60].replace("|", "/")


def table(runs: list[Run]) -> str:
    direct = {(r.agent, r.fake_ws, r.client_ws): r for r in runs if r.target == "direct"}
    rows = ["| " + " | ".join(COLUMNS) + " |", "|" + " --- |" * len(COLUMNS)]
    for r in runs:
        d = direct.get((r.agent, r.fake_ws, r.client_ws))
        cells = [
            r.agent,
            ws_label(r),
            r.target,
            transport_of(r),
            str(r.rcs),
            _answer(r),
            f"{median(r.walls):.2f} ({len(r.walls)})",
            f"{median(r.walls) - median(d.walls):+.2f}" if d and r is not d else "",
            f"{r.requests} ({r.overflows})",
            f"{r.first_tokens} → {r.max_tokens} ({r.window or '-'})",
            _trims(r),
            ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in r.preamble_last.items()),
        ]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def notes(runs: list[Run]) -> str:
    lines = []
    for r in runs:
        label = f"{r.agent} {r.target}" + (f" (WS {ws_label(r)})" if r.agent == "codex" else "")
        bits = []
        if r.handshakes:
            up = sum(
                1 for h in r.handshakes if h["headers"].get("upgrade", "").lower() == "websocket"
            )
            codes = sorted({h["status"] for h in r.handshakes})
            bits.append(
                f"{len(r.handshakes)} WS handshakes answered {codes}, "
                f"{up} of them still carrying Upgrade: websocket at the fake"
            )
        if r.ws_fallback_s:
            bits.append(f"first WS handshake to first HTTP request: {r.ws_fallback_s} s per prompt")
        if r.other_paths:
            bits.append(f"other paths: {sorted(set(r.other_paths))}")
        bits.append(f"egress trap saw: {r.egress or 'nothing'}")
        bits.append(f"walls: {[round(w, 2) for w in r.walls]}")
        lines.append(f"- {label}: " + "; ".join(bits))
    return "\n".join(lines)


def choose_window(d: Run) -> int | None:
    """Above the first prompt's largest request, below the second's: only the resumed
    session outgrows it, and dropping the first prompt's turn makes room again."""
    if not d.first_prompt_max or d.max_tokens <= d.first_prompt_max:
        return None
    return d.first_prompt_max + (d.max_tokens - d.first_prompt_max) // 3


async def amain(args: argparse.Namespace) -> int:
    OUT.mkdir(exist_ok=True)
    (OUT / "tmp").mkdir(exist_ok=True)
    logdir = OUT / "logs"
    logdir.mkdir(exist_ok=True)
    prefix = Path(args.npm_prefix)
    versions = install(prefix)
    bins = prefix / "node_modules" / ".bin"
    print("agents:", versions, flush=True)
    fake = AgentFake(script=Script(rounds=args.rounds))
    every: list[Run] = []
    merged: dict[tuple[str, bool, bool, str], Run] = {}  # the first repetition, every wall
    windows: dict[tuple[str, bool, bool], int | None] = {}
    async with serve_fake(fake) as fake_url, EgressTrap() as trap:
        for rep in range(args.repeat):
            for agent in args.only:
                # Codex: (fake offers WS, Codex tries WS); the others speak HTTP only
                modes = (
                    [(True, True), (False, True), (False, False)]
                    if agent == "codex"
                    else [(False, True)]
                )
                for fake_ws, client_ws in modes:
                    fake.websocket = fake_ws
                    key = (agent, fake_ws, client_ws)
                    for target in ("direct", "trimgate"):
                        w = windows.get(key) if target == "trimgate" else None
                        r = await run_agent(
                            agent, target, fake, fake_url, bins, w, logdir, trap, client_ws
                        )
                        every.append(r)
                        first = merged.setdefault((*key, target), r)
                        first.walls.append(r.wall_s)
                        first.failures += not r.ok
                        if target == "direct" and key not in windows:
                            windows[key] = args.window or choose_window(r)
                        print(
                            f"[{rep + 1}/{args.repeat}] {agent} {target} WS {ws_label(r)}: "
                            f"rc={r.rcs} wall={r.wall_s:.2f}s trims={r.trims} "
                            f"requests={r.requests} overflows={r.overflows}",
                            flush=True,
                        )
    runs = list(merged.values())
    md = table(runs) + "\n\n" + notes(runs)
    print(md)
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "versions": versions,
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores",
        "python": platform.python_version(),
        "node": subprocess.run(  # noqa: ASYNC221 (after the runs)
            ["node", "--version"], capture_output=True, text=True
        ).stdout.strip(),
        "rounds": args.rounds,
    }
    (OUT / "agents.json").write_text(
        json.dumps({"meta": meta, "runs": [asdict(r) for r in every]}, indent=1)
    )
    (OUT / "agents.md").write_text(md + "\n")
    return 0 if all(r.ok for r in every) else 1


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--only", nargs="+", choices=list(PACKAGES), default=list(PACKAGES))
    ap.add_argument("--rounds", type=int, default=3, help="tool calls the fake asks for per prompt")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each agent and target")
    ap.add_argument(
        "--window",
        type=int,
        default=None,
        help="context window for the trimgate runs (default: from the direct run)",
    )
    ap.add_argument(
        "--npm-prefix", default=str(OUT / "agents-npm"), help="where the CLIs are npm-installed"
    )
    sys.exit(asyncio.run(amain(ap.parse_args())))


if __name__ == "__main__":
    main()
