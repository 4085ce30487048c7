"""Metering context loss by team, through the proxy: the ``team`` label, events, logs."""

from __future__ import annotations

import hashlib
import logging
from typing import Any

import anthropic
import openai
import orjson
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from tests.fakes import FakeProvider, Recorded, Reply, anthropic_ok, json_reply, openai_ok
from tests.fakes import openai_overflow as overflow
from tests.proxy.bodies import anthropic_messages, openai_chat
from tests.proxy.conftest import MakeStack, Stack, config_for
from trimgate.attribution import OTHER, UNATTRIBUTED, team_resolver
from trimgate.logs import JsonFormatter
from trimgate.proxy.events import EventHub
from trimgate.proxy.forward import Proxy
from trimgate.proxy.metrics import BY_TEAM, Metrics, metrics_for
from trimgate.proxy.signals import Outcome, record
from trimgate.trimming.pipeline import TrimReport

PAYMENTS_KEY = "sk-test-payments-4b7e0c1d9a"  # fake: hashed as trimgate hashes it
PAYMENTS_DIGEST = hashlib.sha256(PAYMENTS_KEY.encode()).hexdigest()
LEGACY_LABELS = {  # the labels of these counters without attribution
    "trimgate_requests_total": {"upstream", "provider", "model", "status"},
    "trimgate_trims_total": {"upstream", "model", "reason"},
    "trimgate_dropped_turns_total": {"upstream", "model", "reason"},
    "trimgate_tokens_dropped_total": {"upstream", "model", "reason"},
    "trimgate_context_overflows_total": {"upstream", "model"},
    "trimgate_trim_exhausted_total": {"upstream", "model", "reason"},
    "trimgate_prompt_tokens_total": {"upstream", "model"},
    "trimgate_prompt_cache_read_tokens_total": {"upstream", "model"},
    "trimgate_trimmed_prompt_tokens_total": {"upstream", "model"},
    "trimgate_trimmed_prompt_cache_read_tokens_total": {"upstream", "model"},
}


def responder(r: Recorded) -> Reply:
    if r.path.endswith("/messages"):
        return json_reply(anthropic_ok(10))
    if r.method == "POST" and "overflow-always" in str(r.json().get("model")):
        return overflow(200_000, 128_000)
    return json_reply(openai_ok())  # no usage: no calibration, every long history trims


def attribution(**extra: Any) -> dict[str, Any]:
    return {
        "attribution": {
            "api_keys": [{"sha256_prefix": PAYMENTS_DIGEST[:12], "team": "payments"}],
            **extra,
        }
    }


async def traffic(stack: Stack, headers: dict[str, str]) -> None:
    post = stack.client.post
    for body in (
        openai_chat(8, model="small-1"),  # preemptive trim
        openai_chat(3, model="gpt-4o"),  # plain
        openai_chat(1, model="gpt-4o-overflow-always"),  # exhausted overflow
    ):
        resp = await post("/v1/chat/completions", json=body, headers=headers)
        await resp.read()
    resp = await stack.client.get("/v1/models", headers=headers)  # pass-through
    await resp.read()


def samples(registry: CollectorRegistry) -> list[tuple[str, dict[str, str], float]]:
    return [
        (s.name, dict(s.labels), s.value)
        for family in registry.collect()
        for s in family.samples
        if s.name.endswith("_total")
    ]


