"""WebSockets through trimgate: the Responses WebSocket mode (the official openai SDK's
``client.responses.connect()``) examined, trimmed and retried; other upgrades relayed
untouched; refusals, closes, limits and the open-proxy rules.

The upstream is bench/agent_fake.py's Responses WebSocket mode (the fake for Codex) or,
for Realtime-style sessions and closes, a small aiohttp app of this module.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest
from aiohttp import WSMsgType, web
from aiohttp.test_utils import TestServer
from prometheus_client import CollectorRegistry
from websockets.exceptions import InvalidStatus

from bench.agent_fake import AgentFake, Script, responses_events, rough_tokens
from tests.proxy.conftest import ProxyTestServer, config_for, no_sleep, raw_request
from trimgate.proxy.app import HUB, create_app
from trimgate.proxy.examine import Chat, Examiner

pytestmark = pytest.mark.parametrize("http_server", ["trimgate", "aiohttp"], indirect=True)

CODEX_101 = {"x-models-etag": "etag-7", "x-reasoning-included": "true", "openai-model": "big-x"}
MODELS = [
    {"match": "small-*", "context_window": 1000},
    {"match": "big-*", "context_window": 100000},
]


@pytest.fixture
def http_server(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@dataclass
class WsStack:
    upstream: TestServer
    proxy: ProxyTestServer
    registry: CollectorRegistry
    app: web.Application

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.proxy.port}"

    @property
    def upstream_base(self) -> str:
        return str(self.upstream.make_url("")).rstrip("/")

    def metric(self, name: str, **labels: str) -> float:
        value = self.registry.get_sample_value(name, labels)
        return 0.0 if value is None else value

    def events(self) -> list[dict[str, Any]]:
        return self.app[HUB].history()


MakeWs = Callable[..., Awaitable[WsStack]]


@pytest.fixture
async def make_ws(http_server: str) -> AsyncIterator[MakeWs]:
    servers: list[TestServer] = []

    async def make(upstream: web.Application, **sections: Any) -> WsStack:
        fake_server = TestServer(upstream, host="127.0.0.1")
        await fake_server.start_server()
        servers.append(fake_server)
        sections["server"] = {"http_server": http_server, **sections.get("server", {})}
        sections.setdefault("models", MODELS)
        config = config_for(str(fake_server.make_url("")).rstrip("/"), **sections)
        registry = CollectorRegistry()
        app = create_app(config, registry=registry, sleep=no_sleep)
        proxy = ProxyTestServer(app, host="127.0.0.1")
        await proxy.start_server()
        servers.append(proxy)
        return WsStack(fake_server, proxy, registry, app)

    try:
        yield make
    finally:
        for s in reversed(servers):
            await s.close()


def turns(n: int, size: int = 300) -> list[dict[str, Any]]:
    """``n`` user/assistant turns of about ``size`` characters each message."""
    items: list[dict[str, Any]] = []
    for i in range(n):
        items.append({"role": "user", "content": f"question {i} " + "q" * size})
        items.append({"role": "assistant", "content": f"answer {i} " + "a" * size})
    return items


def sdk(base: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=base + "/v1", api_key="sk-test", max_retries=0)


async def one_response(conn: Any, event: dict[str, Any]) -> list[Any]:
    """Send a ``response.create`` and read its events to the last."""
    await conn.send(event)
    seen: list[Any] = []
    while True:
        ev = await asyncio.wait_for(conn.recv(), 10)
        seen.append(ev)
        if ev.type in ("response.completed", "response.failed", "error"):
            return seen


def creates(fake: AgentFake) -> list[dict[str, Any]]:
    return [r.body for r in fake.records if r.transport == "ws"]


# --- the Responses WebSocket mode through the official SDK -------------------------------


async def test_sdk_several_creates_on_one_connection(make_ws: MakeWs) -> None:
    fake = AgentFake(websocket=True, script=Script(rounds=0), ws_headers=CODEX_101)
    stack = await make_ws(fake.app())
    client = sdk(stack.base)
    async with client.responses.connect(
        extra_headers={"openai-beta": "responses_websockets=2026-02-06"}
    ) as conn:
        warm = await one_response(
            conn,
            {
                "type": "response.create",
                "model": "big-x",
                "input": [{"role": "developer", "content": "be brief"}],
                "generate": False,
            },
        )
        assert [e.type for e in warm][-1] == "response.completed"
        prev = warm[-1].response.id
        for text in ("hello", "again"):
            seen = await one_response(
                conn,
                {
                    "type": "response.create",
                    "model": "big-x",
                    "previous_response_id": prev,
                    "input": [{"role": "user", "content": text}],
                },
            )
            assert seen[0].type == "response.created"
            assert seen[-1].type == "response.completed"
            assert seen[-1].response.output[0].content[0].text == "ok"
            prev = seen[-1].response.id
    handshakes = [r for r in fake.records if r.transport == "ws-handshake"]
    assert len(handshakes) == 1 and handshakes[0].status == 101
    headers = handshakes[0].headers
    assert headers["openai-beta"] == "responses_websockets=2026-02-06"
    assert headers["authorization"] == "<redacted>"  # the client's key went through
    assert not any(k.startswith("x-trimgate") for k in headers)
    assert [c.get("previous_response_id") is not None for c in creates(fake)] == [
        False,
        True,
        True,
    ]
    assert stack.metric(
        "trimgate_requests_total",
        upstream="openai",
        provider="openai",
        model="big-*",
        status="200",
    ) + stack.metric(
        "trimgate_requests_total", upstream="openai", provider="openai", model="other", status="200"
    ) == pytest.approx(3)


async def test_handshake_headers_and_extensions_are_negotiated(make_ws: MakeWs) -> None:
    fake = AgentFake(websocket=True, ws_headers=CODEX_101)
    stack = await make_ws(fake.app())
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(
            stack.base + "/v1/responses",
            headers={"x-codex-turn-state": "ts-1", "x-trimgate-agent": "codex"},
            compress=15,
            protocols=("chat", "other"),
        ) as ws:
            got = ws._response.headers
            assert got["x-codex-turn-state"] == "ts-1"
            for key, value in CODEX_101.items():
                assert got[key] == value
            assert got["x-trimgate-request-id"]
            assert ws.compress == 15  # permessage-deflate: offered, granted upstream
            assert ws.protocol is None  # the fake chose no subprotocol: nor may trimgate
            await ws.send_json({"type": "response.create", "model": "big-x", "input": "hi"})
            msg = await ws.receive(timeout=5)
            assert json.loads(msg.data)["type"] == "response.created"
        async with session.ws_connect(stack.base + "/v1/responses", compress=0) as ws:
            assert ws.compress == 0
    handshake = [r for r in fake.records if r.transport == "ws-handshake"]
    assert "permessage-deflate" in handshake[0].headers["sec-websocket-extensions"]
    assert "sec-websocket-extensions" not in handshake[1].headers
    assert "x-trimgate-agent" not in handshake[0].headers


async def test_a_long_create_is_trimmed_and_reported(make_ws: MakeWs) -> None:
    fake = AgentFake(websocket=True, script=Script(rounds=0))
    stack = await make_ws(fake.app())
    history = [*turns(8), {"role": "user", "content": "the latest question"}]
    async with sdk(stack.base).responses.connect(
        extra_headers={"x-trimgate-agent": "codex"}
    ) as conn:
        seen = await one_response(
            conn, {"type": "response.create", "model": "small-x", "input": history}
        )
    assert seen[-1].type == "response.completed"
    sent = creates(fake)[0]
    assert sent["type"] == "response.create"
    assert len(sent["input"]) < len(history)
    assert sent["input"][-1] == {"role": "user", "content": "the latest question"}
    # headers cannot carry it: the event stream and the metrics do
    (event,) = [e for e in stack.events() if e["type"] == "history_trimmed"]
    assert event["reason"] == "preemptive" and event["agent_alias"] == "codex"
    assert event["dropped_turns"] >= 1 and event["tokens_after"] <= event["budget"]
    labels = {"upstream": "openai", "model": "small-*", "reason": "preemptive"}
    assert stack.metric("trimgate_trims_total", **labels) == 1


async def test_an_overflow_is_retried_on_the_same_connection(make_ws: MakeWs) -> None:
    fake = AgentFake(websocket=True, script=Script(rounds=0, windows={"big-x": 700}))
    stack = await make_ws(fake.app())
    history = [*turns(6), {"role": "user", "content": "now"}]
    async with sdk(stack.base).responses.connect() as conn:
        seen = await one_response(
            conn, {"type": "response.create", "model": "big-x", "input": history}
        )
        # the connection goes on: a second response on it
        again = await one_response(
            conn, {"type": "response.create", "model": "big-x", "input": "short"}
        )
    types = [e.type for e in seen]
    assert "error" not in types and types.count("response.created") == 1
    assert types[-1] == "response.completed"
    assert again[-1].type == "response.completed"
    answers = [r.answer for r in fake.records if r.transport == "ws"]
    assert answers[0] == "overflow" and answers.count("overflow") >= 1
    sizes = [len(c["input"]) for c in creates(fake) if isinstance(c["input"], list)]
    assert sizes == sorted(sizes, reverse=True) and sizes[-1] < len(history)
    labels = {"upstream": "openai", "model": "big-*"}
    assert stack.metric("trimgate_context_overflows_total", **labels) >= 1
    assert stack.metric("trimgate_reactive_retries_total", **labels) >= 1
    (event,) = [e for e in stack.events() if e["type"] == "history_trimmed"]
    assert event["reason"] == "reactive"


def scripted_app(sent: list[dict[str, Any]], script: Callable[[int], list[Any]]) -> web.Application:
    """``/v1/responses`` over WebSocket answering the n-th create (from 1) with
    ``script(n)``: events to send, or a number of seconds to wait before the next."""

    async def responses(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for msg in ws:
            if msg.type != WSMsgType.TEXT:
                break
            sent.append(json.loads(msg.data))
            for out in script(len(sent)):
                if isinstance(out, (int, float)):
                    await asyncio.sleep(out)
                else:
                    await ws.send_json(out)
        return ws

    app = web.Application()
    app.router.add_get("/v1/responses", responses)
    return app


def fits(rid: str) -> list[Any]:
    return [
        {"type": "response.created", "response": {"id": rid, "status": "in_progress"}},
        {"type": "response.output_text.delta", "delta": "fits"},
        {"type": "response.completed", "response": {"id": rid, "status": "completed"}},
    ]


def window_stop_app(sent: list[dict[str, Any]], window_chars: int) -> web.Application:
    """``/v1/responses`` over WebSocket like a Responses bridge in front of a model that
    stops at its window: a create whose input is over ``window_chars`` characters is left
    incomplete for ``max_output_tokens`` with an empty message (LiteLLM's events), a
    shorter one completed; every create is kept in ``sent``."""

    def script(n: int) -> list[Any]:
        size = len(json.dumps(sent[n - 1].get("input")))
        return window_stop_events(f"resp_{n}", size) if size > window_chars else fits(f"resp_{n}")

    return scripted_app(sent, script)


def window_stop_events(rid: str, size: int) -> list[dict[str, Any]]:
    empty = {"id": "msg_1", "type": "message", "role": "assistant", "content": []}
    part = {"type": "output_text", "text": "", "annotations": []}
    done = {**empty, "content": [part]}
    where = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    return [
        {"type": "response.created", "response": {"id": rid, "status": "in_progress"}},
        {"type": "response.in_progress", "response": {"id": rid, "status": "in_progress"}},
        {"type": "response.output_item.added", "output_index": 0, "item": empty},
        {"type": "response.content_part.added", **where, "part": part},
        {"type": "response.output_text.done", **where, "text": ""},
        {"type": "response.content_part.done", **where, "part": part},
        {"type": "response.output_item.done", "output_index": 0, "item": done},
        {
            "type": "response.incomplete",
            "response": {
                "id": rid,
                "object": "response",
                "status": "incomplete",
                "incomplete_details": {"reason": "max_output_tokens"},
                "output": [done],
                "usage": {"input_tokens": size // 4, "output_tokens": 0, "total_tokens": size // 4},
            },
        },
    ]


async def read_response(conn: Any, event: dict[str, Any]) -> list[str]:
    """Send a ``response.create``; the types of its events to its end."""
    await conn.send(event)
    types: list[str] = []
    while not types or types[-1] not in ("response.completed", "response.incomplete", "error"):
        types.append((await asyncio.wait_for(conn.recv(), 10)).type)
    return types


@pytest.mark.parametrize("limit", [None, 500])
async def test_a_window_stop_before_output_is_retried_when_no_limit_was_set(
    make_ws: MakeWs, limit: int | None
) -> None:
    # the WebSocket mode reads a response left incomplete before any output as HTTP does:
    # with no max_output_tokens no limit stopped it, so the window did; with one, the
    # limit may have, and the answer goes back as it came
    sent: list[dict[str, Any]] = []
    stack = await make_ws(window_stop_app(sent, window_chars=3200))
    history = [*turns(6), {"role": "user", "content": "now"}]
    create: dict[str, Any] = {"type": "response.create", "model": "big-x", "input": history}
    if limit is not None:
        create["max_output_tokens"] = limit
    async with sdk(stack.base).responses.connect() as conn:
        types = await read_response(conn, create)
    labels = {"upstream": "openai", "model": "big-*"}
    if limit is not None:
        assert types[-1] == "response.incomplete" and len(sent) == 1
        assert stack.metric("trimgate_context_overflows_total", **labels) == 0
        return
    assert types == ["response.created", "response.output_text.delta", "response.completed"]
    sizes = [len(json.dumps(c["input"])) for c in sent]
    assert len(sent) >= 2 and sizes == sorted(sizes, reverse=True) and sizes[-1] <= 3200
    assert sent[-1]["input"][-1] == {"role": "user", "content": "now"}
    assert stack.metric("trimgate_context_overflows_total", **labels) == len(sent) - 1
    (event,) = [e for e in stack.events() if e["type"] == "history_trimmed"]
    assert event["reason"] == "reactive"


async def test_a_failed_response_sent_as_completed_is_read_as_on_http(make_ws: MakeWs) -> None:
    # codex-cc sends its upstream's error as a response.completed whose response failed:
    # any event before output that states an overflow is read, not only error events
    failed = {
        "type": "response.completed",
        "response": {
            "id": "resp_1",
            "status": "failed",
            "error": {
                "code": "context_length_exceeded",
                "message": "Your input exceeds the context window of this model. Please"
                " adjust your input and try again.",
            },
        },
    }
    sent: list[dict[str, Any]] = []
    created = {"type": "response.created", "response": {"id": "resp_1"}}
    stack = await make_ws(scripted_app(sent, lambda n: [created, failed] if n == 1 else fits("r")))
    async with sdk(stack.base).responses.connect() as conn:
        types = await read_response(
            conn, {"type": "response.create", "model": "big-x", "input": turns(4)}
        )
    assert types == ["response.created", "response.output_text.delta", "response.completed"]
    assert len(sent) == 2 and len(sent[1]["input"]) < len(turns(4))


async def test_events_are_held_no_longer_than_on_http(
    make_ws: MakeWs, monkeypatch: pytest.MonkeyPatch
) -> None:
    # an upstream that opens a response and is slow to its first output (a long prefill):
    # the client gets the events held so far when the hold's time is up, as on HTTP
    monkeypatch.setattr("trimgate.proxy.relay.STREAM_HOLD_SECONDS", 0.2)
    created = {"type": "response.created", "response": {"id": "resp_1"}}
    sent: list[dict[str, Any]] = []
    stack = await make_ws(scripted_app(sent, lambda n: [created, 3.0, *fits("resp_1")[1:]]))
    async with sdk(stack.base).responses.connect() as conn:
        await conn.send({"type": "response.create", "model": "big-x", "input": "hi"})
        first = await asyncio.wait_for(conn.recv(), 2.0)  # well before the upstream's 3 s
        assert first.type == "response.created"
        rest = [(await asyncio.wait_for(conn.recv(), 10)).type for _ in range(2)]
    assert rest == ["response.output_text.delta", "response.completed"]


async def test_a_large_create_is_examined_and_replanned_off_the_event_loop(
    make_ws: MakeWs, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[tuple[str, str]] = []
    examine, replan = Examiner.examine, Chat.replan

    def examining(self: Examiner, *args: Any) -> Any:
        threads.append(("examine", threading.current_thread().name))
        return examine(self, *args)

    def replanning(self: Chat, *args: Any) -> Any:
        threads.append(("replan", threading.current_thread().name))
        return replan(self, *args)

    monkeypatch.setattr(Examiner, "examine", examining)
    monkeypatch.setattr(Chat, "replan", replanning)
    fake = AgentFake(websocket=True, script=Script(rounds=0, windows={"big-x": 60_000}))
    stack = await make_ws(fake.app())
    history = [*turns(150, size=1_000), {"role": "user", "content": "now"}]  # ~300 KB
    async with sdk(stack.base).responses.connect() as conn:
        seen = await one_response(
            conn, {"type": "response.create", "model": "big-x", "input": history}
        )
    assert seen[-1].type == "response.completed"
    answers = [r.answer for r in fake.records if r.transport == "ws"]
    assert answers[0] == "overflow" and len(answers) >= 2
    assert [what for what, _ in threads][:2] == ["examine", "replan"]
    assert all(name.startswith("trimgate-examine") for _, name in threads)


async def test_a_chained_overflow_is_recovered_from_the_whole_chain(make_ws: MakeWs) -> None:
    fake = AgentFake(websocket=True, script=Script(rounds=0))
    stack = await make_ws(fake.app())
    async with sdk(stack.base).responses.connect() as conn:
        first = await one_response(
            conn, {"type": "response.create", "model": "big-x", "input": turns(6)}
        )
        prev = first[-1].response.id
        fake.script.windows = {"big-x": 900}  # the chain no longer fits
        seen = await one_response(
            conn,
            {
                "type": "response.create",
                "model": "big-x",
                "previous_response_id": prev,
                "input": [{"role": "user", "content": "and now?"}],
            },
        )
        assert [e.type for e in seen].count("error") == 0
        assert seen[-1].type == "response.completed"
        # the next delta continues the recovered response, which the server holds
        after = await one_response(
            conn,
            {
                "type": "response.create",
                "model": "big-x",
                "previous_response_id": seen[-1].response.id,
                "input": [{"role": "user", "content": "ok"}],
            },
        )
        assert after[-1].type == "response.completed"
    sent = creates(fake)
    assert sent[1].get("previous_response_id") == prev  # untouched first
    rebuilt = [c for c in sent[2:] if "previous_response_id" not in c]
    assert rebuilt, "the rebuilt history went up without previous_response_id"
    last = rebuilt[-1]["input"]
    assert last[-1] == {"role": "user", "content": "and now?"}
    assert 2 < len(last) < len(turns(6)) + 2  # the first output kept, old turns dropped
    (event,) = [e for e in stack.events() if e["type"] == "history_trimmed"]
    assert event["reason"] == "reactive"


def vllm_checks_app(window: list[int], creates: list[dict[str, Any]]) -> web.Application:
    """A Responses WebSocket upstream that checks as vLLM does: the prompt against the
    window (``window[0]`` tokens, 0 for none), then the prompt and ``max_output_tokens``
    together. It keeps each response's input and output for ``previous_response_id``."""
    kept: dict[str, list[Any]] = {}

    async def responses(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for msg in ws:
            event = json.loads(msg.data)
            creates.append(event)
            items = kept.get(event.get("previous_response_id", ""), []) + event["input"]
            prompt, reserve = rough_tokens(json.dumps(items)), event["max_output_tokens"]
            limit = window[0] or prompt + reserve
            message = f"This model's maximum context length is {limit} tokens"
            if prompt > limit:
                message += f". However, your request has {prompt} input tokens."
            elif prompt + reserve > limit:
                message = (
                    f"'max_tokens' or 'max_completion_tokens' is too large: {reserve}. "
                    f"{message} and your request has {prompt} input tokens "
                    f"({reserve} > {limit} - {prompt})."
                )
            else:
                rid = f"resp_{len(creates)}"
                kept[rid] = items
                for answer in responses_events(event["model"], rid, [], prompt):
                    await ws.send_json(answer)
                continue
            error = {"type": "invalid_request_error", "code": None, "message": message}
            await ws.send_json({"type": "error", "status": 400, "error": error})
        return ws

    app = web.Application()
    app.router.add_get("/v1/responses", responses)
    return app


async def test_a_chain_recovered_against_a_window_stated_whole_spares_the_output(
    make_ws: MakeWs,
) -> None:
    """vLLM states the window whole against the prompt alone; the rebuilt chain is aimed
    at it less ``max_output_tokens``, so that one resend fits rather than a second one
    answering the sum check."""
    window: list[int] = [0]
    sent: list[dict[str, Any]] = []
    stack = await make_ws(vllm_checks_app(window, sent))
    async with sdk(stack.base).responses.connect() as conn:
        create = {"type": "response.create", "model": "big-x", "max_output_tokens": 300}
        first = await one_response(conn, {**create, "input": turns(8)})
        window[0] = int(rough_tokens(json.dumps(turns(8))) * 0.8)  # the chain no longer fits
        seen = await one_response(
            conn,
            {
                **create,
                "previous_response_id": first[-1].response.id,
                "input": [{"role": "user", "content": "and now?"}],
            },
        )
    assert seen[-1].type == "response.completed", seen
    assert len(sent) == 3 and "previous_response_id" not in sent[2]  # one resend fits
    resent = rough_tokens(json.dumps(sent[2]["input"]))
    assert window[0] - 300 - 2 * rough_tokens(json.dumps(turns(1))) < resent <= window[0] - 300


async def test_a_chain_beyond_the_kept_bytes_is_not_recovered(make_ws: MakeWs) -> None:
    fake = AgentFake(websocket=True, script=Script(rounds=0))
    stack = await make_ws(fake.app(), server={"max_ws_history_bytes": 1000})
    async with sdk(stack.base).responses.connect() as conn:
        first = await one_response(
            conn, {"type": "response.create", "model": "big-x", "input": turns(6)}
        )
        fake.script.windows = {"big-x": 900}
        seen = await one_response(
            conn,
            {
                "type": "response.create",
                "model": "big-x",
                "previous_response_id": first[-1].response.id,
                "input": [{"role": "user", "content": "and now?"}],
            },
        )
    assert seen[-1].type == "error"  # the provider's own answer
    assert seen[-1].error.code == "context_length_exceeded"
    assert len(creates(fake)) == 2


async def test_a_refused_upgrade_goes_back_as_it_came(make_ws: MakeWs) -> None:
    fake = AgentFake(websocket=False)
    stack = await make_ws(fake.app())
    upgrade = {
        "Upgrade": "websocket",
        "Connection": "Upgrade",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version": "13",
    }
    async with aiohttp.ClientSession() as session:
        async with session.get(stack.upstream_base + "/v1/responses", headers=upgrade) as r:
            direct = (r.status, await r.read())
        async with session.get(stack.base + "/v1/responses", headers=upgrade) as r:
            through = (r.status, await r.read())
            assert r.headers["x-trimgate-request-id"]
    assert through == direct and direct[0] == 405
    # the SDK's WebSocket client sees the provider's own refusal
    with pytest.raises(InvalidStatus) as refused:
        async with sdk(stack.base).responses.connect() as conn:
            await conn.send({"type": "response.create", "model": "big-x", "input": "x"})
    assert refused.value.response.status_code == 405
    assert refused.value.response.body == direct[1]


async def test_an_unreachable_upstream_is_a_502_and_one_log_line(
    make_ws: MakeWs, caplog: pytest.LogCaptureFixture
) -> None:
    fake = AgentFake(websocket=True)
    stack = await make_ws(fake.app())
    await stack.upstream.close()  # nothing listens there now
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.WSServerHandshakeError) as caught:
            await session.ws_connect(
                stack.base + "/v1/responses", headers={"Authorization": "Bearer sk-secret"}
            )
    assert caught.value.status == 502
    lines = [r for r in caplog.records if getattr(r, "event", "") == "ws_handshake_failed"]
    assert len(lines) == 1
    assert "sk-secret" not in caplog.text


# --- closes, Realtime-style sessions, limits --------------------------------------------


def session_app(closes: list[tuple[int, str]], pings: list[bytes]) -> web.Application:
    """``/v1/realtime``: echoes text and binary, answers pings, pings on request;
    ``/v1/responses``: starts a response and closes (4000) or waits for the client."""

    async def realtime(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(protocols=("realtime",), autoping=False)
        await ws.prepare(request)
        while True:
            msg = await ws.receive()
            if msg.type == WSMsgType.PING:
                pings.append(msg.data)
                await ws.pong(msg.data)
            elif msg.type == WSMsgType.TEXT and msg.data == "ping me":
                await ws.ping(b"from upstream")
            elif msg.type == WSMsgType.TEXT:
                await ws.send_str(msg.data)
            elif msg.type == WSMsgType.BINARY:
                await ws.send_bytes(msg.data[::-1])
            else:
                if msg.type == WSMsgType.CLOSE:
                    closes.append((int(msg.data), str(msg.extra)))
                break
        return ws

    async def responses(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        msg = await ws.receive()
        event = json.loads(msg.data)
        rid = "resp_1"
        await ws.send_json({"type": "response.created", "response": {"id": rid}})
        if event.get("model") != "big-abandoning":
            await ws.send_json({"type": "response.output_text.delta", "delta": "par"})
        if event.get("model") == "big-closing":
            await ws.close(code=4000, message=b"upstream bye")
            return ws
        if event.get("model") == "big-abandoning":  # no output: the close comes first
            await ws.close(code=1011, message=b"gave up")
            return ws
        msg = await ws.receive()
        if msg.type == WSMsgType.CLOSE:
            closes.append((int(msg.data), str(msg.extra)))
        return ws

    app = web.Application()
    app.router.add_get("/v1/realtime", realtime)
    app.router.add_get("/v1/responses", responses)
    return app


async def test_upstream_closing_mid_response_closes_the_client_alike(make_ws: MakeWs) -> None:
    stack = await make_ws(session_app([], []))
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(stack.base + "/v1/responses") as ws,
    ):
        await ws.send_json({"type": "response.create", "model": "big-closing", "input": "x"})
        got = [json.loads((await ws.receive(timeout=5)).data)["type"] for _ in range(2)]
        assert got == ["response.created", "response.output_text.delta"]
        msg = await ws.receive(timeout=5)
        assert msg.type == WSMsgType.CLOSE
        assert (msg.data, msg.extra) == (4000, "upstream bye")


async def test_events_held_when_the_upstream_closes_reach_the_client_first(
    make_ws: MakeWs,
) -> None:
    stack = await make_ws(session_app([], []))
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(stack.base + "/v1/responses") as ws,
    ):
        await ws.send_json({"type": "response.create", "model": "big-abandoning", "input": "x"})
        got = json.loads((await ws.receive(timeout=5)).data)
        assert got["type"] == "response.created"  # held, undecided, then relayed
        msg = await ws.receive(timeout=5)
        assert (msg.type, msg.data, msg.extra) == (WSMsgType.CLOSE, 1011, "gave up")


async def test_client_closing_mid_response_closes_the_upstream_alike(make_ws: MakeWs) -> None:
    closes: list[tuple[int, str]] = []
    stack = await make_ws(session_app(closes, []))
    async with aiohttp.ClientSession() as session:
        ws = await session.ws_connect(stack.base + "/v1/responses")
        await ws.send_json({"type": "response.create", "model": "big-x", "input": "x"})
        await ws.receive(timeout=5)
        await ws.receive(timeout=5)
        await ws.close(code=4001, message=b"client bye")
    for _ in range(100):
        if closes:
            break
        await asyncio.sleep(0.02)
    assert closes == [(4001, "client bye")]


async def test_a_realtime_session_is_relayed_untouched(make_ws: MakeWs) -> None:
    closes: list[tuple[int, str]] = []
    pings: list[bytes] = []
    stack = await make_ws(session_app(closes, pings))
    create = '{"type":"response.create","model":"small-x","input":' + json.dumps(turns(8)) + "}"
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(
            stack.base + "/v1/realtime?model=small-x", protocols=("realtime",), autoping=False
        ) as ws,
    ):
        assert ws.protocol == "realtime"
        await ws.send_str(create)
        assert (await ws.receive(timeout=5)).data == create  # not examined here
        await ws.send_bytes(b"\x00\x01\x02binary")
        assert (await ws.receive(timeout=5)).data == b"yranib\x02\x01\x00"
        await ws.ping(b"from client")
        pong = await ws.receive(timeout=5)
        assert (pong.type, pong.data) == (WSMsgType.PONG, b"from client")
        await ws.send_str("ping me")
        ping = await ws.receive(timeout=5)
        assert (ping.type, ping.data) == (WSMsgType.PING, b"from upstream")
        await ws.close(code=1000, message=b"done")
    for _ in range(100):
        if closes:
            break
        await asyncio.sleep(0.02)
    assert pings == [b"from client"]
    assert closes == [(1000, "done")]
    assert not [e for e in stack.events() if e["type"] == "history_trimmed"]


