# Closed-loop load generator: a fixed number of workers, each with its own keep-alive
# connection, send requests back to back until the round's request count or wall time runs
# out (whichever is first); in-flight requests then finish, bounded by a per-request timeout.
#
# The default client is a minimal HTTP/1.1 client over asyncio streams: on a 2-core
# machine the load generator shares the CPU with the fake provider and the proxy under
# test, and aiohttp's client costs several times more per request than the proxy hop we
# want to see. `client="aiohttp"` uses one aiohttp ClientSession per target instead.
#
# Per request: latency (send to last byte), TTFB (send to the first body byte; for a
# non-streamed answer, to the end of the response head), status, bytes, a few response
# headers (counted per value), and whether a stream ended with its terminator.

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol
from urllib.parse import urlsplit

from aiohttp import ClientSession, ClientTimeout, TCPConnector

ClientKind = Literal["raw", "aiohttp"]


@dataclass(frozen=True)
class RequestSpec:
    path: str
    bodies: Sequence[bytes]  # rotated, so repeated identical bytes cannot be special-cased
    headers: Mapping[str, str] = field(default_factory=dict)
    stream: bool = False
    end_marker: bytes | None = None  # a stream must end with this (after stripping)
    expect_status: int = 200
    record_headers: tuple[str, ...] = ()
    method: str = "POST"


@dataclass
class RoundResult:
    latencies: list[float] = field(default_factory=list)  # seconds, successful requests
    ttfbs: list[float] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    tags: Counter[str] = field(default_factory=Counter)  # "header=value" counts
    errors: Counter[str] = field(default_factory=Counter)
    ok: int = 0
    failed: int = 0
    bytes_in: int = 0
    wall: float = 0.0

    def merge(self, other: RoundResult) -> None:
        self.latencies += other.latencies
        self.ttfbs += other.ttfbs
        self.statuses.update(other.statuses)
        self.tags.update(other.tags)
        self.errors.update(other.errors)
        self.ok += other.ok
        self.failed += other.failed
        self.bytes_in += other.bytes_in
        self.wall += other.wall


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]  # lower-cased names
    ttfb: float
    nbytes: int
    tail: bytes


class _Conn(Protocol):
    async def request(self, spec: RequestSpec, body: bytes, t0: float) -> Response: ...

    async def close(self) -> None: ...


class ProtocolError(Exception):
    pass


