"""Running the apps: one process, or N workers on one port."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal

from aiohttp import web
from prometheus_client import CollectorRegistry

from trimgate.config import Config
from trimgate.proxy.app import Shared, create_admin_app, create_app
from trimgate.proxy.metrics import Metrics

log = logging.getLogger("trimgate")


def _install_uvloop() -> None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency off Windows
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


async def run_server(
    config: Config,
    *,
    reuse_port: bool = False,
    ready: asyncio.Event | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    registry = CollectorRegistry()
    shared = Shared(config, registry, Metrics(registry))
    app = create_app(config, shared=shared)
    # Cancel the handler (and so the upstream request) when the client goes
    # away; leave request bodies compressed, so that a gzip body is forwarded as
    # it came unless trimgate must change it.
    runners = [
        web.AppRunner(app, access_log=None, handler_cancellation=True, auto_decompress=False)
    ]
    if config.server.admin_port is not None:
        runners.append(web.AppRunner(create_admin_app(shared), access_log=None))
    for runner in runners:
        await runner.setup()
    sites = [web.TCPSite(runners[0], config.server.host, config.server.port, reuse_port=reuse_port)]
    if config.server.admin_port is not None:
        sites.append(
            web.TCPSite(
                runners[1], config.server.host, config.server.admin_port, reuse_port=reuse_port
            )
        )
    for site in sites:
        await site.start()
    log.info(
        "listening",
        extra={
            "event": "listening",
            "host": config.server.host,
            "port": config.server.port,
            "admin_port": config.server.admin_port,
            "upstreams": sorted(config.upstreams),
        },
    )
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        # not on the main thread (tests), or no signal support: stop via the event
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
    if ready is not None:
        ready.set()
    try:
        await stop.wait()
    finally:
        for runner in reversed(runners):
            await runner.cleanup()


def serve(config: Config, *, workers: int = 1) -> None:
    _install_uvloop()
    asyncio.run(run_server(config))
