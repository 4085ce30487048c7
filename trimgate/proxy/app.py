"""create_app: the aiohttp application, its typed state and admin endpoints."""

from __future__ import annotations

import asyncio
import hmac
import random
from collections.abc import AsyncIterator, Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from trimgate.config import Config
from trimgate.proxy import h1
from trimgate.proxy.answers import refuse
from trimgate.proxy.events import EventHub
from trimgate.proxy.forward import Proxy
from trimgate.proxy.front import FRONTS, drain_fronts
from trimgate.proxy.metrics import Metrics, metrics_for
from trimgate.proxy.routing import NOT_AN_OPEN_PROXY
from trimgate.proxy.upstream import UpstreamClient, make_client

Sleep = Callable[[float], Awaitable[None]]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

CONFIG = web.AppKey("config", Config)
METRICS = web.AppKey("metrics", Metrics)
HUB = web.AppKey("hub", EventHub)
PROXY = web.AppKey("proxy", Proxy)
REGISTRY_KEY = web.AppKey("registry", CollectorRegistry)

ADMIN_PATHS = frozenset(
    {"/metrics", "/healthz", "/readyz", "/api/events", "/api/events/history", "/api/ws"}
)
OPEN_PATHS = frozenset({"/healthz", "/readyz"})  # orchestrators probe these without a token


class Shared:
    """What the proxy app and a separate admin app have in common."""

    def __init__(self, config: Config, registry: CollectorRegistry, metrics: Metrics) -> None:
        self.config = config
        self.registry = registry
        self.metrics = metrics
        self.hub = EventHub(metrics)
        self.client: UpstreamClient | None = None

    def get_client(self) -> UpstreamClient:
        assert self.client is not None, "the upstream client lives in the app's cleanup_ctx"
        return self.client


def create_app(
    config: Config,
    *,
    registry: CollectorRegistry | None = None,
    sleep: Sleep = asyncio.sleep,
    metrics_output: Callable[[], bytes] | None = None,
    admin: bool | None = None,
    shared: Shared | None = None,
) -> web.Application:
    """The proxy application.

    ``admin`` (default: no separate admin port configured) mounts the admin
    endpoints on this app. ``shared`` lets a separate admin app (see
    ``create_admin_app``) see the same hub and metrics.
    """
    if shared is None:
        registry = registry if registry is not None else CollectorRegistry()
        shared = Shared(config, registry, metrics_for(config, registry))
    if admin is None:
        admin = config.server.admin_port is None
    app = web.Application(client_max_size=config.server.max_body_bytes, middlewares=[_no_connect])
    proxy = Proxy(
        config, metrics=shared.metrics, hub=shared.hub, client=shared.get_client, sleep=sleep
    )
    app[CONFIG] = config
    app[METRICS] = shared.metrics
    app[HUB] = shared.hub
    app[PROXY] = proxy
    app[REGISTRY_KEY] = shared.registry
    app.cleanup_ctx.append(_upstream_client(config, shared, proxy))
    # the admin paths first: the proxy's catch-all would forward them upstream
    if admin:
        _admin_routes(app, shared, metrics_output)
    else:
        _admin_elsewhere(app)
    _proxy_route(app, proxy)
    _shutdown_steps(app, proxy)
    return app


def _upstream_client(
    config: Config, shared: Shared, proxy: Proxy
) -> Callable[[web.Application], AsyncIterator[None]]:
    """The cleanup context that opens the upstream client before serving, closes it (and
    the proxy's examination threads and process) after."""

    async def client_ctx(_: web.Application) -> AsyncIterator[None]:
        if any(u.base_url.startswith("https:") for u in config.upstreams.values()):
            # the trust store is read from disk: once, off the event loop, before serving
            await asyncio.get_running_loop().run_in_executor(None, h1.default_ssl_context)
        shared.client = make_client(config.server)
        try:
            yield
        finally:
            await proxy.close()
            await shared.client.close()
            shared.client = None

    return client_ctx


def _admin_elsewhere(app: web.Application) -> None:
    """The admin paths on the proxy app when the admin app has a port of its own: 404."""

    async def not_here(request: web.Request) -> web.Response:
        return web.json_response({"error": "served on the admin port"}, status=404)

    for path in ADMIN_PATHS:
        app.router.add_route("*", path, not_here)


