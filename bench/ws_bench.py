"""What relaying a WebSocket through trimgate costs: per-message latency and memory.

``python -m bench.ws_bench [--rounds 2000] [--idle 500]``

Three processes on loopback: an upstream (this module with ``--upstream``: ``/v1/realtime``
echoes every frame, ``/v1/responses`` answers each ``response.create`` with
``response.created``, one text delta and ``response.completed``), ``trimgate serve`` in
front of it, and the client (this process). The client keeps one WebSocket to the
upstream directly and one through trimgate and times round trips on both, in interleaved
blocks of 50 (so both see the same machine load):

- ``realtime``: a 100-byte text frame and its echo (the relay untouched);
- ``responses``: a small ``response.create`` (3 input items) and its three events (the
  create examined as a ``POST /v1/responses`` body would be, its events held until the
  first output event).

Then ``--idle`` WebSockets are opened through trimgate to ``/v1/responses``, each carries
one response (as a Codex connection's warm-up does) and they are left idle, without and
then with ``permessage-deflate`` (a fresh trimgate for each batch); trimgate's resident
memory (VmRSS) is read before and after each batch.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from aiohttp import WSMsgType, web

ROOT = Path(__file__).resolve().parent.parent
BLOCK = 50


# --- the upstream -------------------------------------------------------------------------


async def _realtime(request: web.Request) -> web.WebSocketResponse:
    ws = web.WebSocketResponse(max_msg_size=0)
    await ws.prepare(request)
    async for msg in ws:
        if msg.type == WSMsgType.TEXT:
            await ws.send_str(msg.data)
        elif msg.type == WSMsgType.BINARY:
            await ws.send_bytes(msg.data)
    return ws


async def _responses(request: web.Request) -> web.WebSocketResponse:
    ws = web.WebSocketResponse(max_msg_size=0)
    await ws.prepare(request)
    n = 0
    async for msg in ws:
        if msg.type != WSMsgType.TEXT:
            continue
        n += 1
        rid = f"resp_{n}"
        base = {"id": rid, "object": "response", "model": "bench-x"}
        await ws.send_str(
            json.dumps({"type": "response.created", "response": {**base, "status": "in_progress"}})
        )
        await ws.send_str(
            json.dumps(
                {
                    "type": "response.output_text.delta",
                    "item_id": "msg_1",
                    "output_index": 0,
                    "content_index": 0,
                    "delta": "ok",
                }
            )
        )
        output = [
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "ok", "annotations": []}],
            }
        ]
        await ws.send_str(
            json.dumps(
                {
                    "type": "response.completed",
                    "response": {**base, "status": "completed", "output": output},
                }
            )
        )
    return ws


def upstream_app() -> web.Application:
    app = web.Application()
    app.router.add_get("/v1/realtime", _realtime)
    app.router.add_get("/v1/responses", _responses)
    return app


# --- the processes --------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


@contextlib.asynccontextmanager
async def process(argv: list[str], health: str) -> AsyncIterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(  # noqa: ASYNC220 (started once, before anything is timed)
        argv,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        cwd=ROOT,
    )
    try:
        async with aiohttp.ClientSession() as s:
            for _ in range(200):
                if proc.poll() is not None:
                    raise RuntimeError(f"{argv[2:4]} exited with {proc.returncode}")
                with contextlib.suppress(aiohttp.ClientError):
                    async with s.get(health) as r:
                        if r.status < 500:
                            break
                await asyncio.sleep(0.05)
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)


# --- the measures -----------------------------------------------------------------------------


CREATE = json.dumps(
    {
        "type": "response.create",
        "model": "bench-x",
        "input": [
            {"role": "developer", "content": "be brief"},
            {"role": "user", "content": "hello there"},
            {"role": "user", "content": "and again"},
        ],
    }
)


async def round_trip(ws: aiohttp.ClientWebSocketResponse, kind: str) -> float:
    t = time.perf_counter()
    if kind == "realtime":
        await ws.send_str("x" * 100)
        await ws.receive()
    else:
        await ws.send_str(CREATE)
        while True:
            msg = await ws.receive()
            if '"response.completed"' in msg.data[:40]:
                break
    return time.perf_counter() - t


async def latency(
    session: aiohttp.ClientSession, direct: str, proxy: str, kind: str, rounds: int
) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"direct": [], "trimgate": []}
    async with (
        session.ws_connect(f"{direct}/v1/{kind}") as d,
        session.ws_connect(f"{proxy}/v1/{kind}") as p,
    ):
        for ws in (d, p):  # warm-up
            for _ in range(BLOCK):
                await round_trip(ws, kind)
        for i in range(rounds // BLOCK):
            order = (("direct", d), ("trimgate", p)) if i % 2 else (("trimgate", p), ("direct", d))
            for name, ws in order:
                for _ in range(BLOCK):
                    times[name].append(await round_trip(ws, kind))
    return times


async def idle(
    session: aiohttp.ClientSession, proxy: str, pid: int, count: int, compress: int
) -> tuple[int, int]:
    """trimgate's RSS (KiB) before and after ``count`` idle WebSockets are opened."""
    await asyncio.sleep(0.5)
    before = rss_kib(pid)
    sockets: list[aiohttp.ClientWebSocketResponse] = []
    try:
        for _ in range(count):
            sockets.append(await session.ws_connect(f"{proxy}/v1/responses", compress=compress))
        for ws in sockets:  # each has carried one response (a Codex connection's warm-up)
            await ws.send_str(CREATE)
            while '"response.completed"' not in (await ws.receive()).data[:40]:
                pass
        await asyncio.sleep(1.0)
        after = rss_kib(pid)
    finally:
        await asyncio.gather(*(ws.close() for ws in sockets))
    return before, after


