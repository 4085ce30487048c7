# The soak: trimgate under a steady open-loop load with faults, for N minutes.
#
#   python -m bench.soak --minutes 10 --rate 40
#
# trimgate runs as a subprocess (`python -m trimgate serve`) in front of the benchmark's
# fake provider (bench/fake_provider.py, in this process, on a free loopback port) wrapped
# in a fault layer steered by two request headers:
#
#   x-soak-id: N          counts the upstream calls each client request caused
#   x-soak-fault: kind    reset (close before the head), reset-mid (close a stream after
#                         its first event), 5xx (a 500 / 502 / 503 in OpenAI's envelope),
#                         suspect (a 400 "Text too long", a wording no table lists, for a
#                         body over REACTIVE_MAX_BYTES: probed, then learned), lookalike (a
#                         400 whose words suspect an overflow whatever is sent: refuted)
#
# The load generator starts one request every 1/rate seconds (open loop: a slow trimgate
# does not slow the offered load; at most --max-in-flight at once, the excess counted as
# "shed") from a fixed mix: small JSON and streams (OpenAI, Anthropic), preemptive trims
# (some of dense histories, examined in the worker process),
# reactive overflows, probed ones (fixed, or refuted and remembered), resets, 5xx answers
# and clients that leave mid-stream. Every request has an expected outcome and an expected
# number of upstream calls (1; 2..1+max_retries for a reactive overflow; 1 or 3 for a
# refuted probe, 3 the first time a wording is met); anything else is counted as
# unexpected. Every 10 s trimgate's RSS (VmRSS) and open descriptors (/proc/PID/fd) are
# sampled (asyncio tasks are not exposed by trimgate, so they are not sampled here; the
# quick tests in tests/proxy/test_faults.py check them in process).
#
# Verdict "flat": the mean RSS of the last third of the samples is within 10% of the
# second third's, the descriptors of the last third peak at most 20 above the second
# third's, and no request had an unexpected outcome or upstream call count.
# Bounded: the run ends after --minutes (plus at most 30 s for requests in flight), and
# at most minutes * 60 * rate requests are started. Loopback only.

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import yaml
from aiohttp import ClientError, ClientSession, ClientTimeout, TCPConnector, web

from bench import payloads
from bench.__main__ import BIG_WINDOW, SMALL_WINDOW, Proc, free_port, status_kb
from bench.fake_provider import make_app

SAMPLE_EVERY = 10.0  # seconds between two samples of trimgate's RSS and descriptors
MAX_RETRIES = 3
REACTIVE_MAX_BYTES = 150_000  # the fake refuses a body above this: medium bodies overflow
REQUEST_TIMEOUT = 30.0

# kind -> share of the offered load
MIX: dict[str, float] = {
    "openai_json": 0.23,
    "dense": 0.03,  # histories of tiny messages: examined in the worker process
    "openai_stream": 0.15,
    "anthropic_json": 0.10,
    "anthropic_stream": 0.07,
    "trim": 0.10,
    "reactive": 0.06,
    "probe": 0.02,  # an unlisted wording: probed until learned, then a reactive overflow
    "probe_refuted": 0.02,  # a look-alike: probed once, then remembered as refuted
    "reset": 0.05,
    "reset_mid": 0.05,
    "provider_5xx": 0.07,
    "client_leaves": 0.05,
}


@dataclass
class Faults:
    calls: Counter[str] = field(default_factory=Counter)  # x-soak-id -> upstream calls


FAULTS = web.AppKey("soak_faults", Faults)


@web.middleware
async def fault_layer(request: web.Request, handler: Any) -> web.StreamResponse:
    soak_id = request.headers.get("x-soak-id")
    if soak_id is not None:
        request.app[FAULTS].calls[soak_id] += 1
    fault = request.headers.get("x-soak-fault")
    if fault == "reset":
        await request.read()
        assert request.transport is not None
        request.transport.close()
        return web.Response(status=500)  # never sent: the connection is gone
    if fault == "reset-mid":
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        chunk = {
            "id": "chatcmpl-soak",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "bench-big-openai",
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": "par"}}],
        }
        await resp.write(b"data: " + orjson.dumps(chunk) + b"\n\n")
        await asyncio.sleep(0.01)
        assert request.transport is not None
        request.transport.close()
        return resp
    if fault == "suspect":
        sent = await request.read()  # read once: aiohttp keeps it for the handler
        if len(sent) > REACTIVE_MAX_BYTES:
            return web.json_response({"error": {"message": "Text too long"}}, status=400)
    if fault == "lookalike":
        await request.read()
        message = "message text exceeds what we accept"
        return web.json_response({"error": {"message": message}}, status=400)
    if fault == "5xx":
        await request.read()
        status = random.choice((500, 502, 503))
        body = {"error": {"message": "The server had an error", "type": "server_error"}}
        return web.json_response(body, status=status)
    result: web.StreamResponse = await handler(request)
    return result