async def test_a_frame_over_the_limit_closes_with_1009(make_ws: MakeWs) -> None:
    closes: list[tuple[int, str]] = []
    stack = await make_ws(session_app(closes, []), server={"max_ws_frame_bytes": 1024})
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(stack.base + "/v1/realtime") as ws,
    ):
        await ws.send_str("x" * 100)
        assert (await ws.receive(timeout=5)).data == "x" * 100
        await ws.send_str("y" * 4096)
        msg = await ws.receive(timeout=5)
        assert msg.type == WSMsgType.CLOSE and msg.data == 1009
    for _ in range(100):
        if closes:
            break
        await asyncio.sleep(0.02)
    assert closes and closes[0][0] == 1009


async def test_an_idle_connection_is_closed_on_both_sides(make_ws: MakeWs) -> None:
    closes: list[tuple[int, str]] = []
    stack = await make_ws(session_app(closes, []), server={"ws_idle_timeout": 0.3})
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(stack.base + "/v1/realtime") as ws,
    ):
        msg = await ws.receive(timeout=5)
        assert msg.type == WSMsgType.CLOSE
        assert (msg.data, msg.extra) == (1001, "idle timeout")
    for _ in range(100):
        if closes:
            break
        await asyncio.sleep(0.02)
    assert closes == [(1001, "idle timeout")]


