# Where trimgate's per-request cost sits: parts of the handler switched off one at a time.
#
#   python -m bench.ablate                          # small JSON, c1, every variant
#   python -m bench.ablate --preset large --rounds 3 --seconds 3
#   python -m bench.ablate --stream --variants passthrough full shell
#   python -m bench.ablate --preset large --variants passthrough full --against OTHER/bin/python
#
# Starts the fake provider, the bare pass-through and one trimgate process per variant (each
# `python -m bench.ablate --serve VARIANT ...`, which patches the handler, then runs
# `trimgate serve`), then measures them in interleaved rounds, like the main runner: proxy
# CPU per request from /proc, p50 latency and time to first byte. Variants:
#   passthrough  bench/passthrough.py
#   full         trimgate as it is
#   shell        no examination: every request forwarded as a pass-through
#   parse        orjson.loads of the body, then forwarded as a pass-through
#   decode       the codec's decode as proxy/examine.py does it (from the bytes where the
#                codec can, else parse + decode), then as a pass-through
#   examine      the whole examination (decode, policy, plan, encode), then as a pass-through
#   nosignals    trimgate as it is, but no metrics, event or log lines recorded
#   nousage      trimgate as it is, but no usage read from answers (no calibration)
#   teams        trimgate as it is, metering by team on (metrics.attribution), at its
#                dearest: the key is hashed and matched on every request (from: [api_key,
#                header]); "teams" against "full" is what the team label costs. Two
#                processes of the same code differ by several percent (which core, memory
#                layout): --one-process serves "full" and "teams" from one process, one
#                event loop, two listeners, so that only the config differs
#   otel         trimgate as it is, OpenTelemetry on (the otel extra installed): GenAI metrics
#                and a span for every request (otel.start_traces), exported over OTLP/HTTP
#                to the fake provider, which accepts and drops them; --one-process serves
#                it from the same process as "full" (and "teams")
#   otelmetrics  the same with the metrics only: no traceparent, start_traces off
#   against      `trimgate serve` of another install (--against PYTHON, an interpreter
#                with another version of trimgate installed): this tree's "full" against
#                another commit's, on the same hour (the machine's speed varies 3x by hour)
# The differences between neighbours are what each step costs (but an OpenAI Chat body is
# decoded from its bytes, not parsed first: there `parse` shows what the decode no longer
# pays); the rest of "full" over "examine" is the chat path's own work (headers, signals,
# usage sniffing), of which "full" minus "nosignals" and "full" minus "nousage" are two
# parts. The patches touch the interpreted shell only (Proxy._examine, UsageSniffer and
# _record as trimgate.proxy.forward sees them); the compiled core runs unchanged.

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import sys
import time
from typing import Any

import orjson
import yaml

from bench import payloads
from bench.__main__ import ROOT, Proc, free_port, trimgate_config
from bench.fake_provider import install_uvloop
from bench.load import Pool, RequestSpec, RoundResult, run_round

VARIANTS = (
    "passthrough", "full", "shell", "parse", "decode", "examine", "nosignals", "nousage", "teams",
    "otel", "otelmetrics",
)  # fmt: skip
ONE_PROCESS = ("full", "teams", "otel", "otelmetrics")  # the variants --one-process serves together
BENCH_KEY = "sk-bench-not-a-key"  # what the load generator sends as its bearer value
OUT = ROOT / "bench" / "out" / "ablate"


def patch(variant: str) -> None:
    """Switch part of the handler off (in the --serve child only)."""
    from trimgate.providers.registry import CODECS
    from trimgate.proxy import examine as ex
    from trimgate.proxy import forward
    from trimgate.proxy.routing import Route

    real = forward.Proxy._examine

    def examine(
        self: forward.Proxy, request: Any, route: Route, body: bytes
    ) -> tuple[ex.Chat | None, str | None]:
        if route.wire_format is not None and variant != "shell":
            if variant == "examine":
                real(self, request, route, body)
            elif variant == "parse":
                orjson.loads(body)
            else:  # decode, as _examine does: from the bytes where the codec can
                codec = CODECS[route.wire_format]
                ex.decode_chat(codec, body, route.path, self.examiner.options, False)
        return None, None

    def no_record(*args: Any) -> None:
        return None

    class NoUsage(forward.UsageSniffer):
        def feed(self, chunk: bytes) -> None:
            return None

        @property
        def usage(self) -> tuple[int, int] | None:
            return None

    if variant == "nosignals":
        setattr(forward, "_record", no_record)  # noqa: B010 - replaced on purpose
    elif variant == "nousage":
        setattr(forward, "UsageSniffer", NoUsage)  # noqa: B010
    elif variant not in ONE_PROCESS:  # teams, otel...: only their config differs
        setattr(forward.Proxy, "_examine", examine)  # noqa: B010 - a method replaced on purpose


