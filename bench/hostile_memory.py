"""Peak memory of ``trimgate serve`` under hostile bodies, one fresh process per case.

python -m bench.hostile_memory [--only CASE ...]

Starts the bench fake provider and, for each case, a new ``trimgate serve`` (default
config) as separate processes on loopback; reads trimgate's peak RSS (VmHWM in
/proc/PID/status) after the case, and the worst latency of small chat requests sent one
at a time meanwhile (how long the loop was held). Cases:

  bomb        a 58 MiB chat of tiny messages, gzip -9 (about 200 KiB: past
              server.max_inflation_ratio), sent 6 times at once
  gzip-tuned  the same chat with a little entropy per message (gzip about 1:11, within
              the ratio), sent once and 4 times at once
  plain       the same 58 MiB uncompressed, sent once
  stalled     20 uploads declaring 59 MiB each that send 58 MiB and stop
  declared    8 uploads declaring server.max_body_bytes that send one byte and stop; then
              a small chat (its status says whether body-bearing requests still get in)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gzip
import os
import random
import string
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.loop_stall import ROOT, free_port, wait_up

SMALL = b'{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}'
MIB = 1024 * 1024
CASES = ("bomb", "gzip-tuned", "plain", "stalled", "declared")


def tiny_messages_chat(target: int, entropy: int) -> bytes:
    """A chat of about ``target`` bytes of two-role messages, each ``entropy`` random
    letters long (0: ``hi``): the shape that costs the most objects per byte parsed."""
    rnd = random.Random(1)
    parts = [b'{"model":"gpt-4o","messages":[']
    size, i = 0, 0
    while size < target:
        text = "".join(rnd.choice(string.ascii_letters) for _ in range(entropy)) or "hi"
        role = b"user" if i % 2 == 0 else b"assistant"
        item = b'{"role":"%s","content":"%s"},' % (role, text.encode())
        parts.append(item)
        size, i = size + len(item), i + 1
    parts.append(b'{"role":"user","content":"end"}]}')
    return b"".join(parts)


def head(length: int, extra: str = "") -> bytes:
    return (
        "POST /v1/chat/completions HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n{extra}\r\n"
    ).encode()


def peak_mib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024
    return 0


async def exchange(port: int, data: bytes, wait: float = 60) -> str:
    """The status line trimgate answers ``data`` with ('-' if none came)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), wait)
        return line.decode(errors="replace")[9:12] or "-"
    except (OSError, TimeoutError):
        return "-"
    finally:
        writer.close()


async def with_probe(port: int, work: asyncio.Future[list[str]]) -> tuple[list[str], float]:
    """``work``'s statuses and the worst latency (s) of small chats sent meanwhile."""
    worst = 0.0
    while not work.done():
        t = time.monotonic()
        await exchange(port, head(len(SMALL)) + SMALL, 30)
        worst = max(worst, time.monotonic() - t)
        await asyncio.sleep(0.05)
    return work.result(), worst


async def send_many(port: int, body: bytes, count: int, encoding: str) -> tuple[list[str], float]:
    extra = f"Content-Encoding: {encoding}\r\n" if encoding else ""
    data = head(len(body), extra) + body
    work = asyncio.gather(*(exchange(port, data) for _ in range(count)))
    return await with_probe(port, work)


async def stalled(port: int, count: int, declared: int, sent: int) -> list[str]:
    """``count`` uploads declaring ``declared`` bytes that send ``sent`` and stop; then a
    small chat. Returns the small chat's status."""
    writers: list[asyncio.StreamWriter] = []
    chunk = b" " * MIB
    try:
        for _ in range(count):
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writers.append(writer)
            writer.write(head(declared) + b"{")
        for _ in range(sent // MIB):
            for writer in writers:
                with contextlib.suppress(OSError):
                    writer.write(chunk)
            for writer in writers:
                with contextlib.suppress(OSError):
                    await asyncio.wait_for(writer.drain(), 10)
        await asyncio.sleep(0.5)
        return [await exchange(port, head(len(SMALL)) + SMALL, 10)]
    finally:
        for writer in writers:
            writer.close()


async def run_case(case: str, port: int) -> str:
    chat = tiny_messages_chat(58 * MIB, 0)
    if case == "bomb":
        packed = gzip.compress(chat, 9)
        statuses, worst = await send_many(port, packed, 6, "gzip")
        return f"{len(packed) // 1024} KiB gzip x6 -> {statuses}, small max {worst:.2f}s"
    if case == "gzip-tuned":
        packed = gzip.compress(tiny_messages_chat(58 * MIB, 2), 6)
        once, worst1 = await send_many(port, packed, 1, "gzip")
        four, worst4 = await send_many(port, packed, 4, "gzip")
        return (
            f"{len(packed) // 1024} KiB gzip x1 -> {once} (small max {worst1:.2f}s), "
            f"x4 -> {four} (small max {worst4:.2f}s)"
        )
    if case == "plain":
        statuses, worst = await send_many(port, chat, 1, "")
        return f"{len(chat) // MIB} MiB x1 -> {statuses}, small max {worst:.2f}s"
    if case == "stalled":
        small = await stalled(port, 20, 59 * MIB, 58 * MIB)
        return f"20 x 59 MiB stalled; a small chat then -> {small}"
    small = await stalled(port, 8, 64 * MIB, 0)
    return f"8 x 64 MiB declared, 1 byte sent; a small chat then -> {small}"


async def run(cases: list[str]) -> None:
    fake_port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    fake = subprocess.Popen(  # noqa: ASYNC220 (started once, before any measuring)
        [sys.executable, "-m", "bench.fake_provider", "--port", str(fake_port)], env=env
    )
    config = (
        f"upstreams:\n  openai: {{provider: openai, base_url: 'http://127.0.0.1:{fake_port}'}}\n"
    )
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(config)
    try:
        await wait_up(f"http://127.0.0.1:{fake_port}/bench/stats")
        for case in cases:
            port = free_port()
            command = [sys.executable, "-m", "trimgate", "serve", "--config", f.name]
            command += ["--port", str(port), "--log-level", "ERROR"]
            proxy = subprocess.Popen(command, env=env)  # noqa: ASYNC220 (one per case)
            try:
                await wait_up(f"http://127.0.0.1:{port}/healthz")
                idle = peak_mib(proxy.pid)
                what = await run_case(case, port)
                print(f"{case:10s} peak RSS {peak_mib(proxy.pid):5d} MiB (idle {idle}): {what}")
            finally:
                proxy.terminate()
                try:
                    proxy.wait(10)
                except subprocess.TimeoutExpired:  # uploads still held past the grace
                    proxy.kill()
                    proxy.wait(10)
    finally:
        fake.terminate()
        fake.wait(10)
        os.unlink(f.name)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.hostile_memory")
    parser.add_argument("--only", nargs="*", choices=CASES, default=list(CASES))
    args = parser.parse_args(argv)
    asyncio.run(run(args.only))


if __name__ == "__main__":
    main()