def _proxy_route(app: web.Application, proxy: Proxy) -> None:
    async def proxied(request: web.Request) -> web.StreamResponse:
        response = await proxy.handle(request)
        assert response is not None  # only a FrontRequest is answered in place
        return response

    app.router.add_route("*", "/{tail:.*}", proxied)


def _shutdown_steps(app: web.Application, proxy: Proxy) -> None:
    # trimgate's front (front.FrontSite) registers here; its answers in flight are waited
    # for once aiohttp has closed its idle connections and the event streams have ended
    app[FRONTS] = []

    async def close_websockets(_: web.Application) -> None:
        await proxy.websockets.shutdown()

    app.on_shutdown.append(close_websockets)  # relayed WebSockets end with 1001
    app.on_shutdown.append(drain_fronts)

    async def end_lookups(_: web.Application) -> None:
        await proxy.lookups.close()  # before the upstream client closes (cleanup_ctx)

    app.on_shutdown.append(end_lookups)
    telemetry = proxy.otel
    if telemetry is not None:

        async def end_otel(_: web.Application) -> None:  # once the answers are done
            await asyncio.to_thread(telemetry.shutdown)  # exports what is pending

        app.on_cleanup.append(end_otel)


@web.middleware
async def _no_connect(request: web.Request, handler: Handler) -> web.StreamResponse:
    """CONNECT gets the proxy's 400 refusal: aiohttp's router never hands it to a route
    (its target is an authority, not a path), so it would otherwise be aiohttp's 404."""
    if request.method == "CONNECT":
        return refuse(f"{random.getrandbits(64):016x}", NOT_AN_OPEN_PROXY)
    return await handler(request)


def create_admin_app(
    shared: Shared, *, metrics_output: Callable[[], bytes] | None = None
) -> web.Application:
    app = web.Application()
    _admin_routes(app, shared, metrics_output)
    return app


def _admin_routes(
    app: web.Application, shared: Shared, metrics_output: Callable[[], bytes] | None
) -> None:
    hub = shared.hub
    guarded = _admin_guard(shared.config.server.admin_token)
    handlers: dict[str, Handler] = {
        "/metrics": _metrics_handler(shared.registry, metrics_output),
        "/healthz": _healthz,
        "/readyz": _readyz_handler(shared),
        "/api/events": hub.handle_sse,
        "/api/events/history": hub.handle_history,
        "/api/ws": hub.handle_ws,
    }
    for path, handler in handlers.items():
        app.router.add_get(path, handler if path in OPEN_PATHS else guarded(handler))
        # any other method: 405 here, never the proxy's catch-all (that would forward
        # an admin path, and its admin token, upstream)
        app.router.add_route("*", path, _admin_not_allowed)

    async def end_streams(_: web.Application) -> None:
        hub.close()  # connected SSE/WebSocket clients must not hold up a shutdown

    app.on_shutdown.append(end_streams)


def _admin_guard(token: str | None) -> Callable[[Handler], Handler]:
    """Puts a handler behind the admin token (a wrapper, not a middleware: the
    proxied requests on the same app pay nothing for it)."""

    def guarded(handler: Handler) -> Handler:
        if not token:
            return handler
        expected = f"Bearer {token}".encode()

        async def check(request: web.Request) -> web.StreamResponse:
            given = request.headers.get("Authorization", "").encode("utf-8", "surrogateescape")
            if not hmac.compare_digest(given, expected):
                return web.json_response(
                    {"error": "admin endpoints need Authorization: Bearer <admin_token>"},
                    status=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
            return await handler(request)

        return check

    return guarded


def _metrics_handler(
    registry: CollectorRegistry, metrics_output: Callable[[], bytes] | None
) -> Handler:
    def output() -> bytes:
        if metrics_output is not None:
            return metrics_output()
        return generate_latest(registry)

    async def metrics(request: web.Request) -> web.Response:
        body = await asyncio.get_running_loop().run_in_executor(None, output)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    return metrics


async def _healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


def _readyz_handler(shared: Shared) -> Handler:
    async def readyz(request: web.Request) -> web.Response:
        # ready once the proxy app's upstream client is open (also seen from an admin app)
        ready = shared.client is not None and not shared.client.closed
        return web.json_response(
            {"status": "ready" if ready else "starting"}, status=200 if ready else 503
        )

    return readyz


async def _admin_not_allowed(request: web.Request) -> web.Response:
    return web.json_response(
        {"error": "admin endpoints answer GET only"}, status=405, headers={"Allow": "GET, HEAD"}
    )