def serve(variant: str, rest: list[str]) -> int:
    patch(variant)
    from trimgate.cli import main

    return main(["serve", *rest])


def teams(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with metering by team on, the key hashed and matched on every request."""
    prefix = hashlib.sha256(BENCH_KEY.encode()).hexdigest()[:12]
    attribution = {
        "from": ["api_key", "header"],
        "api_keys": [{"sha256_prefix": prefix, "team": "bench"}],
    }
    return {**config, "metrics": {"attribution": attribution}}


def otel(config: dict[str, Any], endpoint: str, spans: bool = True) -> dict[str, Any]:
    """``config`` with OpenTelemetry on: metrics, and (``spans``) a span for every request."""
    return {**config, "otel": {"endpoint": endpoint, "start_traces": spans}}


def serve_pair(rest: list[str]) -> int:
    """``CONFIG PORT CONFIG PORT``: both apps in this one process, each on its own port."""
    from trimgate import logs
    from trimgate.config import load_config
    from trimgate.proxy.serve import install_uvloop, run_server

    logs.setup("INFO")
    configs = []
    for path, port in zip(rest[::2], rest[1::2], strict=True):
        config = load_config(path)
        server = config.server.model_copy(update={"port": int(port)})
        configs.append(config.model_copy(update={"server": server}))

    async def main() -> None:
        stop = asyncio.Event()  # SIGTERM stops both
        await asyncio.gather(*(run_server(c, stop=stop) for c in configs))

    install_uvloop()
    asyncio.run(main())
    return 0


def p50(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] * 1000 if ordered else 0.0


async def measure(args: argparse.Namespace) -> list[dict[str, Any]]:
    install_uvloop()
    fake_port = free_port()
    fake_argv = [sys.executable, "-m", "bench.fake_provider", "--port", str(fake_port)]
    fake = Proc("fake", fake_argv, fake_port, OUT / "fake.log")
    fake.start()
    procs: dict[str, Proc] = {}
    try:
        await fake.wait_ready()
        config = OUT / "trimgate.yaml"
        config.write_text(yaml.safe_dump(trimgate_config(fake.base_url)))
        teams_config = OUT / "trimgate-teams.yaml"
        teams_config.write_text(yaml.safe_dump(teams(trimgate_config(fake.base_url))))
        otel_config = OUT / "trimgate-otel.yaml"
        otel_config.write_text(yaml.safe_dump(otel(trimgate_config(fake.base_url), fake.base_url)))
        metrics_config = OUT / "trimgate-otelmetrics.yaml"
        metrics_only = otel(trimgate_config(fake.base_url), fake.base_url, spans=False)
        metrics_config.write_text(yaml.safe_dump(metrics_only))
        configs = {"teams": teams_config, "otel": otel_config, "otelmetrics": metrics_config}
        pair: dict[str, Proc] = {}
        if args.one_process:  # full, teams and otel: one process, a listener each
            together = [v for v in args.variants if v in ONE_PROCESS]
            ports = {v: free_port() for v in together}
            argv = [sys.executable, "-m", "bench.ablate", "--serve-pair", "--"]
            for v in together:
                argv += [str(configs.get(v, config)), str(ports[v])]
            for v in together:
                pair[v] = Proc(v, argv if not pair else [], ports[v], OUT / "pair.log", "/healthz")
            first = together[0]
        for variant in args.variants:
            port = free_port()
            if variant in pair:
                procs[variant] = pair[variant]
                continue
            if variant == "passthrough":
                argv = [sys.executable, "-m", "bench.passthrough", "--port", str(port)]
                argv += ["--upstream", fake.base_url]
                health = None
            else:
                argv = [sys.executable, "-m", "bench.ablate", "--serve", variant, "--"]
                argv += ["--config", str(configs.get(variant, config))]
                argv += ["--port", str(port)]
                health = "/healthz"
            procs[variant] = Proc(variant, argv, port, OUT / f"{variant}.log", health)
        if pair:
            pair[first].start()
            for proc in pair.values():
                proc.popen = pair[first].popen
        for proc in procs.values():
            if proc.popen is None:
                proc.start()
        if args.against:
            port = free_port()
            argv = [args.against, "-m", "trimgate", "serve", "--config", str(config)]
            argv += ["--port", str(port)]
            # run outside the repository, so that it imports the trimgate it has installed
            procs["against"] = Proc("against", argv, port, OUT / "against.log", "/healthz", cwd=OUT)
            procs["against"].start()
        for proc in procs.values():
            await proc.wait_ready()

        bodies = [
            payloads.make("openai", args.preset, seed, model=args.model, stream=args.stream)
            for seed in range(3)
        ]
        spec = RequestSpec(
            path="/v1/chat/completions",
            bodies=bodies,
            headers={"Authorization": f"Bearer {BENCH_KEY}", "x-bench-chunks": "16"}
            | ({"x-bench-delay-ms": "1"} if args.stream else {}),
            stream=args.stream,
            end_marker=b"data: [DONE]" if args.stream else None,
        )
        pools = {v: Pool(p.base_url, args.concurrency) for v, p in procs.items()}
        results = {v: RoundResult() for v in procs}
        cpu = dict.fromkeys(procs, 0.0)
        wall = dict.fromkeys(procs, 0.0)
        names = list(procs)
        for v in names:  # warm-up round, not counted
            await run_round(
                pools[v], spec, concurrency=args.concurrency, max_requests=200, max_seconds=1.0
            )
        for r in range(args.rounds):
            for v in names[r % len(names) :] + names[: r % len(names)]:
                c0, t0 = procs[v].cpu_s(), time.perf_counter()
                res = await run_round(
                    pools[v],
                    spec,
                    concurrency=args.concurrency,
                    max_requests=1_000_000,
                    max_seconds=args.seconds,
                )
                cpu[v] += procs[v].cpu_s() - c0
                wall[v] += time.perf_counter() - t0
                results[v].merge(res)
        for pool in pools.values():
            await pool.close()
        rows = []
        for v in names:
            res = results[v]
            rows.append(
                {
                    "variant": v,
                    "ok": res.ok,
                    "failed": res.failed,
                    "req_s": res.ok / wall[v] if wall[v] else 0.0,
                    "cpu_us": cpu[v] / res.ok * 1e6 if res.ok else 0.0,
                    "p50_ms": p50(res.latencies),
                    "ttfb_p50_ms": p50(res.ttfbs),
                }
            )
        return rows
    finally:
        for proc in procs.values():
            proc.stop()
        fake.stop()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--serve-pair"]:
        return serve_pair(argv[2:] if argv[1:2] == ["--"] else argv[1:])
    if argv[:1] == ["--serve"]:
        rest = argv[3:] if argv[2:3] == ["--"] else argv[2:]
        return serve(argv[1], rest)
    parser = argparse.ArgumentParser(prog="python -m bench.ablate")
    parser.add_argument("--preset", default="small", choices=["small", "medium", "large"])
    parser.add_argument("--model", default="bench-big-openai", help="bench-small-* trims")
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=1.5, help="per round and variant")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument(
        "--against",
        metavar="PYTHON",
        help="also measure `PYTHON -m trimgate serve` (another install), as variant 'against'",
    )
    parser.add_argument(
        "--one-process",
        action="store_true",
        help="serve the variants full, teams, otel, otelmetrics (those given) from one process",
    )
    args = parser.parse_args(argv)
    if args.one_process and len(set(args.variants) & set(ONE_PROCESS)) < 2:
        parser.error("--one-process needs two of the variants full, teams, otel, otelmetrics")
    if args.against:  # it runs in another directory, where a relative path would not resolve
        args.against = os.path.abspath(args.against)
    OUT.mkdir(parents=True, exist_ok=True)
    rows = asyncio.run(measure(args))
    base = rows[0]
    print(
        f"preset={args.preset} model={args.model} stream={args.stream} "
        f"c={args.concurrency} rounds={args.rounds}x{args.seconds}s"
    )
    print("| variant | ok / failed | req/s | CPU µs/req | × first | p50 ms | TTFB p50 ms |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        ratio = row["cpu_us"] / base["cpu_us"] if base["cpu_us"] else 0.0
        print(
            f"| {row['variant']} | {row['ok']} / {row['failed']} | {row['req_s']:.0f} "
            f"| {row['cpu_us']:.0f} | {ratio:.2f} | {row['p50_ms']:.3f} "
            f"| {row['ttfb_p50_ms']:.3f} |"
        )
    (OUT / "results.json").write_bytes(orjson.dumps(rows, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
