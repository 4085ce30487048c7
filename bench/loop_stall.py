"""How long large bodies being examined hold up small requests on the same trimgate.

python -m bench.loop_stall [--large-mb 4] [--large-clients 3] [--seconds 8] [--message-chars 4000]

Starts the bench fake provider and trimgate (``trimgate serve``) as separate processes on
loopback, then measures the latency of small chat requests (one client, one request at a
time) twice: alone, and while ``--large-clients`` clients keep sending ``--large-mb`` MB
chat histories that need a trim. Three configurations run in one invocation: the
default (``process``: large bodies examined in a worker thread, dense ones, of very many
JSON objects, in the worker process), ``thread`` (``server.examine_process: false``: every
large body in a worker thread), and ``inline`` (every body examined on the event loop:
``offload.INLINE_BYTES`` raised past any body, as before the worker threads). Prints
p50 / p99 / max of the small requests, in ms,
and, as the floor, the same load with the large bodies not examined
(``x-trimgate-mode: off``): what receiving and relaying them costs on a shared machine.
``--message-chars 1`` makes the large bodies histories of tiny messages (the most JSON
objects per MB; 3 MB is about 77,000 objects, under the 100,000 that are examined).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import orjson

ROOT = Path(__file__).resolve().parent.parent

# trimgate serve with every body examined on the loop (the behaviour before)
INLINE_LAUNCHER = (
    "import sys, trimgate.proxy.offload as o; o.INLINE_BYTES = 1 << 60; "
    "from trimgate.cli import main; sys.exit(main(sys.argv[1:]))"
)
THREAD_LAUNCHER = "import sys; from trimgate.cli import main; sys.exit(main(sys.argv[1:]))"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def chat(turns: int, size: int, model: str) -> bytes:
    messages: list[dict[str, object]] = [{"role": "system", "content": "Be careful."}]
    for t in range(turns):
        messages.append({"role": "user", "content": f"task {t}: " + "u" * size})
        messages.append({"role": "assistant", "content": f"done {t}: " + "a" * size})
    return orjson.dumps({"model": model, "messages": messages})


async def wait_up(url: str) -> None:
    async with aiohttp.ClientSession() as http:
        for _ in range(200):
            try:
                async with http.get(url) as resp:
                    if resp.status < 500:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.05)
    raise RuntimeError(f"{url} did not come up")


async def measure(
    base: str, large: bytes, clients: int, seconds: float, *, examine: bool = True
) -> list[float]:
    small = chat(2, 200, "bench-small-openai")
    stop = time.monotonic() + seconds
    headers = {"Content-Type": "application/json"}
    large_headers = headers if examine else {**headers, "x-trimgate-mode": "off"}
    latencies: list[float] = []
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as http:

        async def big() -> None:
            while time.monotonic() < stop:
                async with http.post(
                    f"{base}/v1/chat/completions", data=large, headers=large_headers
                ) as resp:
                    await resp.read()

        async def probe() -> None:
            await asyncio.sleep(0.2)  # the large bodies are under way
            while time.monotonic() < stop:
                t = time.perf_counter()
                async with http.post(
                    f"{base}/v1/chat/completions", data=small, headers=headers
                ) as resp:
                    await resp.read()
                    assert resp.status == 200, resp.status
                latencies.append((time.perf_counter() - t) * 1000)
                await asyncio.sleep(0.005)

        await asyncio.gather(probe(), *(big() for _ in range(clients)))
    return latencies


def summary(values: list[float]) -> str:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return (
        f"n={len(ordered):5d}  p50={statistics.median(ordered):7.2f}  "
        f"p99={p99:7.2f}  max={ordered[-1]:7.2f}"
    )


async def run(args: argparse.Namespace) -> None:
    fake_port, proxy_port = free_port(), free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    fake = subprocess.Popen(  # noqa: ASYNC220 (started once, before any measuring)
        [sys.executable, "-m", "bench.fake_provider", "--port", str(fake_port)], env=env
    )
    config = (
        f"upstreams:\n  openai: {{provider: openai, base_url: 'http://127.0.0.1:{fake_port}'}}\n"
        "models:\n  - {match: 'bench-small-*', context_window: 16000}\n"
        "server: {max_body_bytes: 134217728, examine_process: %s}\n"
    )
    turns = args.large_mb * 2**20 // (2 * (args.message_chars + 40))  # ~40 bytes of JSON each
    large = chat(turns, args.message_chars, "bench-small-openai")
    configs = {}
    for on in ("true", "false"):
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            f.write(config % on)
        configs[on] = f.name
    modes = (
        ("process", THREAD_LAUNCHER, "true"),
        ("thread", THREAD_LAUNCHER, "false"),
        ("inline", INLINE_LAUNCHER, "false"),
    )
    try:
        await wait_up(f"http://127.0.0.1:{fake_port}/bench/stats")
        for name, launcher, on in modes:
            command = [sys.executable, "-c", launcher, "serve", "--config", configs[on]]
            command += ["--port", str(proxy_port), "--log-level", "WARNING"]
            proxy = subprocess.Popen(command, env=env)  # noqa: ASYNC220 (between measures)
            try:
                base = f"http://127.0.0.1:{proxy_port}"
                await wait_up(f"{base}/healthz")
                alone = await measure(base, large, 0, args.seconds / 2)
                loaded = await measure(base, large, args.large_clients, args.seconds)
                print(f"{name:6s} small alone:          {summary(alone)}")
                print(
                    f"{name:6s} beside {args.large_clients} x {len(large) / 1e6:.1f} MB: "
                    f"{summary(loaded)}"
                )
                if name == "process":  # the floor: the same bodies relayed, not examined
                    floor = await measure(
                        base, large, args.large_clients, args.seconds, examine=False
                    )
                    print(f"{name:6s} beside, not examined: {summary(floor)}")
            finally:
                proxy.terminate()
                proxy.wait(10)
    finally:
        fake.terminate()
        fake.wait(10)
        for name in configs.values():
            os.unlink(name)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.loop_stall")
    parser.add_argument("--large-mb", type=int, default=4)
    parser.add_argument("--large-clients", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--message-chars", type=int, default=4000)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
