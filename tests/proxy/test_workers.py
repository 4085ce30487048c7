"""``trimgate serve --workers 2``: one port, summed metrics, one event stream."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

from tests.proxy.bodies import openai_chat

REQUESTS = 30


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def fake_upstream() -> Iterator[int]:
    port = free_port()
    ready = threading.Event()

    async def chat(request: web.Request) -> web.Response:
        await request.read()
        return web.json_response(
            {
                "id": "x",
                "object": "chat.completion",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "ok"},
                        "finish_reason": "stop",
                    }
                ],
            }
        )

    def run() -> None:
        import asyncio

        async def main() -> None:
            app = web.Application()
            app.router.add_post("/v1/chat/completions", chat)
            runner = web.AppRunner(app)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", port).start()
            ready.set()
            await asyncio.to_thread(stop.wait)
            await runner.cleanup()

        asyncio.run(main())

    stop = threading.Event()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(10)
    yield port
    stop.set()
    thread.join(10)


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as resp:
        data: bytes = resp.read()
        return data


def test_two_workers_share_port_metrics_and_events(fake_upstream: int, tmp_path: Path) -> None:
    port = free_port()
    config = tmp_path / "c.yaml"
    config.write_text(
        f"upstreams: {{openai: {{provider: openai, base_url: 'http://127.0.0.1:{fake_upstream}'}}}}\n"
        "models: [{match: small-*, context_window: 1000}]\n"
        "trimming: {calibrate: false}\n"
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trimgate",
            "serve",
            "--config",
            str(config),
            "--port",
            str(port),
            "--workers",
            "2",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"},
    )
    base = f"http://127.0.0.1:{port}"
    lines: list[str] = []
    assert proc.stderr is not None
    listening = threading.Event()

    def read_log() -> None:
        assert proc.stderr is not None
        for raw in iter(proc.stderr.readline, b""):
            line = raw.decode()
            lines.append(line)
            if sum('"msg":"listening"' in ln for ln in lines) == 2:
                listening.set()

    log_thread = threading.Thread(target=read_log, daemon=True)
    log_thread.start()
    try:
        assert listening.wait(60), "both workers listening"
        body = json.dumps(openai_chat(8, model="small-1")).encode()
        for _ in range(REQUESTS):
            req = urllib.request.Request(
                f"{base}/v1/chat/completions",
                data=body,
                headers={"Content-Type": "application/json", "Connection": "close"},
            )
            with urllib.request.urlopen(req, timeout=10) as resp:
                assert resp.headers["x-trimgate-trimmed"] == "true"
        time.sleep(0.5)
        for _ in range(6):  # whichever worker answers, it sees everything
            metrics = get(f"{base}/metrics").decode()
            line = next(ln for ln in metrics.splitlines() if ln.startswith("trimgate_trims_total{"))
            assert float(line.rsplit(" ", 1)[1]) == REQUESTS
            events = json.loads(get(f"{base}/api/events/history"))["events"]
            assert len(events) == REQUESTS
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log_thread.join(10)
        proc.stderr.close()
    assert proc.returncode == 0
    pids = {
        json.loads(line)["pid"]
        for line in lines
        if line.startswith("{") and json.loads(line).get("event") == "request"
    }
    assert len(pids) == 2, "the kernel spread connections over both workers"
