# The baseline: a bare aiohttp reverse proxy with no trimming, the least a Python proxy can
# cost. One ClientSession; method, path, query, headers and body relayed; the response
# streamed back with iter_any(). trimgate is measured as a ratio against this.

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncIterator

from aiohttp import ClientSession, ClientTimeout, TCPConnector, web

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)
SESSION = web.AppKey("session", ClientSession)
UPSTREAM = web.AppKey("upstream", str)


async def relay(request: web.Request) -> web.StreamResponse:
    body = await request.read()
    headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
    url = request.app[UPSTREAM] + request.rel_url.raw_path_qs
    async with request.app[SESSION].request(
        request.method, url, headers=headers, data=body, allow_redirects=False
    ) as up:
        resp = web.StreamResponse(status=up.status, reason=up.reason)
        for k, v in up.headers.items():
            if k.lower() not in HOP_BY_HOP:
                resp.headers.add(k, v)
        if up.content_length is not None:
            resp.content_length = up.content_length
        await resp.prepare(request)
        async for chunk in up.content.iter_any():
            await resp.write(chunk)
        await resp.write_eof()
        return resp


async def _session(app: web.Application) -> AsyncIterator[None]:
    connector = TCPConnector(limit=0, ttl_dns_cache=None, keepalive_timeout=30)
    timeout = ClientTimeout(total=None, sock_connect=10, sock_read=300)
    async with ClientSession(
        connector=connector,
        timeout=timeout,
        auto_decompress=False,
        skip_auto_headers=("User-Agent",),
    ) as session:
        app[SESSION] = session
        yield


def make_app(upstream: str) -> web.Application:
    app = web.Application(client_max_size=256 * 1024 * 1024)
    app[UPSTREAM] = upstream.rstrip("/")
    app.cleanup_ctx.append(_session)
    app.router.add_route("*", "/{tail:.*}", relay)
    return app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.passthrough")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8791)
    parser.add_argument("--upstream", required=True, help="base URL, e.g. http://127.0.0.1:8790")
    args = parser.parse_args(argv)
    try:
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    except ImportError:  # pragma: no cover
        pass
    web.run_app(
        make_app(args.upstream),
        host=args.host,
        port=args.port,
        access_log=None,
        print=None,
        backlog=2048,
    )


if __name__ == "__main__":
    main()