# --- admin token and open-proxy rules on upgrades ----------------------------------------

UPGRADE_HEAD = (
    "Upgrade: websocket\r\nConnection: Upgrade\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
)


async def test_admin_token_and_open_proxy_rules_hold_for_upgrades(make_ws: MakeWs) -> None:
    fake = AgentFake(websocket=True)
    stack = await make_ws(fake.app(), server={"admin_token": "adm-secret"})
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.WSServerHandshakeError) as caught:
            await session.ws_connect(stack.base + "/api/ws")
        assert caught.value.status == 401
        async with session.ws_connect(
            stack.base + "/api/ws", headers={"Authorization": "Bearer adm-secret"}
        ) as ws:
            assert not ws.closed
        # a proxied path needs no admin token, and the admin token is not sent upstream
        async with session.ws_connect(stack.base + "/v1/responses") as ws:
            await ws.send_json({"type": "response.create", "model": "big-x", "input": "hi"})
            assert json.loads((await ws.receive(timeout=5)).data)["type"] == "response.created"
    seen = json.dumps([r.headers for r in fake.records])
    assert "adm-secret" not in seen
    handshakes = len([r for r in fake.records if r.transport == "ws-handshake"])
    port = stack.proxy.port
    assert port is not None
    for target in (
        "http://example.invalid/v1/responses",
        "/v1/../v1/responses",
        "//example.invalid/v1/responses",
    ):
        answer = await raw_request(
            port, f"GET {target} HTTP/1.1\r\nHost: x\r\n{UPGRADE_HEAD}\r\n".encode()
        )
        assert answer.startswith(b"HTTP/1.1 400"), (target, answer[:80])
    assert len([r for r in fake.records if r.transport == "ws-handshake"]) == handshakes