def summary(times: dict[str, list[float]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, values in times.items():
        us = sorted(v * 1e6 for v in values)
        out[name] = {
            "n": len(us),
            "median_us": round(statistics.median(us), 1),
            "p90_us": round(us[int(len(us) * 0.9)], 1),
        }
    out["added_median_us"] = round(out["trimgate"]["median_us"] - out["direct"]["median_us"], 1)
    return out


async def run(rounds: int, count: int) -> dict[str, Any]:
    up_port, tg_port = free_port(), free_port()
    direct, proxy = f"http://127.0.0.1:{up_port}", f"http://127.0.0.1:{tg_port}"
    with tempfile.TemporaryDirectory() as tmp:
        cfg = {
            "upstreams": {"openai": {"provider": "openai", "base_url": direct}},
            "models": [{"match": "bench-*", "context_window": 100000}],
        }
        path = Path(tmp) / "trimgate-ws-bench.yaml"
        path.write_text(yaml.safe_dump(cfg))
        upstream = [sys.executable, "-m", "bench.ws_bench", "--upstream", "--port", str(up_port)]
        trimgate = [
            *(sys.executable, "-m", "trimgate", "serve", "--config", str(path)),
            *("--host", "127.0.0.1", "--port", str(tg_port), "--log-level", "WARNING"),
        ]
        result: dict[str, Any] = {}
        async with process(upstream, direct + "/v1/realtime"):
            async with (
                process(trimgate, proxy + "/healthz"),
                aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session,
            ):
                for kind in ("realtime", "responses"):
                    result[kind] = summary(await latency(session, direct, proxy, kind, rounds))
            for label, compress in (("plain", 0), ("permessage-deflate", 15)):
                # a fresh trimgate for each: memory freed by one batch is not reused by the next
                async with (
                    process(trimgate, proxy + "/healthz") as tg,
                    aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session,
                ):
                    before, after = await idle(session, proxy, tg.pid, count, compress)
                result[f"idle_{label}"] = {
                    "sockets": count,
                    "rss_before_kib": before,
                    "rss_after_kib": after,
                    "per_socket_kib": round((after - before) / count, 1),
                }
        return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--rounds", type=int, default=2000, help="round trips per path and side")
    ap.add_argument("--idle", type=int, default=500, help="idle WebSockets for the memory")
    ap.add_argument("--upstream", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.upstream:
        web.run_app(upstream_app(), host="127.0.0.1", port=a.port, print=None)
        return
    print(json.dumps(asyncio.run(run(a.rounds, a.idle)), indent=2))


if __name__ == "__main__":
    main()
