"""``trimgate serve --workers 2``: one port, summed metrics, one event stream."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiohttp import web

from tests.fakes import free_port
from tests.proxy.bodies import openai_chat

pytestmark = pytest.mark.shell

REQUESTS = 30


@dataclass
class Upstream:
    port: int
    arrived: list[str]  # the models of the requests received, in order


@pytest.fixture
def fake_upstream() -> Iterator[Upstream]:
    """A chat upstream in a thread: a model named ``slow-*`` is answered after 10.5 s,
    ``hang-*`` never."""
    upstream = Upstream(free_port(), [])
    ready = threading.Event()

    async def chat(request: web.Request) -> web.Response:
        import asyncio

        model = str((await request.json()).get("model", ""))
        upstream.arrived.append(model)
        if model.startswith("slow-"):
            await asyncio.sleep(10.5)
        elif model.startswith("hang-"):
            await asyncio.sleep(3600)
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
            runner = web.AppRunner(app, shutdown_timeout=1)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", upstream.port).start()
            ready.set()
            await asyncio.to_thread(stop.wait)
            await runner.cleanup()

        asyncio.run(main())

    stop = threading.Event()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(10)
    yield upstream
    stop.set()
    thread.join(10)


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as resp:
        data: bytes = resp.read()
        return data


@contextlib.contextmanager
def workers(
    config: Path, port: int, count: int
) -> Iterator[tuple[subprocess.Popen[bytes], list[str]]]:
    """``trimgate serve --workers COUNT`` until every worker listens; its log lines."""
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
            str(count),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"},
    )
    lines: list[str] = []
    assert proc.stderr is not None
    listening = threading.Event()

    def read_log() -> None:
        assert proc.stderr is not None
        for raw in iter(proc.stderr.readline, b""):
            line = raw.decode()
            lines.append(line)
            if sum('"msg":"listening"' in ln for ln in lines) == count:
                listening.set()

    log_thread = threading.Thread(target=read_log, daemon=True)
    log_thread.start()
    try:
        assert listening.wait(60), "every worker listening"
        yield proc, lines
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log_thread.join(10)
        proc.stderr.close()


def write_config(path: Path, upstream: Upstream, extra: str = "") -> Path:
    base_url = f"http://127.0.0.1:{upstream.port}"
    path.write_text(
        f"upstreams: {{openai: {{provider: openai, base_url: '{base_url}'}}}}\n"
        "models: [{match: small-*, context_window: 1000}]\n"
        "trimming: {calibrate: false}\n" + extra
    )
    return path


def test_two_workers_share_port_metrics_and_events(fake_upstream: Upstream, tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with workers(write_config(tmp_path / "c.yaml", fake_upstream), port, 2) as (proc, lines):
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
    assert proc.returncode == 0
    pids = {
        json.loads(line)["pid"]
        for line in lines
        if line.startswith("{") and json.loads(line).get("event") == "request"
    }
    assert len(pids) == 2, "the kernel spread connections over both workers"


def test_stopped_workers_finish_answers_within_the_grace_and_no_longer(
    fake_upstream: Upstream, tmp_path: Path
) -> None:
    """SIGTERM to the supervisor: an answer that comes within ``server.shutdown_grace``
    (12 s here) is relayed, one that does not is cut when the grace is up, and the
    workers then end by themselves. The supervisor used to kill its workers 10 s after
    SIGTERM, whatever the grace."""
    port = free_port()
    config = write_config(tmp_path / "c.yaml", fake_upstream, "server: {shutdown_grace: 12}\n")
    results: dict[str, object] = {}

    def ask(model: str) -> None:
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            data=json.dumps(openai_chat(2, model=model)).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                results[model] = resp.status
        except (OSError, http.client.HTTPException) as exc:
            results[model] = exc

    with workers(config, port, 2) as (proc, lines):
        askers = [threading.Thread(target=ask, args=(m,)) for m in ("slow-1", "hang-1")]
        for asker in askers:
            asker.start()
        for _ in range(1000):
            if len(fake_upstream.arrived) == 2:
                break
            time.sleep(0.01)
        assert sorted(fake_upstream.arrived) == ["hang-1", "slow-1"]
        started = time.monotonic()
        proc.terminate()
        proc.wait(timeout=30)
        elapsed = time.monotonic() - started
        for asker in askers:
            asker.join(10)
    assert results["slow-1"] == 200
    assert isinstance(results["hang-1"], (OSError, http.client.HTTPException))
    assert 11.5 < elapsed < 16.0, elapsed  # the grace, not the kill 5 s after it
    assert proc.returncode == 0
    assert not [ln for ln in lines if '"event":"worker_killed"' in ln]  # they ended by themselves