async def test_shutdown_closes_both_sides_with_1001(make_ws: MakeWs) -> None:
    closes: list[tuple[int, str]] = []
    stack = await make_ws(session_app(closes, []))
    async with aiohttp.ClientSession() as session:
        ws = await session.ws_connect(stack.base + "/v1/realtime")
        await ws.send_str("hello")
        assert (await ws.receive(timeout=5)).data == "hello"
        closing = asyncio.create_task(stack.proxy.close())
        msg = await ws.receive(timeout=10)
        assert (msg.type, msg.data, msg.extra) == (WSMsgType.CLOSE, 1001, "server shutting down")
        await ws.close()
        await closing
    for _ in range(100):
        if closes:
            break
        await asyncio.sleep(0.02)
    assert closes == [(1001, "server shutting down")]


async def test_each_examined_create_logs_a_request_line(
    make_ws: MakeWs, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="trimgate")
    fake = AgentFake(websocket=True, script=Script(rounds=0))
    stack = await make_ws(fake.app())
    async with sdk(stack.base).responses.connect() as conn:
        for text in ("one", "two"):
            await one_response(
                conn,
                {
                    "type": "response.create",
                    "model": "big-x",
                    "input": [{"role": "user", "content": text}],
                },
            )
    lines = [r for r in caplog.records if getattr(r, "event", "") == "request"]
    assert len(lines) == 2
    assert len({getattr(r, "request_id", "") for r in lines}) == 2
    assert all(getattr(r, "status", 0) == 200 for r in lines)
    assert "sk-test" not in caplog.text and "one" not in [r.getMessage() for r in lines]


