# The benchmark runner: python -m bench [--quick] [--only SCENARIO ...] [--targets ...]
#
# Starts the fake provider, the bare pass-through and trimgate as separate processes on
# free loopback ports, then measures every scenario IN ONE RUN, INTERLEAVED: short rounds
# round-robin across the targets (the starting target rotates each round), so machine drift
# hits all targets alike. Targets:
#   direct       the load generator talks to the fake provider itself
#   passthrough  bench/passthrough.py in front of the fake (the floor for a Python proxy)
#   trimgate     python -m trimgate serve in front of the fake
#   trimgate_w2  the same with --workers 2 (only in the workers2_* scenarios)
# Proxy CPU is utime+stime from /proc/PID/stat (the whole process tree for --workers 2),
# read around each round; peak RSS is VmHWM, reset per scenario through clear_refs.
# Every loop is bounded in count and in time; the whole run has a deadline.

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import os
import platform
import resource
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import yaml
from aiohttp import ClientSession, ClientTimeout

from bench import payloads
from bench.fake_provider import install_uvloop
from bench.load import ClientKind, Pool, RequestSpec, RoundResult, run_round, summarize

ROOT = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")
NCPU = os.cpu_count() or 1
SMALL_WINDOW = 16_000  # tokens, for models "bench-small-*": medium and large bodies trim
BIG_WINDOW = 10_000_000  # every other "bench-*" model: never trimmed preemptively
REACTIVE_MAX_BYTES = 1_200_000  # the fake rejects a body above this (large bodies are ~2 MB)
TRIM_TAGS = (
    "x-trimgate-trimmed",
    "x-trimgate-reason",
    "x-trimgate-retries",
    "x-trimgate-skipped",
    "x-trimgate-exhausted",
)
ALL_TARGETS = ("direct", "passthrough", "trimgate")


# --------------------------------------------------------------------------- /proc


