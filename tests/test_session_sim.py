"""bench/session_sim.py and its caching fake provider: the cache model on hand-checked
sequences, and a tiny session end to end through a real `trimgate serve`."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import orjson
import pytest

from bench.cache_provider import CacheProvider, Shape, cacheable, canonical, unit_tokens
from bench.session_sim import RunSpec, Variant, make_script, run_one
from trimgate.providers.overflow import detect_overflow

# {"content":"x...x","role":"user"}: 28 bytes of JSON around the text, so 3,472 characters
# make 3,500 bytes = 1,000 tokens at 3.5 bytes a token, + 4 for the message: 1,004.
N = 3_472


def msg(ch: str) -> dict[str, Any]:
    return {"role": "user", "content": ch * N}


def body(*messages: dict[str, Any], max_tokens: int | None = None) -> dict[str, Any]:
    b: dict[str, Any] = {"model": "sim-test", "messages": list(messages)}
    if max_tokens is not None:
        b["max_tokens"] = max_tokens
    return b


def cached(fake: CacheProvider, shape: Shape, b: dict[str, Any]) -> int:
    status, _ = fake.answer(shape, b)
    assert status == 200
    return fake.calls[-1].cached_tokens


def test_token_count_is_the_fakes_own() -> None:
    assert len(canonical(msg("a"))) == 3_500
    assert unit_tokens(msg("a"), message=True) == 1_004
    assert unit_tokens(msg("a"), message=False) == 1_000


def test_cacheable_thresholds() -> None:
    assert cacheable("openai", 1_023) == 0
    assert cacheable("openai", 1_024) == 1_024
    assert cacheable("openai", 1_024 + 127) == 1_024
    assert cacheable("openai", 2_008) == 1_024 + 7 * 128
    assert cacheable("anthropic", 1_023) == 0
    assert cacheable("anthropic", 2_008) == 2_008


@pytest.mark.parametrize("shape", ["openai", "anthropic"])
def test_prefix_cache_by_hand(shape: Shape) -> None:
    fake = CacheProvider(window=100_000)
    a, b, c = msg("a"), msg("b"), msg("c")
    assert cached(fake, shape, body(a)) == 0  # nothing seen yet
    assert cached(fake, shape, body(a, b)) == 0  # shares 1,004 tokens: under the minimum
    # a second identical request is fully cached (OpenAI: in whole 128-token steps)
    assert cached(fake, shape, body(a, b)) == cacheable(shape, 2_008)
    assert fake.calls[-1].prompt_tokens == 2_008
    # a growing history reuses the whole previous request
    assert cached(fake, shape, body(a, b, c)) == cacheable(shape, 2_008)
    # the cut moves by one message: the prefix is new
    assert cached(fake, shape, body(b, c)) == 0
    assert cached(fake, shape, body(b, c)) == cacheable(shape, 2_008)
    # the models' caches are separate
    other = {**body(a, b), "model": "sim-other"}
    assert cached(fake, shape, other) == 0


def test_prefix_cache_forgets_old_requests() -> None:
    fake = CacheProvider(window=100_000, memory=1)
    a, b, c = msg("a"), msg("b"), msg("c")
    cached(fake, "anthropic", body(a, b))
    cached(fake, "anthropic", body(c, b))
    assert cached(fake, "anthropic", body(a, b)) == 0  # evicted by the request in between
    assert cached(fake, "anthropic", body(a, b)) == 2_008


def test_tools_and_system_are_prefix_units() -> None:
    fake = CacheProvider(window=100_000)
    tools = [{"name": "t", "description": "d" * 4_000, "input_schema": {"type": "object"}}]
    first = {**body(msg("a")), "tools": tools, "system": "s" * 100}
    cached(fake, "anthropic", first)
    # same tools and system, another message: the tools and the system are read from cache
    second = {**body(msg("b")), "tools": tools, "system": "s" * 100}
    expect = unit_tokens(tools, message=False) + unit_tokens("s" * 100, message=False)
    assert cached(fake, "anthropic", second) == expect
    # another system prompt: only the tools are shared
    third = {**body(msg("b")), "tools": tools, "system": "z" * 100}
    assert cached(fake, "anthropic", third) == unit_tokens(tools, message=False)


@pytest.mark.parametrize("shape", ["openai", "anthropic"])
@pytest.mark.parametrize("max_tokens", [None, 600])
def test_overflow_errors_read_as_real_ones(shape: Shape, max_tokens: int | None) -> None:
    fake = CacheProvider(window=2_700)
    assert fake.answer(shape, body(msg("a"), msg("b"), max_tokens=max_tokens))[0] == 200
    status, out = fake.answer(shape, body(msg("a"), msg("b"), msg("c"), max_tokens=max_tokens))
    assert status == 400 and isinstance(out, bytes)
    assert fake.calls[-1].status == 400 and fake.calls[-1].cached_tokens == 0
    found = detect_overflow(400, out, wire_format=shape)
    assert found is not None
    assert (found.real, found.maximum) == (3_012, 2_700)
    # prompt + max_tokens over the window: the itemised error, the prompt part as `real`
    status, out = fake.answer(shape, body(msg("a"), msg("b"), max_tokens=600))
    assert status == 200
    status, out = fake.answer(shape, body(msg("a"), msg("b"), max_tokens=900))
    assert status == 400 and isinstance(out, bytes)
    found = detect_overflow(400, out, wire_format=shape)
    assert found is not None and found.real == 2_008


@pytest.mark.parametrize("stream", [False, True])
def test_usage_reports_the_cached_part(stream: bool) -> None:
    fake = CacheProvider(window=100_000)
    b = {**body(msg("a"), msg("b")), "stream": stream}
    fake.answer("openai", b)
    _, out = fake.answer("openai", b)
    last = out if isinstance(out, bytes) else out[-1].split(b"\n\n")[0].removeprefix(b"data: ")
    usage = orjson.loads(last)["usage"]
    assert usage["prompt_tokens"] == 2_008
    assert usage["prompt_tokens_details"]["cached_tokens"] == 1_920
    fake.answer("anthropic", b)
    _, out = fake.answer("anthropic", b)
    if isinstance(out, bytes):
        usage = orjson.loads(out)["usage"]
    else:
        usage = orjson.loads(out[0].split(b"data: ", 1)[1])["message"]["usage"]
    assert usage["cache_read_input_tokens"] == 2_008
    assert usage["cache_creation_input_tokens"] + usage["input_tokens"] == 0


def test_scripts_are_seeded() -> None:
    assert make_script("agent", 30, 7) == make_script("agent", 30, 7)
    assert make_script("agent", 30, 7) != make_script("agent", 30, 8)
    agent = make_script("agent", 120, 1)
    assert len(agent.steps) == 120
    assert any(r.tool_id for r, _ in agent.steps) and any(not r.tool_id for r, _ in agent.steps)


def check_run(r: dict[str, Any], shape: Shape, window: int) -> None:
    records = r["records"]
    ok = [x for x in records if x["status"] == 200]
    assert r["ok"] == len(ok) and r["sent"] == len(records)
    assert r["upstream_calls"] >= r["sent"]
    for share in (r["cached_share"], r["cached_share_trimmed"]):
        assert share is None or 0.0 <= share <= 1.0
    assert r["prompt_tokens"] == sum(x["prompt"] for x in ok)
    assert r["cached_tokens"] == sum(x["cached"] for x in ok)
    cost = r["prompt_tokens"] - 0.9 * r["cached_tokens"]
    assert abs(r["input_cost"] - cost) <= 0.5
    for x in ok:
        assert 0 <= x["cached"] <= x["prompt"] <= window
    # an untrimmed request extends the previous one: its cache read is the previous prompt
    for prev, cur in itertools.pairwise(records):
        if prev["status"] == cur["status"] == 200 and not prev["trimmed"] and not cur["trimmed"]:
            assert cur["cached"] == cacheable(shape, prev["prompt"])
    assert r["cut_moves"] <= r["trimmed_pairs"] <= max(0, r["trimmed"] - 1)


@pytest.mark.parametrize("shape", ["openai", "anthropic"])
async def test_tiny_session_end_to_end(shape: Shape, tmp_path: Path) -> None:
    window = 6_000
    common: dict[str, Any] = {
        "profile": "chat",
        "shape": shape,
        "requests": 20,
        "window": window,
        "run_seconds": 30.0,
        "workdir": tmp_path,
    }
    direct = await run_one(RunSpec(variant=Variant.parse("direct"), **common))
    check_run(direct, shape, window)
    # without a proxy the session dies at its first refused request
    assert direct["first_failure"] is not None
    assert direct["ok"] == direct["first_failure"] == direct["sent"] - 1
    assert direct["trimmed"] == 0 and direct["cached_share"] > 0.5

    base = await run_one(RunSpec(variant=Variant.parse("base:{}"), **common))
    check_run(base, shape, window)
    assert base["ok"] == base["sent"] == 20
    assert base["trimmed"] > 0 and base["cached_share_trimmed"] is not None
    assert 0.5 < base["utilisation_trimmed"] <= 1.0
    # before any trim the proxy forwards what the client sent: the same figures as direct
    n = direct["first_failure"]
    assert [x["cached"] for x in base["records"][:n]] == [
        x["cached"] for x in direct["records"][:n]
    ]
    assert all(x["header_trimmed"] == "true" for x in base["records"] if x["trimmed"])


async def test_unsupported_config_is_reported(tmp_path: Path) -> None:
    spec = RunSpec(
        profile="chat",
        shape="openai",
        variant=Variant.parse('nokey:{"trimming": {"no_such_key": 1}}'),
        requests=5,
        window=6_000,
        workdir=tmp_path,
    )
    r = await run_one(spec)
    assert "trimming.no_such_key" in r["unsupported"]
    assert "records" not in r


def test_variant_specs() -> None:
    assert Variant.parse("direct").config is None
    assert Variant.parse("base:{}").config == {}
    assert Variant.parse("y:{trimming: {cut_step: 0}}").config == {"trimming": {"cut_step": 0}}
    for bad in ("x", ":{}", "x:[1]"):
        with pytest.raises(ValueError):
            Variant.parse(bad)