class RawConnection:
    """One persistent HTTP/1.1 connection; reconnects after errors or Connection: close."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._heads: dict[tuple[str, str, int, int], bytes] = {}

    def _head(self, spec: RequestSpec, nbody: int) -> bytes:
        key = (spec.method, spec.path, id(spec.headers), nbody)
        head = self._heads.get(key)
        if head is None:
            lines = [
                f"{spec.method} {spec.path} HTTP/1.1",
                f"Host: {self.host}:{self.port}",
                "Content-Type: application/json",
                f"Content-Length: {nbody}",
            ]
            lines += [f"{k}: {v}" for k, v in spec.headers.items()]
            head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
            if len(self._heads) > 64:
                self._heads.clear()
            self._heads[key] = head
        return head

    async def request(self, spec: RequestSpec, body: bytes, t0: float) -> Response:
        if self._writer is None or self._reader is None:
            self._reader, self._writer = await asyncio.open_connection(
                self.host, self.port, limit=1 << 20
            )
        reader, writer = self._reader, self._writer
        try:
            writer.write(self._head(spec, len(body)))
            if body:
                writer.write(body)
            await writer.drain()
            raw_head = await reader.readuntil(b"\r\n\r\n")
            lines = raw_head.decode("latin-1").split("\r\n")
            parts = lines[0].split(" ", 2)
            if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
                raise ProtocolError(f"bad status line {lines[0]!r}")
            status = int(parts[1])
            headers: dict[str, str] = {}
            for line in lines[1:]:
                if line:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
            ttfb = time.perf_counter() - t0
            first = not spec.stream
            nbytes = 0
            tail = b""
            if headers.get("transfer-encoding", "").lower() == "chunked":
                while True:
                    size_line = await reader.readuntil(b"\r\n")
                    size = int(size_line.split(b";", 1)[0].strip(), 16)
                    if size == 0:
                        while (await reader.readuntil(b"\r\n")) != b"\r\n":
                            pass  # trailers
                        break
                    data = await reader.readexactly(size + 2)
                    if not first:
                        ttfb = time.perf_counter() - t0
                        first = True
                    nbytes += size
                    tail = (tail + data[:-2])[-64:]
            elif "content-length" in headers:
                size = int(headers["content-length"])
                data = await reader.readexactly(size) if size else b""
                if not first and size:
                    ttfb = time.perf_counter() - t0
                nbytes, tail = size, data[-64:]
            else:  # delimited by close
                data = await reader.read()
                nbytes, tail = len(data), data[-64:]
                headers["connection"] = "close"
            if headers.get("connection", "").lower() == "close":
                await self.close()
            return Response(status, headers, ttfb, nbytes, tail)
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        writer, self._writer, self._reader = self._writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


class AiohttpConnection:
    def __init__(self, session: ClientSession, base_url: str) -> None:
        self.session = session
        self.base_url = base_url.rstrip("/")

    async def request(self, spec: RequestSpec, body: bytes, t0: float) -> Response:
        headers = {"Content-Type": "application/json", **spec.headers}
        async with self.session.request(
            spec.method, self.base_url + spec.path, data=body, headers=headers
        ) as resp:
            ttfb = time.perf_counter() - t0
            first = not spec.stream
            nbytes = 0
            tail = b""
            async for chunk in resp.content.iter_any():
                if not first:
                    ttfb = time.perf_counter() - t0
                    first = True
                nbytes += len(chunk)
                tail = (tail + chunk)[-64:]
            hdrs = {k.lower(): v for k, v in resp.headers.items()}
            return Response(resp.status, hdrs, ttfb, nbytes, tail)

    async def close(self) -> None:
        return None


class Pool:
    """The connections of one target for one scenario, reused across its rounds."""

    def __init__(self, base_url: str, size: int, client: ClientKind = "raw") -> None:
        u = urlsplit(base_url)
        if u.hostname != "127.0.0.1":
            raise ValueError("the benchmark only talks to 127.0.0.1")
        self.base_url = base_url
        self.client = client
        self._session: ClientSession | None = None
        if client == "aiohttp":
            self._session = ClientSession(
                connector=TCPConnector(limit=0, force_close=False),
                timeout=ClientTimeout(total=None),
                auto_decompress=False,
            )
            self.conns: list[_Conn] = [
                AiohttpConnection(self._session, base_url) for _ in range(size)
            ]
        else:
            self.conns = [RawConnection("127.0.0.1", u.port or 80) for _ in range(size)]

    async def close(self) -> None:
        for c in self.conns:
            await c.close()
        if self._session is not None:
            await self._session.close()


async def run_round(
    pool: Pool,
    spec: RequestSpec,
    *,
    concurrency: int,
    max_requests: int,
    max_seconds: float,
    request_timeout: float = 60.0,
) -> RoundResult:
    """One closed-loop round: bounded by max_requests AND max_seconds (plus one timeout)."""
    if concurrency > len(pool.conns):
        raise ValueError("pool smaller than concurrency")
    result = RoundResult()
    issued = 0
    start = time.perf_counter()
    deadline = start + max_seconds

    async def worker(conn: _Conn) -> None:
        nonlocal issued
        while issued < max_requests and time.perf_counter() < deadline:
            body = spec.bodies[issued % len(spec.bodies)]
            issued += 1
            t0 = time.perf_counter()
            try:
                async with asyncio.timeout(request_timeout):
                    resp = await conn.request(spec, body, t0)
            except (OSError, asyncio.IncompleteReadError, ProtocolError, ValueError) as exc:
                result.failed += 1
                result.errors[type(exc).__name__] += 1
                await asyncio.sleep(0.01)  # do not spin on a refused connection
                continue
            except TimeoutError:
                result.failed += 1
                result.errors["timeout"] += 1
                continue
            elapsed = time.perf_counter() - t0
            result.statuses[resp.status] += 1
            result.bytes_in += resp.nbytes
            for name in spec.record_headers:
                value = resp.headers.get(name)
                if value is not None:
                    result.tags[f"{name}={value}"] += 1
            if resp.status != spec.expect_status:
                result.failed += 1
                result.errors[f"status {resp.status}"] += 1
                continue
            if spec.end_marker is not None and not resp.tail.rstrip().endswith(spec.end_marker):
                result.failed += 1
                result.errors["stream not terminated"] += 1
                continue
            result.ok += 1
            result.latencies.append(elapsed)
            result.ttfbs.append(resp.ttfb)

    await asyncio.gather(*(worker(pool.conns[i]) for i in range(concurrency)))
    result.wall = time.perf_counter() - start
    return result


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile of already sorted values; None when empty."""
    if not values:
        return None
    k = max(0, min(len(values) - 1, math.ceil(q / 100 * len(values)) - 1))
    return values[k]


@dataclass(frozen=True)
class Summary:
    requests: int
    ok: int
    failed: int
    rps: float
    p50_ms: float | None
    p90_ms: float | None
    p99_ms: float | None
    mean_ms: float | None
    max_ms: float | None
    ttfb_p50_ms: float | None
    ttfb_p99_ms: float | None
    wall_s: float


def _ms(v: float | None) -> float | None:
    return None if v is None else round(v * 1000, 3)


def summarize(r: RoundResult) -> Summary:
    lat = sorted(r.latencies)
    ttfb = sorted(r.ttfbs)
    return Summary(
        requests=r.ok + r.failed,
        ok=r.ok,
        failed=r.failed,
        rps=round(r.ok / r.wall, 2) if r.wall > 0 else 0.0,
        p50_ms=_ms(percentile(lat, 50)),
        p90_ms=_ms(percentile(lat, 90)),
        p99_ms=_ms(percentile(lat, 99)),
        mean_ms=_ms(sum(lat) / len(lat)) if lat else None,
        max_ms=_ms(lat[-1]) if lat else None,
        ttfb_p50_ms=_ms(percentile(ttfb, 50)),
        ttfb_p99_ms=_ms(percentile(ttfb, 99)),
        wall_s=round(r.wall, 3),
    )