def teams_of(registry: CollectorRegistry, name: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for sample, labels, value in samples(registry):
        if sample == name:
            out[labels["team"]] = out.get(labels["team"], 0.0) + value
    return out


async def test_off_the_series_are_as_without_attribution(make_stack: MakeStack) -> None:
    stack = await make_stack(FakeProvider(responder))
    await traffic(
        stack, {"x-trimgate-agent": "payments", "Authorization": f"Bearer {PAYMENTS_KEY}"}
    )
    seen = set()
    for name, labels, _ in samples(stack.registry):
        assert "team" not in labels
        if name in LEGACY_LABELS:
            assert set(labels) == LEGACY_LABELS[name], name
            seen.add(name)
    assert seen == set(LEGACY_LABELS)
    assert b"team" not in generate_latest(stack.registry)
    (event,) = stack.events()
    assert "team" not in event


async def test_on_every_listed_counter_carries_the_team(make_stack: MakeStack) -> None:
    stack = await make_stack(FakeProvider(responder), metrics=attribution())
    await traffic(stack, {"x-trimgate-agent": "search"})
    await traffic(stack, {"Authorization": f"Bearer {PAYMENTS_KEY}"})
    await traffic(stack, {})
    assert set(LEGACY_LABELS) == BY_TEAM
    for name, labels, _ in samples(stack.registry):
        if name in LEGACY_LABELS:
            assert set(labels) == LEGACY_LABELS[name] | {"team"}, name
        else:
            assert "team" not in labels, name
    teams = {"search", "payments", UNATTRIBUTED}
    assert teams_of(stack.registry, "trimgate_requests_total") == dict.fromkeys(teams, 4.0)
    assert teams_of(stack.registry, "trimgate_trims_total") == dict.fromkeys(teams, 1.0)
    assert teams_of(stack.registry, "trimgate_trim_exhausted_total") == dict.fromkeys(teams, 1.0)
    overflows = teams_of(stack.registry, "trimgate_context_overflows_total")
    assert set(overflows) == teams and min(overflows.values()) >= 1
    dropped = teams_of(stack.registry, "trimgate_tokens_dropped_total")
    assert set(dropped) == teams and len(set(dropped.values())) == 1 and dropped["search"] > 0
    turns = teams_of(stack.registry, "trimgate_dropped_turns_total")
    assert set(turns) == teams and turns["payments"] > 0
    assert [e["team"] for e in stack.events()] == ["search", "payments", UNATTRIBUTED]


async def test_header_values_through_the_proxy_stay_bounded(make_stack: MakeStack) -> None:
    stack = await make_stack(FakeProvider(responder), metrics={"attribution": {"max_values": 3}})
    for i in range(20):
        resp = await stack.client.post(
            "/v1/chat/completions",
            json=openai_chat(8, model="small-1"),
            headers={"x-trimgate-agent": f"agent-{i}"},
        )
        await resp.read()
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(8, model="small-1"))
    await resp.read()
    expected = {"agent-0", "agent-1", "agent-2", OTHER, UNATTRIBUTED}
    assert set(teams_of(stack.registry, "trimgate_requests_total")) == expected
    assert teams_of(stack.registry, "trimgate_trims_total")[OTHER] == 17
    assert {e["team"] for e in stack.events()} == expected
    # the header itself still reaches events as the (unbounded, not a label) agent alias
    assert stack.events()[5]["agent_alias"] == "agent-5"


async def test_allow_list_through_the_proxy(make_stack: MakeStack) -> None:
    config = {"attribution": {"allow": ["payments", "search"]}}
    stack = await make_stack(FakeProvider(responder), metrics=config)
    for team in ("payments", "search", "marketing", "payments"):
        resp = await stack.client.post(
            "/v1/chat/completions",
            json=openai_chat(8, model="small-1"),
            headers={"X-Trimgate-Agent": team},
        )
        await resp.read()
    assert teams_of(stack.registry, "trimgate_trims_total") == {
        "payments": 2.0,
        "search": 1.0,
        OTHER: 1.0,
    }


def test_ten_thousand_values_on_a_fresh_registry() -> None:
    registry = CollectorRegistry()
    config = config_for("http://127.0.0.1:9", metrics={"attribution": {"max_values": 50}})
    metrics = metrics_for(config, registry)
    hub = EventHub(metrics)
    resolve = team_resolver(config.metrics.attribution)
    assert resolve is not None
    report = TrimReport(True, 2, 6, 3, 1500, 900, 1000)
    for i in range(10_000):
        team = resolve({"x-trimgate-agent": f"agent-{i}"} if i % 7 else {})
        metrics.count_request("openai", "openai", "small-*", 200, team)
        outcome = Outcome(
            f"{i:016x}", "openai", "openai", "openai-chat", "small-1", "small-*", report,
            "preemptive", overflows=1, unresolved="one-turn", team=team,
        )  # fmt: skip
        record(outcome, metrics, hub, status=200)
    for name in BY_TEAM:
        values = set(teams_of(registry, name))
        assert len(values) <= 52, name
        assert {OTHER, UNATTRIBUTED} <= values
    requests = teams_of(registry, "trimgate_requests_total")
    unattributed = len(range(0, 10_000, 7))
    assert requests[UNATTRIBUTED] == unattributed
    assert requests[OTHER] == 10_000 - unattributed - 50
    assert len(requests) == 52 and requests["agent-1"] == 1
    assert len(metrics._models) <= 52 and len(metrics._requests) <= 52


