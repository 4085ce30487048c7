"""A real Prometheus scraping a running trimgate.

Trims of each reason (and caps, orphans, tool-result caps, an exhausted
overflow, calibration) go through trimgate for two teams (metering by team
on); Prometheus scrapes it every second; the test then reads the counters
back through Prometheus' HTTP API, per team too, and runs every alert
expression and dashboard query of deploy/ against it.

Needs Debian's ``prometheus`` package (server and promtool): ``.ci/run``
installs it. Without it the test is skipped locally and fails under CI.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.fakes import (
    FakeProvider,
    Recorded,
    Reply,
    free_port,
    json_reply,
    openai_cached_ok,
    openai_overflow,
)
from tests.proxy.bodies import openai_chat
from tests.proxy.conftest import MakeStack, Stack

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"

pytestmark = [
    pytest.mark.shell,
    pytest.mark.skipif(
        shutil.which("prometheus") is None and not os.environ.get("CI"),
        reason="Debian's prometheus package is not installed (.ci/run installs it)",
    ),
]


def test_promtool_rule_unit_tests() -> None:
    out = subprocess.run(
        ["promtool", "test", "rules", str(DEPLOY / "prometheus" / "rules_test.yml")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    check = subprocess.run(
        ["promtool", "check", "rules", str(DEPLOY / "prometheus" / "rules.yml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.returncode == 0, check.stdout + check.stderr


async def query(session: aiohttp.ClientSession, base: str, expr: str) -> list[dict[str, Any]]:
    async with session.get(f"{base}/api/v1/query", params={"query": expr}) as resp:
        body = await resp.json()
    assert body["status"] == "success", body
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


async def value(session: aiohttp.ClientSession, base: str, expr: str) -> float | None:
    result = await query(session, base, expr)
    return float(result[0]["value"][1]) if result else None


def responder(r: Recorded) -> Reply:
    body = r.json()
    if "overflow-always" in str(body.get("model")):
        return openai_overflow(200_000, 128_000)
    prompt = int(len(r.body) / 4 * 1.2)
    return json_reply(openai_cached_ok(prompt, prompt // 2))  # half of it from the cache


TEAMS = ("payments", "search")


def total(stack: Stack, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples that carry ``labels`` (whatever their team)."""
    return sum(
        s.value
        for family in stack.registry.collect()
        for s in family.samples
        if s.name == name and labels.items() <= s.labels.items()
    )


async def drive(stack: Stack, team: str) -> None:
    async def post(path: str, json: dict[str, Any]) -> None:
        resp = await stack.client.post(path, json=json, headers={"x-trimgate-agent": team})
        await resp.read()

    for _ in range(3):  # preemptive
        await post("/v1/chat/completions", json=openai_chat(8, model="small-1"))
    stack.fake.then(openai_overflow(150_000, 128_000))  # reactive
    await post("/v1/chat/completions", json=openai_chat(10, model="gpt-4o"))
    await post("/v1/chat/completions", json=openai_chat(1, model="gpt-4o-overflow-always"))
    orphan = openai_chat(2, size=10, model="gpt-4o")
    orphan["messages"].insert(1, {"role": "tool", "tool_call_id": "gone", "content": "x"})
    await post("/v1/chat/completions", json=orphan)
    for _ in range(5):  # plain traffic
        await post("/v1/chat/completions", json=openai_chat(3, model="gpt-4o"))


