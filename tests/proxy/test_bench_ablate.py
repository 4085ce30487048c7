"""bench/ablate.py's variants still switch off what they say (the harness patches the shell)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import orjson
import pytest

from bench import ablate
from bench.__main__ import ROOT
from tests.proxy.bodies import openai_chat
from tests.proxy.conftest import MakeStack
from trimgate.proxy import forward
from trimgate.proxy.app import PROXY


@pytest.mark.parametrize("variant", ["full", "shell", "parse", "decode", "examine"])
async def test_each_variant_forwards_as_it_says(
    variant: str, make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(forward.Proxy, "_examine", forward.Proxy._examine)  # restored after
    ablate.patch(variant)
    stack = await make_stack()
    body = orjson.dumps(openai_chat(8, model="small-1"))  # over the 1,000-token window
    resp = await stack.client.post("/v1/chat/completions", data=body)
    assert resp.status == 200
    (sent,) = stack.fake.requests
    if variant == "full":
        assert resp.headers["x-trimgate-trimmed"] == "true"
        assert len(sent.body) < len(body)
    else:  # examined or not, forwarded untouched and without trimgate's report
        assert sent.body == body
        assert "x-trimgate-trimmed" not in resp.headers


@pytest.mark.parametrize("variant", ["nosignals", "nousage"])
async def test_the_chat_path_variants_switch_off_their_part(
    variant: str, make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(forward, "_record", forward._record)  # restored after
    monkeypatch.setattr(forward, "UsageSniffer", forward.UsageSniffer)
    ablate.patch(variant)
    stack = await make_stack()
    resp = await stack.client.post("/v1/chat/completions", json=openai_chat(8, model="small-1"))
    assert resp.status == 200 and resp.headers["x-trimgate-trimmed"] == "true"
    await resp.read()
    await asyncio.sleep(0)
    labels = {"upstream": "openai", "model": "small-*", "reason": "preemptive"}
    trims = stack.metric("trimgate_trims_total", **labels)
    proxy = stack.app[PROXY]
    if variant == "nosignals":
        assert trims == 0 and proxy.calibration  # usage still read
    else:
        assert trims == 1 and not proxy.calibration


def test_against_measures_another_install_alongside() -> None:
    """``--against PYTHON`` serves from that interpreter's trimgate, outside the tree."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.ablate",
            "--rounds",
            "1",
            "--seconds",
            "0.3",
            "--variants",
            "full",
            "--against",
            os.path.relpath(sys.executable, ROOT),  # as a user types it, from the repository
        ],
        capture_output=True,
        timeout=120,
        check=True,
        cwd=ROOT,
    ).stdout.decode()
    rows = {line.split("|")[1].strip(): line.split("|")[2].strip() for line in out.splitlines()[3:]}
    assert set(rows) == {"full", "against"}
    for ok_failed in rows.values():
        ok, failed = (int(n) for n in ok_failed.split(" / "))
        assert ok > 0 and failed == 0


def test_the_teams_variant_hashes_and_matches_the_bench_key() -> None:
    from bench.__main__ import trimgate_config
    from trimgate.attribution import team_resolver
    from trimgate.config import parse_config

    config = parse_config(ablate.teams(trimgate_config("http://127.0.0.1:9")))
    resolve = team_resolver(config.metrics.attribution)
    assert resolve is not None
    assert resolve({"authorization": f"Bearer {ablate.BENCH_KEY}"}) == "bench"
    assert resolve({"authorization": "Bearer another"}) == "unattributed"