def slow_responses_app(received: list[dict[str, Any]]) -> web.Application:
    """``/v1/responses`` answering each create in turn, its last event 0.1 s after the
    first output: a create sent meanwhile arrives while a response still streams."""

    async def responses(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for msg in ws:
            event = json.loads(msg.data)
            received.append(event)
            rid = f"resp_{len(received)}"
            await ws.send_json({"type": "response.created", "response": {"id": rid}})
            await ws.send_json({"type": "response.output_text.delta", "delta": "x"})
            await asyncio.sleep(0.1)
            await ws.send_json(
                {"type": "response.completed", "response": {"id": rid, "output": []}}
            )
        return ws

    app = web.Application()
    app.router.add_get("/v1/responses", responses)
    return app


async def test_pipelined_creates_are_relayed_in_order(make_ws: MakeWs) -> None:
    received: list[dict[str, Any]] = []
    stack = await make_ws(slow_responses_app(received))
    history = [*turns(8), {"role": "user", "content": "the latest question"}]
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(stack.base + "/v1/responses") as ws,
    ):
        for model in ("big-x", "small-x", "big-x"):
            await ws.send_json({"type": "response.create", "model": model, "input": history})
        seen: list[dict[str, Any]] = []
        while len([e for e in seen if e["type"] == "response.completed"]) < 3:
            seen.append(json.loads((await ws.receive(timeout=5)).data))
    ids = [e["response"]["id"] for e in seen if e["type"] == "response.created"]
    done = [e["response"]["id"] for e in seen if e["type"] == "response.completed"]
    assert ids == done == ["resp_1", "resp_2", "resp_3"]
    assert [e["type"] for e in seen] == [
        "response.created",
        "response.output_text.delta",
        "response.completed",
    ] * 3
    # the second was sent while the first streamed: not held, still trimmed
    sizes = [len(r["input"]) for r in received]
    assert sizes[0] == sizes[2] == len(history) and sizes[1] < len(history)
    (event,) = [e for e in stack.events() if e["type"] == "history_trimmed"]
    assert event["model"] == "small-x" and event["reason"] == "preemptive"