@dataclass
class Plan:
    path: str
    body: bytes
    headers: dict[str, str]
    stream: bool
    expect: str  # the outcome this kind must have
    calls: tuple[int, int]  # the upstream calls it may cause, inclusive


def dense_openai(turns: int) -> bytes:
    """A history of ``turns`` one-word exchanges: over 10,000 JSON objects, so examined in
    the worker process, and over the small model's window, so trimmed."""
    messages: list[dict[str, str]] = [{"role": "system", "content": "Be brief."}]
    for t in range(turns):
        messages += [{"role": "user", "content": f"q{t}"}, {"role": "assistant", "content": "a"}]
    messages.append({"role": "user", "content": "last"})
    return orjson.dumps({"model": "bench-small-openai", "messages": messages})


def plans() -> dict[str, list[Plan]]:
    o, a = "/v1/chat/completions", "/v1/messages"
    small_o = [payloads.small_openai(s) for s in range(4)]
    small_os = [payloads.small_openai(s, stream=True) for s in range(4)]
    small_a = [payloads.small_anthropic(s) for s in range(4)]
    small_as = [payloads.small_anthropic(s, stream=True) for s in range(4)]
    medium_small = [payloads.medium_openai(s, model="bench-small-openai") for s in range(2)]
    medium_big = [payloads.medium_openai(s) for s in range(2)]
    dense = [dense_openai(12_000 + 1_000 * s) for s in range(2)]
    stream = {"x-bench-chunks": "8"}
    return {
        "openai_json": [Plan(o, b, {}, False, "ok", (1, 1)) for b in small_o],
        "openai_stream": [Plan(o, b, stream, True, "ok", (1, 1)) for b in small_os],
        "anthropic_json": [Plan(a, b, {}, False, "ok", (1, 1)) for b in small_a],
        "anthropic_stream": [Plan(a, b, stream, True, "ok", (1, 1)) for b in small_as],
        "trim": [Plan(o, b, {}, False, "ok_trimmed", (1, 1)) for b in medium_small],
        "dense": [Plan(o, b, {}, False, "ok_trimmed", (1, 1)) for b in dense],
        "reactive": [
            Plan(
                o,
                b,
                {"x-bench-max-bytes": str(REACTIVE_MAX_BYTES)},
                False,
                "ok_reactive",
                (2, 1 + MAX_RETRIES),
            )
            for b in medium_big
        ],
        "probe": [
            Plan(o, b, {"x-soak-fault": "suspect"}, False, "ok_reactive", (2, 1 + MAX_RETRIES))
            for b in medium_big
        ],
        "probe_refuted": [
            Plan(o, b, {"x-soak-fault": "lookalike"}, False, "status_400", (1, 3))
            for b in medium_big
        ],
        "reset": [
            Plan(o, b, {"x-soak-fault": "reset"}, False, "trimgate_502", (1, 1)) for b in small_o
        ],
        "reset_mid": [
            Plan(o, b, {"x-soak-fault": "reset-mid"}, True, "cut", (1, 1)) for b in small_os
        ],
        "provider_5xx": [
            Plan(o, b, {"x-soak-fault": "5xx"}, False, "provider_5xx", (1, 1)) for b in small_o
        ],
        "client_leaves": [
            Plan(o, b, {"x-bench-chunks": "16", "x-bench-delay-ms": "50"}, True, "left", (1, 1))
            for b in small_os
        ],
    }


@dataclass
class Tally:
    outcomes: Counter[str] = field(default_factory=Counter)  # "kind:outcome"
    unexpected: Counter[str] = field(default_factory=Counter)
    bad_calls: Counter[str] = field(default_factory=Counter)  # "kind:calls"
    started: int = 0
    shed: int = 0
    latencies: list[float] = field(default_factory=list)


