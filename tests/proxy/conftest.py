"""Fixtures: a fake provider on loopback and trimgate in front of it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import BaseTestServer, TestClient, TestServer
from prometheus_client import CollectorRegistry
from yarl import URL

from tests.fakes import FakeProvider
from trimgate.config import Config, parse_config
from trimgate.proxy.app import HUB, create_app
from trimgate.proxy.serve import proxy_site


async def no_sleep(_: float) -> None:
    return None


class ProxyTestServer(TestServer):
    """The app behind the listener ``trimgate serve`` gives it (``server.http_server``):
    trimgate's front, or aiohttp's."""

    async def start_server(
        self, loop: asyncio.AbstractEventLoop | None = None, **kwargs: Any
    ) -> None:
        if self.runner:
            return
        self.runner = runner = await self._make_runner(handler_cancellation=True, **kwargs)
        await runner.setup()
        assert isinstance(runner, web.AppRunner)
        site = proxy_site(runner, "127.0.0.1", 0)
        await site.start()
        server: Any = site._server
        self.host, self.port = "127.0.0.1", server.sockets[0].getsockname()[1]
        self.scheme = "http"
        self._root = URL(f"http://127.0.0.1:{self.port}")


@dataclass
class Stack:
    fake: FakeProvider
    fake_server: TestServer
    server: BaseTestServer
    client: TestClient[Any, Any]
    registry: CollectorRegistry
    app: web.Application

    @property
    def base(self) -> str:
        return str(self.server.make_url("")).rstrip("/")

    def metric(self, name: str, **labels: str) -> float:
        value = self.registry.get_sample_value(name, labels)
        return 0.0 if value is None else value

    def events(self) -> list[dict[str, Any]]:
        return self.app[HUB].history()


MakeStack = Callable[..., Awaitable[Stack]]


async def raw_request(port: int, request: bytes) -> bytes:
    """Send raw bytes to a loopback port and read the answer (bounded in time)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    try:
        return await asyncio.wait_for(reader.read(65536), 5)
    finally:
        writer.close()


def config_for(fake_url: str, **sections: Any) -> Config:
    data: dict[str, Any] = {
        "upstreams": {
            "openai": {"provider": "openai", "base_url": fake_url},
            "anthropic": {"provider": "anthropic", "base_url": fake_url},
            "gemini": {"provider": "gemini", "base_url": fake_url},
        },
        "models": [
            {"match": "small-*", "context_window": 1000},
            {"match": "tiny-*", "context_window": 300},
        ],
        # Minimal cuts and no anchor: these stacks test the whole-turn rules themselves;
        # tests of the cut grid and the anchor give their own ``trimming`` keys.
        "trimming": {"cut_step": 0, "keep_anchor": False},
    }
    for key, value in sections.items():
        if key in data and isinstance(value, dict) and isinstance(data[key], dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return parse_config(data)


# (server.http_server, server.upstream_client) of every stack, for ``every_stack`` modules
EVERY_STACK = [(s, c) for s in ("trimgate", "aiohttp") for c in ("trimgate", "aiohttp")]
EVERY_STACK_IDS = ["front+h1", "front+aiohttp-client", "aiohttp-server+h1", "aiohttp-server+client"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test marked ``every_stack`` (``pytestmark = pytest.mark.every_stack``) runs on
    both HTTP fronts, each with both upstream clients."""
    marked = metafunc.definition.get_closest_marker("every_stack") is not None
    if marked and "stack_kind" in metafunc.fixturenames:
        metafunc.parametrize("stack_kind", EVERY_STACK, ids=EVERY_STACK_IDS, indirect=True)


@pytest.fixture
def stack_kind(request: pytest.FixtureRequest) -> tuple[str, str]:
    """(server.http_server, server.upstream_client): trimgate's own unless the test is
    marked ``every_stack``; a module may also override ``http_server`` or
    ``upstream_client`` with fixtures of its own."""
    kind: tuple[str, str] = getattr(request, "param", ("trimgate", "trimgate"))
    return kind


@pytest.fixture
def upstream_client(stack_kind: tuple[str, str]) -> str:
    """``server.upstream_client`` of the stacks."""
    return stack_kind[1]


@pytest.fixture
def http_server(stack_kind: tuple[str, str]) -> str:
    """``server.http_server`` of the stacks."""
    return stack_kind[0]


@contextlib.asynccontextmanager
async def stacks(upstream_client: str, http_server: str) -> AsyncIterator[MakeStack]:
    """Makes stacks, and closes them all at the end (also outside pytest's loop)."""
    servers: list[BaseTestServer] = []
    clients: list[TestClient[Any, Any]] = []

    async def make(fake: FakeProvider | None = None, **sections: Any) -> Stack:
        fake = fake or FakeProvider()
        sections["server"] = {
            "upstream_client": upstream_client,
            "http_server": http_server,
            **sections.get("server", {}),
        }
        fake_server = TestServer(fake.app, host="127.0.0.1")
        await fake_server.start_server(auto_decompress=False)  # record bodies as sent
        servers.append(fake_server)
        config = config_for(str(fake_server.make_url("")).rstrip("/"), **sections)
        registry = CollectorRegistry()
        app = create_app(config, registry=registry, sleep=no_sleep)
        server = ProxyTestServer(app, host="127.0.0.1")
        # as trimgate serve runs it (TestServer adds handler_cancellation=True)
        await server.start_server(auto_decompress=False)
        client: TestClient[Any, Any] = TestClient(server)
        await client.start_server()
        clients.append(client)
        return Stack(fake, fake_server, server, client, registry, app)

    try:
        yield make
    finally:
        for c in clients:
            await c.close()
        for s in servers:
            await s.close()


@pytest.fixture
async def make_stack(upstream_client: str, http_server: str) -> AsyncIterator[MakeStack]:
    async with stacks(upstream_client, http_server) as make:
        yield make
