"""Running the apps: one process, or N workers on one port."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest

import trimgate
from trimgate import logs
from trimgate.config import Config, config_warnings
from trimgate.proxy import otel
from trimgate.proxy.app import ADMIN_PATHS, CONFIG, PROXY, Shared, create_admin_app, create_app
from trimgate.proxy.front import KEEPALIVE, STALL, FrontSite
from trimgate.proxy.headwatch import WatchedSite
from trimgate.proxy.metrics import metrics_for

if TYPE_CHECKING:
    from trimgate.proxy.workers import WorkerLink

log = logging.getLogger("trimgate")

BACKLOG = 2048  # a burst of new connections (agents reconnecting) must not be refused
GC_THRESHOLDS = (20_000, 20, 20)  # the collector's generations, once start-up is frozen


def install_uvloop() -> None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency off Windows
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


async def run_server(
    config: Config,
    *,
    reuse_port: bool = False,
    relay_path: str | None = None,
    ready: asyncio.Event | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Serve until ``stop`` is set (or SIGINT / SIGTERM).

    ``relay_path``: this is one of several workers (see ``workers``): events go
    through the supervisor, metrics are exposed from every worker's files.
    """
    registry = CollectorRegistry()
    shared = Shared(config, registry, metrics_for(config, registry))
    output = None
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        output = _multiprocess_output()
    app = create_app(config, shared=shared, metrics_output=output)
    link = await _join_supervisor(relay_path, shared)
    runners = await _set_up_runners(config, app, shared, output)
    await _start_sites(config, runners, reuse_port=reuse_port)
    _log_listening(config)
    if relay_path is None:  # one process; with --workers the supervisor says it
        say_where(config)
    stop = stop or asyncio.Event()
    _stop_on_signals(stop)
    _freeze_start_up()
    if ready is not None:
        ready.set()
    try:
        await stop.wait()
    finally:
        for runner in reversed(runners):
            await runner.cleanup()
        if link is not None:
            await link.close()
        logs.flush()


async def _join_supervisor(relay_path: str | None, shared: Shared) -> WorkerLink | None:
    """As one of several workers: the link that relays events through the supervisor."""
    if relay_path is None:
        return None
    from trimgate.proxy.workers import WorkerLink

    link = WorkerLink(relay_path)
    await link.start(shared.hub.deliver)
    shared.hub.relay = link.send
    return link


async def _set_up_runners(
    config: Config, app: web.Application, shared: Shared, output: Callable[[], bytes] | None
) -> list[web.AppRunner]:
    """The proxy's runner, then the admin app's when it has a port of its own."""
    # Answers in flight get server.shutdown_grace on stop, on the front (FrontSite) and on
    # aiohttp's connections alike.
    grace = config.server.shutdown_grace
    # Cancel the handler (and so the upstream request) when the client goes
    # away; leave request bodies compressed, so that a gzip body is forwarded as
    # it came unless trimgate must change it.
    runners = [
        web.AppRunner(
            app,
            access_log=None,
            handler_cancellation=True,
            auto_decompress=False,
            shutdown_timeout=grace,
        )
    ]
    if config.server.admin_port is not None:
        runners.append(
            web.AppRunner(
                create_admin_app(shared, metrics_output=output),
                access_log=None,
                handler_cancellation=True,
                shutdown_timeout=grace,
            )
        )
    for runner in runners:
        await runner.setup()
    return runners


async def _start_sites(config: Config, runners: list[web.AppRunner], *, reuse_port: bool) -> None:
    host, port, admin_port = config.server.host, config.server.port, config.server.admin_port
    sites = [proxy_site(runners[0], host, port, reuse_port=reuse_port)]
    if admin_port is not None:
        sites.append(
            WatchedSite(
                runners[1], host, admin_port, stall=STALL, idle=KEEPALIVE, reuse_port=reuse_port
            )
        )
    for site in sites:
        await site.start()


def _log_listening(config: Config) -> None:
    log.info(
        "listening",
        extra={
            "event": "listening",
            "host": config.server.host,
            "port": config.server.port,
            "admin_port": config.server.admin_port,
            "upstreams": sorted(config.upstreams),
            "compiled_core": trimgate.compiled(),
        },
    )


def _stop_on_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        # not on the main thread (tests), or no signal support: stop via the event
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)


def _freeze_start_up() -> None:
    """Tune the garbage collector for serving, once everything long-lived is loaded."""
    # Everything loaded so far lives as long as the process: keep it out of the
    # collector's generations, so collections only walk per-request garbage.
    gc.collect()
    gc.freeze()
    # A parsed history is thousands of containers freed by reference counting, not
    # cycles; with the default young-generation threshold (700) parsing one 2 MB body
    # set off dozens of collections. 11% less CPU per 2 MB trim (bench/RESULTS.md).
    gc.set_threshold(*GC_THRESHOLDS)


def say_where(config: Config) -> None:
    """One line for people on stdout, when it is a terminal (the log lines are JSON)."""
    if sys.stdout.isatty():
        print(human_banner(config), file=sys.stdout, flush=True)


def human_banner(config: Config) -> str:
    """Where to point each SDK, and where the metrics and events are: one line."""
    host = config.server.host
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host:
        host = f"[{host}]"
    base = f"http://{host}:{config.server.port}"
    admin = (
        base if config.server.admin_port is None else f"http://{host}:{config.server.admin_port}"
    )
    sdk = {"openai": "/v1", "anthropic": "", "gemini": ""}
    parts = []
    seen: set[str] = set()
    for name, up in config.upstreams.items():
        if up.prefix is None and up.provider in seen:
            continue  # only a provider's default upstream is reached without a prefix
        if up.prefix is None:
            seen.add(up.provider)
        tail = sdk[up.provider]
        if up.provider == "openai" and up.base_url.endswith("/v1"):
            tail = ""  # clients send /chat/completions: the base_url has the /v1
        parts.append(f"{name} {base}{up.prefix or ''}{tail}")
    return (
        f"trimgate {trimgate.__version__} on {base}; SDK base URLs: {', '.join(parts)}; "
        f"metrics {admin}/metrics; events {admin}/api/events"
    )


def proxy_site(
    runner: web.AppRunner,
    host: str | None,
    port: int | None,
    *,
    reuse_port: bool = False,
) -> web.BaseSite:
    """The proxy app's listener: trimgate's front, or aiohttp's (``server.http_server``)."""
    app = runner.app
    config = app[CONFIG]
    if config.server.http_server == "aiohttp":
        return WatchedSite(
            runner, host, port, stall=STALL, idle=KEEPALIVE, reuse_port=reuse_port, backlog=BACKLOG
        )
    return FrontSite(
        runner,
        host,
        port,
        handle=app[PROXY].handle,
        bodies=app[PROXY].bodies,
        max_body=config.server.max_body_bytes,
        delegated=ADMIN_PATHS,
        reuse_port=reuse_port,
        backlog=BACKLOG,
        grace=config.server.shutdown_grace,
    )


def _multiprocess_output() -> Callable[[], bytes]:
    from prometheus_client import multiprocess

    def output() -> bytes:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry)

    return output


def serve(config: Config, *, workers: int = 1) -> None:
    otel.require(config)  # set but not installed: one line, before any worker starts
    for warning in config_warnings(config):  # once, before any worker starts
        log.warning("config_warning", extra={"event": "config_warning", "warning": warning})
    if workers > 1:
        from trimgate.proxy.workers import run_supervisor

        run_supervisor(config, workers)
        return
    install_uvloop()
    asyncio.run(run_server(config))