async def one(http: ClientSession, base: str, kind: str, plan: Plan, rid: str) -> str:
    headers = {"content-type": "application/json", "x-soak-id": rid, **plan.headers}
    if plan.path == "/v1/messages":
        headers["anthropic-version"] = "2023-06-01"
        headers["x-api-key"] = "sk-soak"
    else:
        headers["authorization"] = "Bearer sk-soak"
    try:
        async with http.post(base + plan.path, data=plan.body, headers=headers) as resp:
            if kind == "client_leaves":
                await resp.content.readany()
                resp.close()  # the client goes away mid-stream
                return "left"
            body = await resp.read()
            if resp.status >= 500:
                ours = resp.headers.get("x-trimgate-error") == "true"
                try:
                    enveloped = "error" in orjson.loads(body)
                except orjson.JSONDecodeError:
                    enveloped = False
                if not enveloped:
                    return f"unenveloped_{resp.status}"
                return f"trimgate_{resp.status}" if ours else "provider_5xx"
            if resp.status != 200:
                return f"status_{resp.status}"
            if plan.stream and not body.rstrip().endswith((b"[DONE]", b'"message_stop"}')):
                return "stream_unfinished"
            if kind in ("trim", "dense"):
                trimmed = resp.headers.get("x-trimgate-reason") == "preemptive"
                return "ok_trimmed" if trimmed else "ok_untrimmed"
            if kind in ("reactive", "probe"):
                ok = resp.headers.get("x-trimgate-reason") == "reactive"
                return "ok_reactive" if ok else "ok_not_reactive"
            return "ok"
    except TimeoutError:
        return "timeout"
    except ClientError:
        return "cut"


@dataclass
class Sample:
    t: float
    rss_kb: int
    fds: int
    in_flight: int