async def test_real_prometheus_scrapes_trimgate(make_stack: MakeStack, tmp_path: Path) -> None:
    stack = await make_stack(
        FakeProvider(responder),
        models=[
            {"match": "small-*", "context_window": 1000},
            {
                "match": "capped-*",
                "context_window": 100_000,
                "trimming": {"max_history_messages": 4, "max_tool_result_chars": 100},
            },
        ],
        metrics={"attribution": {"allow": list(TEAMS)}},
    )
    target = stack.base.removeprefix("http://")
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        f"rule_files: ['{DEPLOY / 'prometheus' / 'rules.yml'}']\n"
        "scrape_configs:\n"
        "  - job_name: trimgate\n"
        f"    static_configs: [{{targets: ['{target}']}}]\n"
    )
    proc = subprocess.Popen(  # noqa: ASYNC220 - started once, waited on in a thread
        [
            "prometheus",
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as session:
            for _ in range(150):
                try:
                    async with session.get(f"{base}/-/ready") as resp:
                        if resp.status == 200:
                            break
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.2)
            else:
                pytest.fail("prometheus did not become ready")

            # Twice, with scrapes between: rate() and increase() need a series to
            # exist before it moves.
            for _ in range(2):
                for team in TEAMS:
                    await drive(stack, team)
                await stack.client.post(  # no team: unattributed
                    "/v1/chat/completions", json=openai_chat(8, size=600, model="capped-1")
                )
                wanted = 'trimgate_trims_total{reason="reactive"}'
                for _ in range(100):
                    if await value(session, base, wanted) is not None:
                        break
                    await asyncio.sleep(0.2)
                await asyncio.sleep(3)

            trims = await value(session, base, 'sum(trimgate_trims_total{reason="preemptive"})')
            assert trims == total(stack, "trimgate_trims_total", reason="preemptive")
            assert trims >= 12
            assert await value(session, base, "sum(trimgate_trims_total{reason='reactive'})") == 4
            assert await value(session, base, "sum(trimgate_trim_exhausted_total)") == 4
            assert (await value(session, base, "sum(trimgate_context_overflows_total)") or 0) >= 4
            assert (await value(session, base, "sum(trimgate_orphans_removed_total)") or 0) >= 1
            assert (await value(session, base, "sum(trimgate_capped_messages_total)") or 0) >= 1
            assert (await value(session, base, "sum(trimgate_tool_results_capped_total)") or 0) >= 1
            ratio = await value(
                session, base, 'trimgate_estimate_calibration_ratio{model="gpt-4o"}'
            )
            assert ratio is not None and ratio > 1.0
            cached = await value(session, base, "sum(trimgate_prompt_cache_read_tokens_total)")
            assert cached is not None and cached > 0
            shares = await query(
                session, base, "upstream_model:trimgate_trimmed_prompt_cache_share:ratio15m"
            )
            assert shares and all(0.45 < float(r["value"][1]) <= 0.5 for r in shares)
            models = {
                r["metric"]["model"] for r in await query(session, base, "trimgate_requests_total")
            }
            assert models <= {"small-*", "capped-*", "gpt-4o", "other"}

            # by team: each team's own counts, and the recording rules per team
            for team in TEAMS:
                by_team = f'sum(trimgate_trims_total{{team="{team}"}})'
                assert await value(session, base, by_team) == total(
                    stack, "trimgate_trims_total", team=team
                )
                exhausted = f'sum(trimgate_trim_exhausted_total{{team="{team}"}})'
                assert await value(session, base, exhausted) == 2
            teams = {
                r["metric"]["team"]
                for r in await query(session, base, "team:trimgate_trim_share:ratio15m")
            }
            assert teams == {*TEAMS, "unattributed"}
            dropped = await query(session, base, "team:trimgate_tokens_dropped:rate5m")
            assert {r["metric"]["team"] for r in dropped} >= set(TEAMS)
            assert all(float(r["value"][1]) > 0 for r in dropped if r["metric"]["team"] in TEAMS)
            team_cache = await query(session, base, "team:trimgate_prompt_cache_share:ratio15m")
            assert {r["metric"]["team"] for r in team_cache} >= set(TEAMS)
            trimmed = await query(
                session, base, "team:trimgate_trimmed_prompt_cache_share:ratio15m"
            )
            assert {r["metric"]["team"] for r in trimmed} >= set(TEAMS)
            assert all(0.45 < float(r["value"][1]) <= 0.5 for r in trimmed)

        check = await asyncio.to_thread(
            subprocess.run,
            [
                sys.executable,
                str(DEPLOY / "check_promql.py"),
                base,
                "--require-data",
                "--rate-interval",
                "1m",
                # no subscriber is connected and none lost an event in this run
                "--allow-empty",
                "events_dropped|event_subscribers",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert check.returncode == 0, check.stdout + check.stderr
    finally:
        proc.terminate()
        try:
            await asyncio.to_thread(proc.wait, 20)
        except subprocess.TimeoutExpired:
            proc.kill()
            await asyncio.to_thread(proc.wait, 10)
