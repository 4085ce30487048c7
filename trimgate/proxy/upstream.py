"""The upstream client (trimgate's own or aiohttp's), header filtering, errors mapped once."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

import aiohttp
from aiohttp.client_proto import ResponseHandler
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from trimgate.config import ServerConfig
from trimgate.errors import UpstreamConnectError, UpstreamTimeout
from trimgate.proxy import h1
from trimgate.proxy.h1conn import unread_waiting

KEEPALIVE = 60.0  # seconds an idle upstream connection is kept for reuse

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


def response_headers(
    incoming: CIMultiDictProxy[str], ours: Mapping[str, str]
) -> list[tuple[str, str]]:
    """The provider's headers a client gets, then ``ours`` (lower-case names), which
    take the place of any the provider sent under the same names."""
    extra = _connection_tokens(incoming) if "connection" in incoming else ()
    out = [
        (key, value)
        for key, value in incoming.items()
        if (k := key.lower()) not in DROP_RESPONSE and k not in ours and k not in extra
    ]
    out.extend(ours.items())
    return out


class Answer(Protocol):
    """An upstream answer as the forwarding code reads it, whichever client made it."""

    @property
    def status(self) -> int: ...
    @property
    def reason(self) -> str | None: ...
    @property
    def headers(self) -> CIMultiDictProxy[str]: ...
    async def readany(self) -> bytes:
        """Body bytes as they arrive, b"" at the end; raises ``UpstreamError``."""
        ...

    def release(self) -> None:
        """Done with it: a fully read connection is pooled again, any other closed."""
        ...

    def close(self) -> None: ...


class UpstreamClient(Protocol):
    @property
    def closed(self) -> bool: ...
    async def request(
        self, method: str, url: URL, headers: CIMultiDict[str], body: bytes
    ) -> Answer: ...
    async def close(self) -> None: ...


def make_client(server: ServerConfig) -> UpstreamClient:
    """The upstream client ``server.upstream_client`` names: trimgate's own, or aiohttp's."""
    if server.upstream_client == "aiohttp":
        return AiohttpClient(server)
    return h1.Client(
        limit=server.max_connections,
        connect_timeout=server.connect_timeout,
        read_timeout=server.read_timeout,
        keepalive=KEEPALIVE,
    )


class _CountingHandler(ResponseHandler):
    """aiohttp's connection protocol, counting the bytes it receives."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop)
        self.received = 0
        self.pooled_at = -1  # ``received`` when it went back to the pool

    def data_received(self, data: bytes) -> None:
        self.received += len(data)
        super().data_received(data)


class _StrictConnector(aiohttp.TCPConnector):
    """aiohttp's connector, but a pooled connection that received bytes while idle (after
    a complete answer, before the next request), or whose socket holds bytes the loop has
    not yet delivered (``unread_waiting``), is closed, never reused: those bytes would
    otherwise be read as (or into) the answer to the next request, which may be another
    client's; aiohttp reuses any connection that is still open."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._factory = functools.partial(_CountingHandler, loop=self._loop)  # type: ignore[assignment]

    def _release(self, key: Any, protocol: Any, *, should_close: bool = False) -> None:
        if isinstance(protocol, _CountingHandler):
            protocol.pooled_at = protocol.received
        super()._release(key, protocol, should_close=should_close)

    async def _get(self, key: Any, traces: Any) -> Any:
        while True:
            conn = await super()._get(key, traces)
            if conn is None:
                return None
            proto = conn.protocol
            if (
                isinstance(proto, _CountingHandler)
                and proto.received == proto.pooled_at
                and not proto.should_close
                and not unread_waiting(proto.transport)
            ):
                return conn
            conn.close()  # bytes arrived while it was idle: closed, not reused

    @staticmethod
    def supported() -> bool:
        """Whether this aiohttp has the hooks overridden above."""
        base = aiohttp.TCPConnector
        return all(callable(getattr(base, name, None)) for name in ("_get", "_release"))


class AiohttpClient:
    """aiohttp's ClientSession behind the same interface: the fallback client."""

    def __init__(self, server: ServerConfig) -> None:
        # aiohttp without the hook _StrictConnector overrides: no connection is reused
        strict = _StrictConnector.supported()
        connector = (_StrictConnector if strict else aiohttp.TCPConnector)(
            force_close=not strict,
            limit=server.max_connections,
            limit_per_host=0,
            ttl_dns_cache=300,
            keepalive_timeout=KEEPALIVE,
        )
        timeout = aiohttp.ClientTimeout(
            total=None, connect=server.connect_timeout, sock_read=server.read_timeout
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=timeout,
            auto_decompress=False,  # compressed answers are relayed as they are
            skip_auto_headers=("User-Agent", "Accept-Encoding", "Accept", "Content-Type"),
            cookie_jar=aiohttp.DummyCookieJar(),
            raise_for_status=False,
        )

    @property
    def closed(self) -> bool:
        return self._session.closed

    async def request(
        self, method: str, url: URL, headers: CIMultiDict[str], body: bytes
    ) -> _AiohttpAnswer:
        try:
            resp = await self._session.request(
                method,
                url,
                headers=headers,
                data=body if body else None,
                allow_redirects=False,
                compress=None,
            )
        except TimeoutError as exc:
            raise UpstreamTimeout("upstream timed out") from exc
        except (aiohttp.ClientError, OSError, UnicodeError) as exc:  # see h1.Client._connect
            raise UpstreamConnectError(f"upstream unreachable: {type(exc).__name__}") from exc
        return _AiohttpAnswer(resp)

    async def close(self) -> None:
        await self._session.close()


class _AiohttpAnswer:
    __slots__ = ("_resp", "headers", "reason", "status")

    def __init__(self, resp: aiohttp.ClientResponse) -> None:
        self._resp = resp
        self.status = resp.status
        self.reason = resp.reason
        self.headers = resp.headers

    async def readany(self) -> bytes:
        try:
            return await self._resp.content.readany()
        except TimeoutError as exc:
            raise UpstreamTimeout("upstream timed out") from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise UpstreamConnectError(f"upstream failed: {type(exc).__name__}") from exc

    def release(self) -> None:
        self._resp.release()

    def close(self) -> None:
        self._resp.close()


async def read_head(resp: Answer, limit: int) -> tuple[bytes, bool]:
    """Up to about ``limit`` bytes of the body, and whether that is all of it."""
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = await resp.readany()
        if not chunk:
            return b"".join(chunks), True
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks), False