def fds_of(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


async def run(args: argparse.Namespace) -> dict[str, Any]:
    faults = Faults()
    app = make_app()
    app.middlewares.append(fault_layer)
    app[FAULTS] = faults
    runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
    await runner.setup()
    fake_port = free_port()
    await web.TCPSite(runner, "127.0.0.1", fake_port).start()
    fake_url = f"http://127.0.0.1:{fake_port}"

    work = Path(tempfile.mkdtemp(prefix="trimgate-soak-"))
    config = {
        "server": {"read_timeout": 20, "connect_timeout": 5},
        "upstreams": {
            "openai": {"provider": "openai", "base_url": fake_url},
            "anthropic": {"provider": "anthropic", "base_url": fake_url},
        },
        "models": [
            {"match": "bench-small-*", "context_window": SMALL_WINDOW},
            {"match": "bench-*", "context_window": BIG_WINDOW},
        ],
        "trimming": {"reactive": {"enabled": True, "max_retries": MAX_RETRIES}},
    }
    (work / "trimgate.yaml").write_text(yaml.safe_dump(config))
    port = free_port()
    argv = [sys.executable, "-m", "trimgate", "serve", "--config", str(work / "trimgate.yaml")]
    argv += ["--port", str(port), "--log-level", "ERROR"]
    proc = Proc("trimgate", argv, port, work / "trimgate.log", health="/healthz")
    proc.start()
    tally = Tally()
    samples: list[Sample] = []
    in_flight: set[asyncio.Task[None]] = set()
    all_plans = plans()
    kinds, weights = list(MIX), list(MIX.values())
    rng = random.Random(args.seed)
    try:
        await proc.wait_ready()
        pid = proc.pid
        base = f"http://127.0.0.1:{port}"
        connector = TCPConnector(limit=args.max_in_flight, force_close=False)
        timeout = ClientTimeout(total=REQUEST_TIMEOUT)
        async with ClientSession(connector=connector, timeout=timeout) as http:

            async def go(kind: str, plan: Plan, rid: str) -> None:
                t = time.monotonic()
                outcome = await one(http, base, kind, plan, rid)
                tally.latencies.append(time.monotonic() - t)
                tally.outcomes[f"{kind}:{outcome}"] += 1
                if outcome != plan.expect:
                    tally.unexpected[f"{kind}:{outcome}"] += 1
                await asyncio.sleep(0.2)  # the fake's count of a cancelled call settles
                calls = faults.calls.pop(rid, 0)
                if not plan.calls[0] <= calls <= plan.calls[1]:
                    tally.bad_calls[f"{kind}:{calls}"] += 1

            def sample() -> None:
                s = Sample(
                    time.monotonic() - t0, status_kb(pid, "VmRSS"), fds_of(pid), len(in_flight)
                )
                samples.append(s)
                print(
                    f"[soak] t={s.t:6.0f}s rss={s.rss_kb / 1024:7.1f} MiB fds={s.fds:4d} "
                    f"in_flight={s.in_flight:3d} started={tally.started}",
                    flush=True,
                )

            t0 = time.monotonic()
            duration = args.minutes * 60
            budget = int(duration * args.rate)
            interval = 1.0 / args.rate
            next_sample = 0.0
            n = 0
            while n < budget:
                now = time.monotonic() - t0
                if now >= duration:
                    break
                if now >= next_sample:
                    sample()
                    next_sample += SAMPLE_EVERY
                due = n * interval
                if due > now:
                    await asyncio.sleep(due - now)
                n += 1
                if len(in_flight) >= args.max_in_flight:
                    tally.shed += 1
                    continue
                kind = rng.choices(kinds, weights)[0]
                plan = rng.choice(all_plans[kind])
                task = asyncio.create_task(go(kind, plan, str(n)))
                in_flight.add(task)
                task.add_done_callback(in_flight.discard)
                tally.started += 1
            if in_flight:
                await asyncio.wait(in_flight, timeout=REQUEST_TIMEOUT)
            sample()
        await asyncio.sleep(5)  # idle: connections to trimgate are closed, upstream ones idle
        sample()
    finally:
        for task in in_flight:
            task.cancel()
        proc.stop()
        await runner.cleanup()
    return summarize(args, samples, tally)


def _mean(values: list[int]) -> float:
    return statistics.fmean(values) if values else 0.0


def summarize(args: argparse.Namespace, samples: list[Sample], tally: Tally) -> dict[str, Any]:
    load = samples[:-1]  # the last sample is after the idle pause
    third = max(1, len(load) // 3)
    second, last = load[third : 2 * third], load[2 * third :]
    rss2, rss3 = _mean([s.rss_kb for s in second]), _mean([s.rss_kb for s in last])
    fd2 = max((s.fds for s in second), default=0)
    fd3 = max((s.fds for s in last), default=0)
    rss_flat = rss3 <= rss2 * 1.10
    fds_flat = fd3 <= fd2 + 20
    clean = not tally.unexpected and not tally.bad_calls
    lat = sorted(tally.latencies)
    result = {
        "command": f"python -m bench.soak --minutes {args.minutes:g} --rate {args.rate:g}",
        "started": tally.started,
        "shed": tally.shed,
        "outcomes": dict(sorted(tally.outcomes.items())),
        "unexpected": dict(tally.unexpected),
        "bad_upstream_call_counts": dict(tally.bad_calls),
        "latency_p50_ms": round(1000 * lat[len(lat) // 2], 1) if lat else None,
        "latency_p99_ms": round(1000 * lat[int(len(lat) * 0.99)], 1) if lat else None,
        "rss_mib": {
            "start": round(samples[0].rss_kb / 1024, 1),
            "end_of_load": round(load[-1].rss_kb / 1024, 1),
            "after_idle": round(samples[-1].rss_kb / 1024, 1),
            "max": round(max(s.rss_kb for s in samples) / 1024, 1),
            "mean_second_third": round(rss2 / 1024, 1),
            "mean_last_third": round(rss3 / 1024, 1),
        },
        "fds": {
            "start": samples[0].fds,
            "end_of_load": load[-1].fds,
            "after_idle": samples[-1].fds,
            "max": max(s.fds for s in samples),
            "max_second_third": fd2,
            "max_last_third": fd3,
        },
        "samples": [[round(s.t), s.rss_kb, s.fds, s.in_flight] for s in samples],
        "verdict": "flat" if rss_flat and fds_flat and clean else "NOT flat",
        "why": {"rss_flat": rss_flat, "fds_flat": fds_flat, "outcomes_clean": clean},
    }
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak")
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=30.0, help="requests started per second")
    parser.add_argument("--max-in-flight", type=int, default=400)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default="bench/out/soak.json")
    args = parser.parse_args(argv)
    if not 0 < args.minutes <= 120 or not 0 < args.rate <= 1000:
        parser.error("--minutes must be in (0, 120] and --rate in (0, 1000]")
    result = asyncio.run(run(args))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    brief = {k: v for k, v in result.items() if k != "samples"}
    print(json.dumps(brief, indent=2))
    with contextlib.suppress(OSError):
        print(f"(every sample: {out})")
    return 0 if result["verdict"] == "flat" else 1


if __name__ == "__main__":
    sys.exit(main())
