"""Admin endpoints: health, metrics, the admin token, the admin port.

The contract: docs/reference.md, "Admin endpoints".

Admin paths are answered by trimgate itself and never forwarded upstream, whatever
the method, the token or the port.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gc
import socket
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer
from prometheus_client.parser import text_string_to_metric_families

from tests.fakes import FakeProvider, Reply, json_reply, openai_ok
from tests.proxy.bodies import openai_chat
from tests.proxy.conftest import MakeStack, Stack, config_for
from trimgate.proxy.app import ADMIN_PATHS
from trimgate.proxy.serve import GC_THRESHOLDS, run_server

TIMEOUT = 5.0
TOKEN = "s3cret"


def _basic(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode()


def _basic_part(value: str) -> str:
    """The base64 part of a Basic credential (a NUL, in no header, for any other value)."""
    scheme, _, rest = value.partition(" ")
    return rest if scheme == "Basic" else "\0"


GUARDED = ["/metrics", "/api/events/history", "/api/events", "/api/ws"]
OPEN = ["/healthz", "/readyz"]
WRONG_AUTH = [
    {},
    {"Authorization": "Bearer nope"},
    {"Authorization": f"Bearer {TOKEN}x"},
    {"Authorization": f"Basic {TOKEN}"},
    {"Authorization": TOKEN},
    {"Authorization": "Bearer"},
]


async def get_admin(
    session: aiohttp.ClientSession | Any, url: str, headers: dict[str, str] | None = None
) -> int:
    """GET an admin path (opening /api/ws as a WebSocket); returns the HTTP status."""
    if url.endswith("/api/ws"):
        try:
            ws = await session.ws_connect(url, headers=headers or {})
        except aiohttp.WSServerHandshakeError as exc:
            return exc.status
        await ws.close()
        return 101
    async with session.get(url, headers=headers or {}) as resp:
        return int(resp.status)  # a stream (/api/events) is closed unread


def sample(text: str, name: str, **labels: str) -> float | None:
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    return None


# --- health and metrics ------------------------------------------------------------


async def test_healthz_and_readyz(make_stack: MakeStack) -> None:
    stack = await make_stack()
    resp = await stack.client.get("/healthz")
    assert resp.status == 200 and await resp.json() == {"status": "ok"}
    resp = await stack.client.get("/readyz")
    assert resp.status == 200 and await resp.json() == {"status": "ready"}
    assert stack.fake.requests == []


async def test_metrics_in_prometheus_text_format(make_stack: MakeStack) -> None:
    stack = await make_stack()
    chat = await stack.client.post("/v1/chat/completions", json=openai_chat(8, model="small-1"))
    assert chat.status == 200 and chat.headers["x-trimgate-trimmed"] == "true"
    resp = await stack.client.get("/metrics")
    assert resp.status == 200
    assert resp.headers["Content-Type"].startswith("text/plain")
    text = await resp.text()
    assert "# TYPE trimgate_requests_total counter" in text
    labels = {"upstream": "openai", "provider": "openai", "model": "small-*", "status": "200"}
    assert sample(text, "trimgate_requests_total", **labels) == 1
    assert sample(text, "trimgate_trims_total", reason="preemptive") == 1
    assert sample(text, "trimgate_event_subscribers") == 0
    assert sample(text, "trimgate_events_dropped_total") == 0
    assert len(stack.fake.requests) == 1  # the chat request only


async def test_admin_paths_are_never_forwarded(make_stack: MakeStack) -> None:
    stack = await make_stack()
    for path in sorted(ADMIN_PATHS):
        status = await get_admin(stack.client.session, f"{stack.base}{path}")
        assert status in (200, 101), path
        for method in ("POST", "PUT", "PATCH", "DELETE"):
            resp = await stack.client.request(method, path, json=openai_chat(1))
            assert resp.status == 405, (method, path)
            assert resp.headers["Allow"] == "GET, HEAD"
    assert stack.fake.requests == []


# --- the admin token ---------------------------------------------------------------------


@pytest.fixture
async def guarded(make_stack: MakeStack) -> Stack:
    # no usage in the answers: calibration keeps the estimate, so every request trims alike
    return await make_stack(
        FakeProvider(lambda r: json_reply(openai_ok())), server={"admin_token": TOKEN}
    )


@pytest.mark.parametrize("path", GUARDED)
async def test_admin_token_required(guarded: Stack, path: str) -> None:
    url = f"{guarded.base}{path}"
    session = guarded.client.session
    for headers in WRONG_AUTH:
        assert await get_admin(session, url, headers) == 401, headers
    resp = await guarded.client.get(path)
    assert resp.headers["WWW-Authenticate"] == "Bearer"
    assert "admin_token" in (await resp.json())["error"]
    assert TOKEN not in await resp.text()
    ok = 101 if path == "/api/ws" else 200
    assert await get_admin(session, url, {"Authorization": f"Bearer {TOKEN}"}) == ok
    assert guarded.fake.requests == []


@pytest.mark.parametrize("path", OPEN)
async def test_health_never_needs_the_token(guarded: Stack, path: str) -> None:
    for headers in [*WRONG_AUTH, {"Authorization": f"Bearer {TOKEN}"}]:
        resp = await guarded.client.get(path, headers=headers)
        assert resp.status == 200, headers
    assert guarded.fake.requests == []


async def test_token_guards_the_event_streams_content(guarded: Stack) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    chat = await guarded.client.post("/v1/chat/completions", json=openai_chat(8, model="small-1"))
    assert chat.headers["x-trimgate-trimmed"] == "true"
    resp = await guarded.client.get("/api/events/history")
    assert resp.status == 401 and "events" not in await resp.json()
    resp = await guarded.client.get("/api/events/history", headers=auth)
    assert len((await resp.json())["events"]) == 1
    async with guarded.client.ws_connect("/api/ws", headers=auth) as ws:
        chat = await guarded.client.post(
            "/v1/chat/completions", json=openai_chat(8, model="small-1")
        )
        assert (await ws.receive_json(timeout=TIMEOUT))["type"] == "history_trimmed"


async def test_token_never_reaches_upstream(guarded: Stack) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    for path in sorted(ADMIN_PATHS):
        for method in ("POST", "PUT", "DELETE"):
            resp = await guarded.client.request(method, path, headers=auth)
            assert resp.status in (401, 405), (method, path)
    assert guarded.fake.requests == []


async def test_token_does_not_guard_proxied_paths(guarded: Stack) -> None:
    resp = await guarded.client.post(
        "/v1/chat/completions", json=openai_chat(1, size=10, model="small-1")
    )
    assert resp.status == 200
    resp = await guarded.client.get("/v1/models")
    assert resp.status == 200
    assert [r.path for r in guarded.fake.requests] == ["/v1/chat/completions", "/v1/models"]


# --- the admin port ----------------------------------------------------------------------


def free_ports(count: int) -> list[int]:
    socks = [socket.socket() for _ in range(count)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@contextlib.asynccontextmanager
async def running(fake: FakeProvider, **server: Any) -> AsyncIterator[tuple[int, int | None]]:
    """trimgate via run_server on free loopback ports, stopped with its stop event."""
    fake_server = TestServer(fake.app, host="127.0.0.1")
    await fake_server.start_server()
    port, admin_port = free_ports(2)
    server = {"host": "127.0.0.1", "port": port, **server}
    if server.pop("admin", False):
        server["admin_port"] = admin_port
    config = config_for(str(fake_server.make_url("")).rstrip("/"), server=server)
    ready, stop = asyncio.Event(), asyncio.Event()
    thresholds = gc.get_threshold()
    task = asyncio.create_task(run_server(config, ready=ready, stop=stop))
    try:
        await asyncio.wait_for(ready.wait(), TIMEOUT)
        assert gc.get_threshold() == GC_THRESHOLDS  # as serving sets them
        yield port, config.server.admin_port
        stop.set()
        await asyncio.wait_for(task, TIMEOUT)
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await fake_server.close()
        gc.set_threshold(*thresholds)


async def test_admin_port_serves_admin_endpoints_and_proxy_port_does_not() -> None:
    fake = FakeProvider()
    async with running(fake, admin=True) as (port, admin_port), aiohttp.ClientSession() as http:
        assert admin_port is not None
        proxy = f"http://127.0.0.1:{port}"
        admin = f"http://127.0.0.1:{admin_port}"
        for path in sorted(ADMIN_PATHS):
            assert await get_admin(http, admin + path) in (200, 101), path
            if path != "/api/ws":
                for method in ("GET", "POST", "HEAD"):
                    async with http.request(method, proxy + path) as resp:
                        assert resp.status == 404, (method, path)
            else:
                assert await get_admin(http, proxy + path) == 404
        assert fake.requests == []
        async with http.get(f"{admin}/readyz") as resp:
            assert await resp.json() == {"status": "ready"}

        # chat goes through the proxy port; its signals are seen on the admin port
        async with http.post(
            f"{proxy}/v1/chat/completions", json=openai_chat(8, model="small-1")
        ) as resp:
            assert resp.status == 200 and resp.headers["x-trimgate-trimmed"] == "true"
            request_id = resp.headers["x-trimgate-request-id"]
        assert [r.path for r in fake.requests] == ["/v1/chat/completions"]
        async with http.get(f"{admin}/api/events/history") as resp:
            (event,) = (await resp.json())["events"]
            assert event["request_id"] == request_id
        async with http.get(f"{admin}/metrics") as resp:
            assert sample(await resp.text(), "trimgate_requests_total", status="200") == 1

        # the admin port proxies nothing
        async with http.post(f"{admin}/v1/chat/completions", json=openai_chat(1)) as resp:
            assert resp.status == 404
        assert len(fake.requests) == 1
    # stopped: both ports are closed
    for p in (port, admin_port):
        with pytest.raises(aiohttp.ClientConnectionError):
            async with aiohttp.ClientSession() as http:
                await http.get(f"http://127.0.0.1:{p}/healthz")


async def test_admin_port_with_token() -> None:
    fake = FakeProvider()
    async with (
        running(fake, admin=True, admin_token=TOKEN) as (_, admin_port),
        aiohttp.ClientSession() as http,
    ):
        admin = f"http://127.0.0.1:{admin_port}"
        for path in GUARDED:
            assert await get_admin(http, admin + path) == 401
            ok = await get_admin(http, admin + path, {"Authorization": f"Bearer {TOKEN}"})
            assert ok in (200, 101)
        for path in OPEN:
            assert await get_admin(http, admin + path) == 200
    assert fake.requests == []


@pytest.mark.parametrize("http_server", ["trimgate", "aiohttp"])
async def test_stop_cuts_an_answer_in_flight_once_the_grace_is_up(http_server: str) -> None:
    """``server.shutdown_grace`` bounds a stop, on trimgate's front and on aiohttp's
    server alike (both used to wait 60 s, whatever the config)."""
    fake = FakeProvider().then(Reply(hang=True))
    async with aiohttp.ClientSession() as http:
        async with running(fake, shutdown_grace=0.5, http_server=http_server) as (port, _):
            asking = asyncio.create_task(
                http.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=openai_chat(2))
            )
            for _ in range(500):
                if fake.requests:
                    break
                await asyncio.sleep(0.01)
            assert fake.requests
            started = time.perf_counter()
        # running() set the stop event and waited (at most TIMEOUT) for run_server to end
        assert time.perf_counter() - started < 3.0
        with pytest.raises(aiohttp.ClientError):
            await asyncio.wait_for(asking, TIMEOUT)


@pytest.mark.parametrize("admin", [False, True], ids=["one-port", "admin-port"])
async def test_stop_does_not_wait_for_connected_subscribers(admin: bool) -> None:
    """A dashboard that stays connected must not hold up a shutdown."""
    fake = FakeProvider()
    async with aiohttp.ClientSession() as http:
        async with running(fake, admin=admin) as (port, admin_port):
            base = f"http://127.0.0.1:{admin_port or port}"
            sse = await http.get(f"{base}/api/events")
            assert sse.status == 200
            ws = await http.ws_connect(f"{base}/api/ws")
            started = time.perf_counter()
        # running() waited (bounded) for run_server to return after the stop event
        assert time.perf_counter() - started < 2.0
        msg = await ws.receive(timeout=TIMEOUT)
        assert msg.type is aiohttp.WSMsgType.CLOSE
        assert msg.data == aiohttp.WSCloseCode.GOING_AWAY  # a close frame, not a dropped line
        body = await asyncio.wait_for(sse.read(), TIMEOUT)  # the stream ended
        assert body.startswith(b"retry: 3000\n\n")
        sse.release()
        await ws.close()


@pytest.mark.parametrize("http_server", ["trimgate", "aiohttp"])
@pytest.mark.parametrize(
    ("method", "path", "headers"),
    [
        ("GET", "/metrics/", {"Authorization": f"Bearer {TOKEN}"}),
        ("GET", "/api/events/", {"Authorization": f"bearer  {TOKEN}"}),
        ("GET", "/Metrics", {"Authorization": f"Bearer {TOKEN}"}),
        ("GET", "/metrics%2F", {"Authorization": f"Bearer\t{TOKEN}"}),
        ("GET", "/api/events/x?y", {"Authorization": f"Bearer {TOKEN}"}),
        ("POST", "/metrics;x", {"Authorization": f"Token {TOKEN}"}),
        ("POST", "/v1/chat/completions", {"Authorization": f"Bearer {TOKEN}"}),
        ("POST", "/v1/messages", {"x-api-key": TOKEN}),
        ("POST", f"/v1beta/models/g:generateContent?alt=sse&key={TOKEN}", {}),
        ("POST", "/v1beta/models/g:generateContent", {"x-goog-api-key": TOKEN}),
        # Basic, Proxy-Authorization, a cookie, another query name
        ("GET", "/metrics/", {"Authorization": "Basic " + _basic("scraper", TOKEN)}),
        ("GET", "/metrics/", {"Authorization": "Basic " + _basic(TOKEN, "")}),
        ("GET", "/metrics/", {"Proxy-Authorization": f"Bearer {TOKEN}"}),
        ("GET", "/metrics/", {"Cookie": f"theme=dark; admin={TOKEN}; x=1"}),
        ("POST", f"/v1/chat/completions?token={TOKEN}", {}),
    ],
)
async def test_the_admin_token_never_goes_upstream(
    make_stack: MakeStack, method: str, path: str, headers: dict[str, str]
) -> None:
    stack = await make_stack(server={"admin_token": TOKEN})
    resp = await stack.client.request(method, path, headers=headers, json=openai_chat(1))
    assert resp.status == 404
    assert resp.headers["x-trimgate-error"] == "true"
    assert TOKEN not in await resp.text()
    assert stack.fake.requests == []
    # another credential on the same paths is forwarded as usual
    other = {k: v.replace(TOKEN, "sk-user") for k, v in headers.items()}
    other = {k: v.replace(_basic_part(v), _basic("scraper", "sk-user")) for k, v in other.items()}
    resp = await stack.client.request(
        method, path.replace(TOKEN, "sk-user"), headers=other, json=openai_chat(1)
    )
    assert resp.status == 200 and len(stack.fake.requests) == 1


@pytest.mark.parametrize(
    "headers",
    [
        {"Authorization": f"Bearer sk-{TOKEN}-user"},  # the token inside a longer key
        {"Cookie": f"session=x{TOKEN}"},
        {"User-Agent": f"agent/{TOKEN}"},  # not a credential header
        {"Authorization": "Basic " + _basic("user", "pass" + TOKEN)},
    ],
)
async def test_a_credential_that_only_contains_the_admin_token_is_forwarded(
    make_stack: MakeStack, headers: dict[str, str]
) -> None:
    stack = await make_stack(server={"admin_token": TOKEN})
    resp = await stack.client.post("/v1/chat/completions", headers=headers, json=openai_chat(1))
    assert resp.status == 200 and len(stack.fake.requests) == 1


@pytest.mark.parametrize("token", ["YWRtaW4tdG9rZW4=", "team:s3cret"])
@pytest.mark.parametrize(
    "carry",
    [
        lambda t: {"Authorization": f"Bearer {t}"},
        lambda t: {"x-api-key": t},
        lambda t: {"Cookie": f"theme=dark; admin={t}"},
        lambda t: {"Authorization": "Basic " + _basic("scraper", t)},
    ],
)
async def test_tokens_with_padding_or_colons_never_go_upstream(
    make_stack: MakeStack, token: str, carry: Callable[[str], dict[str, str]]
) -> None:
    stack = await make_stack(server={"admin_token": token})
    resp = await stack.client.get("/metrics/", headers=carry(token))
    assert resp.status == 404 and stack.fake.requests == []