def test_metrics_built_without_the_team_label_are_refused() -> None:
    config = config_for("http://127.0.0.1:9", metrics={"attribution": {}})
    metrics = Metrics(CollectorRegistry())
    hub = EventHub(metrics)
    with pytest.raises(ValueError, match="teams=True"):
        Proxy(config, metrics=metrics, hub=hub, client=lambda: None)  # type: ignore[arg-type,return-value]


async def test_the_credential_never_leaves_as_anything_but_itself(
    make_stack: MakeStack, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    config = attribution(**{"from": ["api_key", "header"]})
    stack = await make_stack(FakeProvider(responder), metrics=config)
    auth = {"Authorization": f"Bearer {PAYMENTS_KEY}"}
    await traffic(stack, auth)
    await traffic(stack, {"x-api-key": PAYMENTS_KEY, "x-trimgate-agent": "ignored"})
    await traffic(stack, {"x-goog-api-key": PAYMENTS_KEY})
    stack.fake.then(Reply(reset=True))  # an upstream error's log line too
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(2), headers=auth)
    assert resp.status == 502
    lines = [JsonFormatter().format(r) for r in caplog.records]
    trimmed = [orjson.loads(ln) for ln in lines if '"event":"history_trimmed"' in ln]
    assert [t["team"] for t in trimmed] == ["payments"] * 3
    requests = [orjson.loads(ln) for ln in lines if '"event":"request"' in ln]
    assert {r["team"] for r in requests} == {"payments"} and len(requests) == 9
    (failed,) = [orjson.loads(ln) for ln in lines if '"event":"upstream_error"' in ln]
    assert failed["team"] == "payments"
    metrics_page = await stack.client.get("/metrics")
    exported = [
        "\n".join(lines),
        orjson.dumps(stack.events()).decode(),
        generate_latest(stack.registry).decode(),
        await metrics_page.text(),
    ]
    for text in exported:
        assert PAYMENTS_KEY not in text
        assert PAYMENTS_DIGEST[:8] not in text  # nor its hash, nor the configured prefix
    assert 'team="payments"' in exported[2]
    # it went upstream as sent (trimgate authenticates nobody; the provider does)
    assert stack.fake.requests[0].headers["Authorization"] == f"Bearer {PAYMENTS_KEY}"
    assert all("x-trimgate-agent" not in r.headers for r in stack.fake.requests)


async def test_two_teams_with_the_official_sdks(make_stack: MakeStack) -> None:
    """payments calls with its own OpenAI key; search with an Anthropic key trimgate does
    not know, and says who it is in a header."""
    config = attribution(**{"from": ["api_key", "header"]})
    stack = await make_stack(FakeProvider(responder), metrics=config)
    async with openai.AsyncOpenAI(
        base_url=stack.base + "/v1", api_key=PAYMENTS_KEY, max_retries=0
    ) as oa:
        for _ in range(2):
            body = openai_chat(8, model="small-1")
            raw = await oa.chat.completions.with_raw_response.create(
                model=body["model"], messages=body["messages"]
            )
            assert raw.headers["x-trimgate-trimmed"] == "true"
            assert raw.parse().choices[0].message.content == "ok"
    async with anthropic.AsyncAnthropic(
        base_url=stack.base,
        api_key="sk-ant-test-unknown",
        max_retries=0,
        default_headers={"x-trimgate-agent": "search"},
    ) as an:
        body = anthropic_messages(8, model="small-1")
        message = await an.messages.with_raw_response.create(
            model=body["model"], messages=body["messages"], max_tokens=64
        )
        assert message.headers["x-trimgate-trimmed"] == "true"
        assert (await message.parse()).content[0].type == "text"
    trims = teams_of(stack.registry, "trimgate_trims_total")
    assert trims == {"payments": 2.0, "search": 1.0}
    tokens = teams_of(stack.registry, "trimgate_tokens_dropped_total")
    assert tokens["payments"] > 0 and tokens["search"] > 0
    assert [e["team"] for e in stack.events()] == ["payments", "payments", "search"]
    assert (
        stack.metric(
            "trimgate_requests_total",
            upstream="anthropic",
            provider="anthropic",
            model="small-*",
            status="200",
            team="search",
        )
        == 1
    )
    sent = stack.fake.requests[-1]
    # the SDK sends its key as x-api-key or as a bearer value, by version: forwarded as sent
    credential = sent.headers.get("x-api-key") or sent.headers["Authorization"]
    assert credential.removeprefix("Bearer ") == "sk-ant-test-unknown"
    assert "x-trimgate-agent" not in sent.headers
