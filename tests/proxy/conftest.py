"""Fixtures: a fake provider on loopback and trimgate in front of it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry

from tests.fakes import FakeProvider
from trimgate.config import Config, parse_config
from trimgate.proxy.app import HUB, create_app


async def no_sleep(_: float) -> None:
    return None


@dataclass
class Stack:
    fake: FakeProvider
    fake_server: TestServer
    server: TestServer
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
    }
    for key, value in sections.items():
        if key in data and isinstance(value, dict) and isinstance(data[key], dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return parse_config(data)


@pytest.fixture
def upstream_client() -> str:
    """``server.upstream_client`` of the stacks; a module may parametrize it over both."""
    return "trimgate"


@pytest.fixture
async def make_stack(upstream_client: str) -> AsyncIterator[MakeStack]:
    servers: list[TestServer] = []
    clients: list[TestClient[Any, Any]] = []

    async def make(fake: FakeProvider | None = None, **sections: Any) -> Stack:
        fake = fake or FakeProvider()
        sections["server"] = {"upstream_client": upstream_client, **sections.get("server", {})}
        fake_server = TestServer(fake.app, host="127.0.0.1")
        await fake_server.start_server(auto_decompress=False)  # record bodies as sent
        servers.append(fake_server)
        config = config_for(str(fake_server.make_url("")).rstrip("/"), **sections)
        registry = CollectorRegistry()
        app = create_app(config, registry=registry, sleep=no_sleep)
        server = TestServer(app, host="127.0.0.1")
        # as trimgate serve runs it (TestServer adds handler_cancellation=True)
        await server.start_server(auto_decompress=False)
        client: TestClient[Any, Any] = TestClient(server)
        await client.start_server()
        clients.append(client)
        return Stack(fake, fake_server, server, client, registry, app)

    yield make
    for c in clients:
        await c.close()
    for s in servers:
        await s.close()