def proc_cpu_s(pid: int) -> float:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = raw[raw.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime


def descendants(pid: int) -> list[int]:
    """pid and every live process below it (scan of /proc, bounded by its size)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(raw[raw.rindex(")") + 2 :].split()[1])
        parents.setdefault(ppid, []).append(int(entry))
    out: list[int] = []
    todo = [pid]
    while todo and len(out) < 1000:
        p = todo.pop()
        out.append(p)
        todo += parents.get(p, [])
    return out


def status_kb(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def reset_hwm(pid: int) -> None:
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/clear_refs").write_text("5")


def machine_cpu_s() -> tuple[float, float]:
    """(busy, steal) seconds summed over all CPUs, from the first line of /proc/stat."""
    try:
        first = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return 0.0, 0.0
    v = [int(x) for x in first[1:9]]
    busy = v[0] + v[1] + v[2] + v[5] + v[6]  # user nice system irq softirq
    return busy / CLK_TCK, v[7] / CLK_TCK


def listen_drops() -> int:
    """TcpExt ListenDrops: connection attempts a full accept backlog turned away (any port)."""
    try:
        lines = Path("/proc/net/netstat").read_text().splitlines()
    except OSError:
        return 0
    for names, values in zip(lines[::2], lines[1::2], strict=False):
        if names.startswith("TcpExt:"):
            table = dict(zip(names.split()[1:], values.split()[1:], strict=False))
            return int(table.get("ListenDrops", 0))
    return 0


def self_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


# --------------------------------------------------------------------------- processes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Proc:
    name: str
    argv: list[str]
    port: int
    log: Path
    health: str | None = None  # HTTP path polled for 200, else a TCP connect
    popen: subprocess.Popen[bytes] | None = None
    cwd: Path = ROOT

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("wb") as fh:
            self.popen = subprocess.Popen(
                self.argv,
                cwd=self.cwd,
                stdin=subprocess.DEVNULL,
                stdout=fh,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: workers stop with it
            )

    def tail(self, n: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    async def wait_ready(self, within: float = 20.0) -> None:
        assert self.popen is not None
        deadline = time.monotonic() + within
        async with ClientSession(timeout=ClientTimeout(total=1.0)) as http:
            for _ in range(int(within / 0.05) + 1):
                if self.popen.poll() is not None:
                    raise RuntimeError(
                        f"{self.name} exited with {self.popen.returncode}:\n{self.tail()}"
                    )
                if time.monotonic() > deadline:
                    break
                try:
                    if self.health is None:
                        _, w = await asyncio.open_connection("127.0.0.1", self.port)
                        w.close()
                        return
                    async with http.get(self.base_url + self.health) as r:
                        if r.status == 200:
                            return
                except (TimeoutError, OSError):
                    pass
                await asyncio.sleep(0.05)
        raise RuntimeError(f"{self.name} not ready after {within:.0f}s:\n{self.tail()}")

    def cpu_s(self) -> float:
        return sum(proc_cpu_s(p) for p in descendants(self.pid))

    def rss_kb(self, key: str = "VmRSS") -> int:
        return sum(status_kb(p, key) for p in descendants(self.pid))

    def reset_hwm(self) -> None:
        for p in descendants(self.pid):
            reset_hwm(p)

    def stop(self) -> None:
        if self.popen is None or self.popen.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGTERM)  # the group this runner created
        try:
            self.popen.wait(timeout=8)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout=5)


def trimgate_config(fake_url: str) -> dict[str, Any]:
    return {
        "upstreams": {
            "openai": {"provider": "openai", "base_url": fake_url},
            "anthropic": {"provider": "anthropic", "base_url": fake_url},
        },
        "models": [
            {"match": "bench-small-*", "context_window": SMALL_WINDOW},
            {"match": "bench-*", "context_window": BIG_WINDOW},
        ],
        # TRIMGATE_BENCH_MODE=off measures the shell alone (routing, headers, relay)
        "trimming": {
            "mode": os.environ.get("TRIMGATE_BENCH_MODE", "enforce"),
            "reactive": {"enabled": True, "max_retries": 3},
        },
    }


# --------------------------------------------------------------------------- scenarios


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    fmt: payloads.Format = "openai"
    preset: str = "small"
    model: str = "bench-big-openai"
    stream: bool = False
    concurrency: int = 1
    chunks: int = 16
    delay_ms: int = 0
    ttft_ms: int = 0  # the fake waits this long before answering (a model thinking)
    weight: float = 1.0  # round length multiplier
    trimgate_headers: dict[str, str] = field(default_factory=dict)
    extra_targets: tuple[str, ...] = ()
    open_streams: int = 0  # >0: one long round of this many concurrent streams per target
    note: str = ""


SCENARIOS: tuple[Scenario, ...] = (
    # First, on fresh processes: later scenarios leave freed-but-retained arena memory in
    # the proxies' RSS, which would hide what 500 open streams cost.
    Scenario(
        "open_streams_500",
        "500 concurrent open streams (long delays), RSS and errors",
        stream=True,
        open_streams=500,
        delay_ms=250,
    ),
    Scenario("small_json_c1", "small (~2.5 KB) JSON, concurrency 1", concurrency=1),
    Scenario("small_json_c32", "small JSON, concurrency 32", concurrency=32),
    Scenario(
        "small_stream_c1",
        "small SSE stream (16 chunks, 1 ms apart), concurrency 1",
        stream=True,
        concurrency=1,
        delay_ms=1,
        weight=1.5,
    ),
    Scenario(
        "small_stream_c32",
        "small SSE stream (16 chunks, 1 ms apart), concurrency 32",
        stream=True,
        concurrency=32,
        delay_ms=1,
    ),
    Scenario(
        "medium_under_c8",
        "medium (~210 KB, 100 turns) under budget",
        preset="medium",
        concurrency=8,
    ),
    Scenario(
        "medium_over_c8",
        f"medium over budget: preemptive trim to {SMALL_WINDOW} tokens",
        preset="medium",
        model="bench-small-openai",
        concurrency=8,
        note="direct/passthrough forward the full body",
    ),
    Scenario(
        "large_under_c4",
        "large (~2 MB, 1,000 turns) under budget",
        preset="large",
        concurrency=4,
        weight=1.5,
    ),
    Scenario(
        "large_over_c1",
        "large over budget, one at a time: the latency a trim adds, without queueing",
        preset="large",
        model="bench-small-openai",
        concurrency=1,
        weight=1.5,
        note="direct/passthrough forward the full body",
    ),
    Scenario(
        "large_over_c4",
        f"large over budget: preemptive trim to {SMALL_WINDOW} tokens",
        preset="large",
        model="bench-small-openai",
        concurrency=4,
        weight=1.5,
        note="direct/passthrough forward the full body",
    ),
    Scenario(
        "large_over_slow_c16",
        "large over budget, 16 at once, the upstream answering after 400 ms: memory in flight",
        preset="large",
        model="bench-small-openai",
        concurrency=16,
        ttft_ms=400,
        weight=2.0,
        note="direct/passthrough forward the full body",
    ),
    Scenario(
        "large_reactive_c4",
        f"large, reactive: the fake rejects bodies > {REACTIVE_MAX_BYTES} B on the first try",
        preset="large",
        model="bench-reactive-openai",
        concurrency=4,
        weight=1.5,
        trimgate_headers={"x-bench-max-bytes": str(REACTIVE_MAX_BYTES)},
        note="only trimgate gets the limit; direct/passthrough send the body the fake accepts",
    ),
    Scenario(
        "anthropic_stream_c32",
        "Anthropic small SSE stream (16 chunks, 1 ms apart), concurrency 32",
        fmt="anthropic",
        model="bench-big-anthropic",
        stream=True,
        concurrency=32,
        delay_ms=1,
    ),
    Scenario(
        "anthropic_medium_over_stream_c8",
        "Anthropic medium over budget, streamed: preemptive trim",
        fmt="anthropic",
        preset="medium",
        model="bench-small-anthropic",
        stream=True,
        concurrency=8,
        delay_ms=1,
        note="direct/passthrough forward the full body",
    ),
    Scenario(
        "workers2_small_json_c32",
        "small JSON, concurrency 32, trimgate --workers 2 alongside --workers 1",
        concurrency=32,
        extra_targets=("trimgate_w2",),
    ),
    Scenario(
        "workers2_medium_over_c8",
        "medium over budget (trimgate's own CPU the bottleneck), --workers 2 alongside 1",
        preset="medium",
        model="bench-small-openai",
        concurrency=8,
        extra_targets=("trimgate_w2",),
        note="direct/passthrough forward the full body",
    ),
)


@dataclass(frozen=True)
class Mode:
    rounds: int
    round_s: float
    warmup_s: float
    max_per_round: int
    stream_chunks: int  # chunk count in the open-streams scenario
    deadline_s: float


FULL = Mode(
    rounds=5, round_s=1.5, warmup_s=0.5, max_per_round=50_000, stream_chunks=40, deadline_s=570
)
QUICK = Mode(
    rounds=3, round_s=0.5, warmup_s=0.2, max_per_round=20_000, stream_chunks=12, deadline_s=110
)


@functools.lru_cache(maxsize=64)
def body(fmt: payloads.Format, preset: str, seed: int, model: str, stream: bool) -> bytes:
    return payloads.make(fmt, preset, seed, model=model, stream=stream)


def request_spec(sc: Scenario, target: str, chunks: int) -> RequestSpec:
    bodies = [body(sc.fmt, sc.preset, seed, sc.model, sc.stream) for seed in range(3)]
    headers = {"x-bench-chunks": str(chunks), "x-bench-delay-ms": str(sc.delay_ms)}
    if sc.ttft_ms:
        headers["x-bench-ttft-ms"] = str(sc.ttft_ms)
    if sc.fmt == "openai":
        path, end = "/v1/chat/completions", b"data: [DONE]"
        headers["Authorization"] = "Bearer sk-bench-not-a-key"
    else:
        path, end = "/v1/messages", b'{"type":"message_stop"}'
        headers["x-api-key"] = "sk-ant-bench-not-a-key"
        headers["anthropic-version"] = "2023-06-01"
    if target.startswith("trimgate"):
        headers.update(sc.trimgate_headers)
    return RequestSpec(
        path=path,
        bodies=bodies,
        headers=headers,
        stream=sc.stream,
        end_marker=end if sc.stream else None,
        record_headers=TRIM_TAGS,
    )


# --------------------------------------------------------------------------- measuring


@dataclass
class Acc:
    result: RoundResult = field(default_factory=RoundResult)
    proxy_cpu: float = 0.0
    fake_cpu: float = 0.0
    gen_cpu: float = 0.0
    box_busy: float = 0.0  # every process on the machine, ours included
    steal: float = 0.0
    upstream_requests: int = 0
    upstream_bytes: int = 0
    overflows: int = 0
    rss_idle_kb: int = 0
    rss_max_kb: int = 0
    hwm_kb: int = 0
    fake_peak_open: int = 0
    listen_drops: int = 0
    processes: int = 0


class Bench:
    def __init__(self, fake: Proc, proxies: dict[str, Proc], mode: Mode, client: ClientKind):
        self.fake = fake
        self.proxies = proxies
        self.mode = mode
        self.client = client
        self.http = ClientSession(timeout=ClientTimeout(total=5))

    def url(self, target: str) -> str:
        return self.fake.base_url if target == "direct" else self.proxies[target].base_url

    async def fake_stats(self) -> dict[str, int]:
        async with self.http.get(self.fake.base_url + "/bench/stats") as r:
            data: dict[str, int] = orjson.loads(await r.read())
            return data

    async def measured(
        self, target: str, pool: Pool, spec: RequestSpec, acc: Acc, **kw: Any
    ) -> RoundResult:
        proxy = self.proxies.get(target)
        s0 = await self.fake_stats()
        p0 = proxy.cpu_s() if proxy else 0.0
        f0, g0 = self.fake.cpu_s(), self_cpu_s()
        b0, st0 = machine_cpu_s()
        d0 = listen_drops()
        r = await run_round(pool, spec, **kw)
        acc.listen_drops += listen_drops() - d0
        b1, st1 = machine_cpu_s()
        acc.box_busy += b1 - b0
        acc.steal += st1 - st0
        acc.gen_cpu += self_cpu_s() - g0
        acc.fake_cpu += self.fake.cpu_s() - f0
        if proxy:
            acc.processes = max(acc.processes, len(descendants(proxy.pid)))
            acc.proxy_cpu += proxy.cpu_s() - p0
            acc.rss_max_kb = max(acc.rss_max_kb, proxy.rss_kb())
        s1 = await self.fake_stats()
        acc.upstream_requests += s1["requests"] - s0["requests"]
        acc.upstream_bytes += s1["bytes_in"] - s0["bytes_in"]
        acc.overflows += s1["overflows"] - s0["overflows"]
        acc.result.merge(r)
        return r

    async def run_rounds(self, sc: Scenario, targets: Sequence[str]) -> dict[str, Acc]:
        m = self.mode
        specs = {t: request_spec(sc, t, sc.chunks) for t in targets}
        pools = {t: Pool(self.url(t), sc.concurrency, self.client) for t in targets}
        accs = {t: Acc() for t in targets}
        try:
            for t in targets:
                if t in self.proxies:
                    self.proxies[t].reset_hwm()
                    accs[t].rss_idle_kb = self.proxies[t].rss_kb()
                await run_round(  # warm-up: connections, caches, calibration; not recorded
                    pools[t],
                    specs[t],
                    concurrency=sc.concurrency,
                    max_requests=max(20, 4 * sc.concurrency),
                    max_seconds=m.warmup_s,
                )
            for i in range(m.rounds):
                order = list(targets[i % len(targets) :]) + list(targets[: i % len(targets)])
                for t in order:
                    await self.measured(
                        t,
                        pools[t],
                        specs[t],
                        accs[t],
                        concurrency=sc.concurrency,
                        max_requests=m.max_per_round,
                        max_seconds=m.round_s * sc.weight,
                    )
            for t in targets:
                if t in self.proxies:
                    accs[t].hwm_kb = self.proxies[t].rss_kb("VmHWM")
        finally:
            for p in pools.values():
                await p.close()
        return accs

    async def run_open_streams(self, sc: Scenario, targets: Sequence[str]) -> dict[str, Acc]:
        chunks = self.mode.stream_chunks
        duration = chunks * sc.delay_ms / 1000
        accs = {t: Acc() for t in targets}
        for t in targets:
            spec = request_spec(sc, t, chunks)
            pool = Pool(self.url(t), sc.open_streams, self.client)
            acc = accs[t]
            proxy = self.proxies.get(t)
            try:
                warm = dataclasses.replace(spec, headers={**spec.headers, "x-bench-delay-ms": "0"})
                await run_round(pool, warm, concurrency=10, max_requests=20, max_seconds=1.0)
                if proxy:
                    proxy.reset_hwm()
                    acc.rss_idle_kb = proxy.rss_kb()
                task = asyncio.create_task(
                    self.measured(
                        t,
                        pool,
                        spec,
                        acc,
                        concurrency=sc.open_streams,
                        max_requests=sc.open_streams,
                        max_seconds=duration + 10,
                        request_timeout=duration + 30,
                    )
                )
                for _ in range(int((duration + 40) / 0.25)):  # sample while streams are open
                    if task.done():
                        break
                    await asyncio.sleep(0.25)
                    with contextlib.suppress(Exception):
                        acc.fake_peak_open = max(
                            acc.fake_peak_open, (await self.fake_stats())["open_streams"]
                        )
                    if proxy:
                        acc.rss_max_kb = max(acc.rss_max_kb, proxy.rss_kb())
                await task
                if proxy:
                    acc.hwm_kb = proxy.rss_kb("VmHWM")
            finally:
                await pool.close()
        return accs

    async def close(self) -> None:
        await self.http.close()


def _r(v: float | None, nd: int = 2) -> float | None:
    return None if v is None else round(v, nd)


def report(sc: Scenario, accs: dict[str, Acc]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for t, a in accs.items():
        s = summarize(a.result)
        n = max(1, s.requests)
        wall = a.result.wall
        row: dict[str, Any] = {
            **s.__dict__,
            "errors": dict(a.result.errors),
            "statuses": {str(k): v for k, v in a.result.statuses.items()},
            "tags": dict(sorted(a.result.tags.items())),
            "proxy_cpu_s": _r(a.proxy_cpu, 3) if t != "direct" else None,
            "proxy_cpu_ms_per_1k": _r(a.proxy_cpu * 1e6 / n, 1) if t != "direct" else None,
            "fake_cpu_ms_per_1k": _r(a.fake_cpu * 1e6 / n, 1),
            "loadgen_cpu_ms_per_1k": _r(a.gen_cpu * 1e6 / n, 1),
            "bench_cpu_util": _r((a.proxy_cpu + a.fake_cpu + a.gen_cpu) / (wall * NCPU), 3)
            if wall
            else None,
            # CPU the rest of the machine used meanwhile: noise the benchmark did not cause
            "other_cpu_util": _r(
                max(0.0, a.box_busy - a.proxy_cpu - a.fake_cpu - a.gen_cpu) / (wall * NCPU), 3
            )
            if wall
            else None,
            "steal_util": _r(a.steal / (wall * NCPU), 3) if wall else None,
            "rss_idle_mb": _r(a.rss_idle_kb / 1024, 1) if t != "direct" else None,
            "rss_max_sampled_mb": _r(a.rss_max_kb / 1024, 1) if t != "direct" else None,
            "rss_peak_mb": _r(a.hwm_kb / 1024, 1) if t != "direct" else None,
            "upstream_requests_per_req": _r(a.upstream_requests / n, 3),
            "upstream_kb_per_req": _r(a.upstream_bytes / 1024 / n, 1),
            "upstream_overflows": a.overflows,
            "listen_drops": a.listen_drops,
            "processes": a.processes if t != "direct" else None,
        }
        if sc.open_streams:
            row["fake_peak_open_streams"] = a.fake_peak_open
            if t != "direct":
                row["rss_kb_per_stream"] = _r((a.rss_max_kb - a.rss_idle_kb) / sc.open_streams, 1)
        out[t] = row
    d = out.get("direct")
    pt = out.get("passthrough")
    for t, row in out.items():
        if d and t != "direct":
            row["added_p50_ms_vs_direct"] = _diff(row["p50_ms"], d["p50_ms"])
            row["added_p99_ms_vs_direct"] = _diff(row["p99_ms"], d["p99_ms"])
            row["added_ttfb_p50_ms_vs_direct"] = _diff(row["ttfb_p50_ms"], d["ttfb_p50_ms"])
        if pt and t not in ("direct", "passthrough"):
            row["vs_passthrough"] = {
                "throughput_ratio": _ratio(row["rps"], pt["rps"]),
                "cpu_ratio": _ratio(row["proxy_cpu_ms_per_1k"], pt["proxy_cpu_ms_per_1k"]),
                "added_p50_ms": _diff(row["p50_ms"], pt["p50_ms"]),
                "added_p99_ms": _diff(row["p99_ms"], pt["p99_ms"]),
                "added_ttfb_p50_ms": _diff(row["ttfb_p50_ms"], pt["ttfb_p50_ms"]),
                "added_ttfb_p99_ms": _diff(row["ttfb_p99_ms"], pt["ttfb_p99_ms"]),
            }
    return {
        "name": sc.name,
        "title": sc.title,
        "note": sc.note,
        "concurrency": sc.open_streams or sc.concurrency,
        "stream": sc.stream,
        "format": sc.fmt,
        "preset": sc.preset,
        "model": sc.model,
        "body_bytes": len(body(sc.fmt, sc.preset, 0, sc.model, sc.stream)),
        "targets": out,
    }


def _diff(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else round(a - b, 3)


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else round(a / b, 3)


# --------------------------------------------------------------------------- table


def _f(v: Any, nd: int = 1) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.{nd}f}"
    return str(v)


def _tags(row: dict[str, Any]) -> str:
    tags: dict[str, int] = row["tags"]
    out = []
    trimmed = tags.get("x-trimgate-trimmed=true", 0)
    if trimmed or "x-trimgate-trimmed=false" in tags:
        out.append(f"trimmed {trimmed}/{row['requests']}")
    for k, v in tags.items():
        shown = k.startswith(("x-trimgate-reason", "x-trimgate-skipped", "x-trimgate-exhausted"))
        retried = k.startswith("x-trimgate-retries=") and k != "x-trimgate-retries=0"
        if shown or retried:
            out.append(f"{k.removeprefix('x-trimgate-')}:{v}")
    return ", ".join(out)


def _util(row: dict[str, Any]) -> str:
    ours, other, steal = row["bench_cpu_util"], row["other_cpu_util"], row["steal_util"]
    if ours is None:
        return "–"
    out = f"{ours * 100:.0f}%"
    if other and other >= 0.02:
        out += f" +{other * 100:.0f}% other"
    if steal and steal >= 0.02:
        out += f" +{steal * 100:.0f}% steal"
    return out


def markdown(results: dict[str, Any]) -> str:
    lines = [
        "| scenario | target | ok / err | req/s | p50 ms | p99 ms | +p50 / +p99 vs direct ms "
        "| TTFB p50 / p99 ms | proxy CPU ms /1k req | peak RSS MB (at start) "
        "| throughput vs passthrough × | CPU vs passthrough × | +TTFB p50 vs passthrough ms "
        f"| upstream calls, KB /req | CPU of {NCPU} cores used | notes |",
        "|" + "---|" * 16,
    ]
    for sc in results["scenarios"]:
        for t, row in sc["targets"].items():
            vs = row.get("vs_passthrough", {})
            notes = _tags(row)
            if row["errors"]:
                notes = "; ".join(
                    filter(None, [notes, ", ".join(f"{k}×{v}" for k, v in row["errors"].items())])
                )
            if row["listen_drops"]:
                extra = f"{row['listen_drops']} SYNs dropped by a full accept backlog"
                notes = "; ".join(filter(None, [notes, extra]))
            if t.endswith("_w2") and row["processes"] is not None:
                notes = "; ".join(filter(None, [notes, f"{row['processes']} process(es)"]))
            if "fake_peak_open_streams" in row:
                extra = f"{row['fake_peak_open_streams']} open at the fake"
                if row.get("rss_kb_per_stream") is not None:
                    extra += f", {row['rss_kb_per_stream']} KB RSS/stream"
                notes = "; ".join(filter(None, [notes, extra]))
            lines.append(
                "| "
                + " | ".join(
                    [
                        sc["name"],
                        t,
                        f"{row['ok']} / {row['failed']}",
                        _f(row["rps"], 0),
                        _f(row["p50_ms"], 2),
                        _f(row["p99_ms"], 2),
                        f"{_f(row.get('added_p50_ms_vs_direct'), 2)} / "
                        f"{_f(row.get('added_p99_ms_vs_direct'), 2)}",
                        f"{_f(row['ttfb_p50_ms'], 2)} / {_f(row['ttfb_p99_ms'], 2)}",
                        _f(row["proxy_cpu_ms_per_1k"], 0),
                        f"{_f(row['rss_peak_mb'], 1)} ({_f(row['rss_idle_mb'], 0)})"
                        if row["rss_peak_mb"] is not None
                        else "–",
                        _f(vs.get("throughput_ratio"), 2),
                        _f(vs.get("cpu_ratio"), 2),
                        _f(vs.get("added_ttfb_p50_ms"), 2),
                        f"{_f(row['upstream_requests_per_req'], 2)}, "
                        f"{_f(row['upstream_kb_per_req'], 0)}",
                        _util(row),
                        notes,
                    ]
                )
                + " |"
            )
    return "\n".join(lines)


# --------------------------------------------------------------------------- main


def _meta(args: argparse.Namespace, mode: Mode) -> dict[str, Any]:
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "quick": args.quick,
        "mode": mode.__dict__,
        "client": args.client,
        "cpus": NCPU,
        "cpu_model": model,
        "loadavg_start": os.getloadavg(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "clk_tck": CLK_TCK,
        "small_window_tokens": SMALL_WINDOW,
        "reactive_max_bytes": REACTIVE_MAX_BYTES,
    }


async def amain(args: argparse.Namespace) -> dict[str, Any] | None:
    t_start = time.monotonic()
    mode = QUICK if args.quick else FULL
    if args.rounds:
        mode = Mode(**{**mode.__dict__, "rounds": args.rounds})
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    unknown = set(targets) - set(ALL_TARGETS)
    if unknown:
        print(f"unknown targets: {sorted(unknown)}", file=sys.stderr)
        return None
    scenarios = [s for s in SCENARIOS if not args.only or s.name in args.only]
    missing = set(args.only or ()) - {s.name for s in SCENARIOS}
    if missing:
        print(f"unknown scenarios: {sorted(missing)}", file=sys.stderr)
        return None
    out_path = Path(args.out)
    logs = out_path.parent / "logs"
    py = sys.executable

    port = free_port()
    fake = Proc(
        "fake", [py, "-m", "bench.fake_provider", "--port", str(port)], port, logs / "fake.log"
    )
    procs: list[Proc] = [fake]
    proxies: dict[str, Proc] = {}
    if "passthrough" in targets:
        port = free_port()
        proxies["passthrough"] = Proc(
            "passthrough",
            [py, "-m", "bench.passthrough", "--port", str(port), "--upstream", fake.base_url],
            port,
            logs / "passthrough.log",
        )
    if "trimgate" in targets:
        cfg = out_path.parent / "trimgate-bench.yaml"
        cfg.parent.mkdir(parents=True, exist_ok=True)
        cfg.write_text(yaml.safe_dump(trimgate_config(fake.base_url), sort_keys=False))
        need_w2 = any("trimgate_w2" in s.extra_targets for s in scenarios)
        for name, workers in (("trimgate", 1), ("trimgate_w2", 2)):
            if name == "trimgate_w2" and not need_w2:
                continue
            port = free_port()
            argv = [
                *args.trimgate_cmd.split(),
                "serve",
                "--config",
                str(cfg),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ]
            if workers > 1:
                argv += ["--workers", str(workers)]
            proxies[name] = Proc(name, argv, port, logs / f"{name}.log", health="/healthz")
    procs += proxies.values()

    results: dict[str, Any] = {"meta": _meta(args, mode), "scenarios": []}
    results["meta"]["targets"] = [t for t in ("direct", *proxies) if t != "direct" or t in targets]
    bench: Bench | None = None
    try:
        for p in procs:
            p.start()
        for p in procs:
            await p.wait_ready()
        bench = Bench(fake, proxies, mode, args.client)
        for sc in scenarios:
            elapsed = time.monotonic() - t_start
            if elapsed > mode.deadline_s:
                print(f"deadline reached after {elapsed:.0f}s: skipping {sc.name}", flush=True)
                results["scenarios"].append({"name": sc.name, "skipped": "run deadline"})
                continue
            st = [t for t in ("direct", *proxies) if t in targets or t in sc.extra_targets]
            print(f"[{elapsed:5.1f}s] {sc.name}: {', '.join(st)}", flush=True)
            if sc.open_streams:
                accs = await bench.run_open_streams(sc, st)
            else:
                accs = await bench.run_rounds(sc, st)
            results["scenarios"].append(report(sc, accs))
    finally:
        if bench is not None:
            await bench.close()
        for p in reversed(procs):
            p.stop()
    results["meta"]["duration_s"] = round(time.monotonic() - t_start, 1)
    return results


def write_results(results: dict[str, Any], out_path: Path) -> int:
    """Writes JSON and markdown, prints the table; returns the count of failed requests."""
    done = [s for s in results["scenarios"] if "targets" in s]
    table = markdown({"scenarios": done})
    m = results["meta"]
    head = (
        f"Run {m['started']}, {'quick' if m['quick'] else 'full'} mode "
        f"({m['mode']['rounds']} interleaved rounds of {m['mode']['round_s']} s per target), "
        f"{m['cpus']} CPUs ({m['cpu_model']}), load average at start "
        f"{m['loadavg_start'][0]:.2f}, client {m['client']}, {m['duration_s']} s.\n\n"
        "Latency and TTFB in ms over successful requests; proxy CPU = utime+stime of the "
        "proxy process tree per 1,000 requests; peak RSS = VmHWM during the scenario; "
        "× passthrough = trimgate figure divided by the pass-through figure; upstream = what "
        "the fake provider received per client request; CPU used = load generator + fake + "
        "proxy, plus CPU used by unrelated processes ('other') and hypervisor steal.\n\n"
    )
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    out_path.with_suffix(".md").write_text(head + table + "\n")
    print()
    print(head + table)
    print(
        f"\n{len(done)} scenarios in {results['meta']['duration_s']}s on {NCPU} CPUs; "
        f"wrote {out_path} and {out_path.with_suffix('.md')}"
    )
    return sum(r["failed"] for s in done for r in s["targets"].values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="trimgate benchmark: direct vs bare pass-through vs trimgate, interleaved",
    )
    parser.add_argument("--quick", action="store_true", help="short rounds, under 2 minutes")
    parser.add_argument("--only", nargs="+", metavar="SCENARIO", help="run these scenarios")
    parser.add_argument(
        "--targets",
        default=",".join(ALL_TARGETS),
        help="comma list from direct,passthrough,trimgate (default all)",
    )
    parser.add_argument("--out", default=str(ROOT / "bench" / "out" / "results.json"))
    parser.add_argument(
        "--client",
        choices=("raw", "aiohttp"),
        default="raw",
        help="load generator client (default: minimal HTTP/1.1 client)",
    )
    parser.add_argument("--rounds", type=int, default=0, help="override the round count")
    parser.add_argument(
        "--trimgate-cmd",
        default=f"{sys.executable} -m trimgate",
        help="command that starts trimgate (serve arguments are appended)",
    )
    parser.add_argument("--strict", action="store_true", help="exit 1 if any request failed")
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    args = parser.parse_args(argv)
    if args.list:
        for s in SCENARIOS:
            print(f"{s.name:34} {s.title}")
        return 0
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 8192 if hard == resource.RLIM_INFINITY else min(hard, 8192)
    if soft < want:  # 500 open streams through a proxy need >1,000 descriptors
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    install_uvloop()
    try:
        results = asyncio.run(amain(args))
    except RuntimeError as exc:  # a process did not come up; its log tail is in the message
        print(f"bench: {exc}", file=sys.stderr)
        print("bench: without trimgate, run with --targets direct,passthrough", file=sys.stderr)
        return 2
    if results is None:
        return 2
    failed = write_results(results, Path(args.out))
    return 1 if failed and args.strict else 0


if __name__ == "__main__":
    raise SystemExit(main())
