"""The one pooled ClientSession, header filtering, and aiohttp's errors mapped once."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import aiohttp
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from trimgate.config import ServerConfig
from trimgate.errors import UpstreamConnectError, UpstreamTimeout

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
# Never forwarded upstream: the destination and framing are trimgate's to set,
# and forwarding headers must not tell the provider a story about the client.
DROP_REQUEST = HOP_BY_HOP | {
    "host",
    "content-length",
    "expect",
    "forwarded",
    "x-forwarded-for",
    "x-forwarded-host",
    "x-forwarded-proto",
    "x-real-ip",
}
DROP_RESPONSE = HOP_BY_HOP | {"content-length", "server", "date"}


def _connection_tokens(headers: Mapping[str, str]) -> set[str]:
    return {t.strip().lower() for t in headers.get("connection", "").split(",") if t.strip()}


def request_headers(
    incoming: CIMultiDictProxy[str], *, drop: Iterable[str] = ()
) -> CIMultiDict[str]:
    extra = _connection_tokens(incoming) | {d.lower() for d in drop}
    out: CIMultiDict[str] = CIMultiDict()
    for key, value in incoming.items():
        k = key.lower()
        if k in DROP_REQUEST or k in extra or k.startswith("x-trimgate-"):
            continue
        out.add(key, value)
    return out


def response_headers(incoming: CIMultiDictProxy[str]) -> CIMultiDict[str]:
    extra = _connection_tokens(incoming)
    out: CIMultiDict[str] = CIMultiDict()
    for key, value in incoming.items():
        k = key.lower()
        if k in DROP_RESPONSE or k in extra:
            continue
        out.add(key, value)
    return out


def make_session(server: ServerConfig) -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(
        limit=server.max_connections,
        limit_per_host=0,
        ttl_dns_cache=300,
        keepalive_timeout=60,
    )
    timeout = aiohttp.ClientTimeout(
        total=None, connect=server.connect_timeout, sock_read=server.read_timeout
    )
    return aiohttp.ClientSession(
        connector=connector,
        timeout=timeout,
        auto_decompress=False,  # compressed answers are relayed as they are
        skip_auto_headers=("User-Agent", "Accept-Encoding", "Accept", "Content-Type"),
        cookie_jar=aiohttp.DummyCookieJar(),
        raise_for_status=False,
    )


async def send(
    session: aiohttp.ClientSession,
    method: str,
    url: URL,
    headers: CIMultiDict[str],
    body: bytes,
) -> aiohttp.ClientResponse:
    """Send and wait for the response headers; errors become trimgate's own."""
    try:
        return await session.request(
            method,
            url,
            headers=headers,
            data=body if body else None,
            allow_redirects=False,
            compress=None,
        )
    except TimeoutError as exc:
        raise UpstreamTimeout("upstream timed out") from exc
    except aiohttp.ClientError as exc:
        raise UpstreamConnectError(f"upstream unreachable: {type(exc).__name__}") from exc
    except OSError as exc:
        raise UpstreamConnectError(f"upstream unreachable: {type(exc).__name__}") from exc


async def read_head(resp: aiohttp.ClientResponse, limit: int) -> tuple[bytes, bool]:
    """Up to about ``limit`` bytes of the body, and whether that is all of it."""
    chunks: list[bytes] = []
    size = 0
    try:
        while size <= limit:
            chunk = await resp.content.readany()
            if not chunk:
                return b"".join(chunks), True
            chunks.append(chunk)
            size += len(chunk)
    except TimeoutError as exc:
        raise UpstreamTimeout("upstream timed out") from exc
    except aiohttp.ClientError as exc:
        raise UpstreamConnectError(f"upstream failed: {type(exc).__name__}") from exc
    return b"".join(chunks), False


async def read_until(
    resp: aiohttp.ClientResponse, done: Callable[[bytes], bool], limit: int
) -> bytes:
    """Body bytes until ``done(buffer)`` says enough (e.g. a decisive first SSE event)."""
    buf = bytearray()
    try:
        while len(buf) <= limit:
            chunk = await resp.content.readany()
            if not chunk:
                break
            buf += chunk
            if done(bytes(buf)):
                break
    except TimeoutError as exc:
        raise UpstreamTimeout("upstream timed out") from exc
    except aiohttp.ClientError as exc:
        raise UpstreamConnectError(f"upstream failed: {type(exc).__name__}") from exc
    return bytes(buf)