TLS = Path(__file__).parent.parent / "data" / "tls"  # a self-signed test pair for 127.0.0.1


async def test_wss_upstream_verified_against_the_trust_store(
    http_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = AgentFake(websocket=True, script=Script(rounds=0))
    runner = web.AppRunner(fake.app())
    await runner.setup()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(TLS / "cert.pem", TLS / "key.pem")
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    proxies: list[ProxyTestServer] = []

    async def through(trusted: bool) -> ProxyTestServer:
        if trusted:
            monkeypatch.setenv("SSL_CERT_FILE", str(TLS / "cert.pem"))  # as an operator would
        config = config_for(
            f"https://localhost:{port}", server={"http_server": http_server}, models=MODELS
        )
        proxy = ProxyTestServer(create_app(config, registry=CollectorRegistry()), host="127.0.0.1")
        await proxy.start_server()
        proxies.append(proxy)
        return proxy

    try:
        async with aiohttp.ClientSession() as session:
            untrusting = await through(trusted=False)
            with pytest.raises(aiohttp.WSServerHandshakeError) as caught:
                await session.ws_connect(f"http://127.0.0.1:{untrusting.port}/v1/responses")
            assert caught.value.status == 502  # self-signed: refused by the system store
            trusting = await through(trusted=True)
            async with session.ws_connect(f"http://127.0.0.1:{trusting.port}/v1/responses") as ws:
                await ws.send_json({"type": "response.create", "model": "big-x", "input": "hi"})
                assert json.loads((await ws.receive(timeout=5)).data)["type"] == (
                    "response.created"
                )
    finally:
        for p in proxies:
            await p.close()
        await runner.cleanup()
    assert [r.status for r in fake.records if r.transport == "ws-handshake"] == [101]
