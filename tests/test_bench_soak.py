"""bench/soak.py: its fault layer does what the headers say, and its verdict reads right."""

from __future__ import annotations

import argparse

from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

from bench import soak
from bench.fake_provider import make_app


def args() -> argparse.Namespace:
    return argparse.Namespace(minutes=1.0, rate=10.0)


def series(rss_kb: list[int], fds: int = 16) -> list[soak.Sample]:
    return [soak.Sample(10.0 * i, r, fds, 0) for i, r in enumerate(rss_kb)]


def test_a_plateau_is_flat_and_growth_is_not() -> None:
    tally = soak.Tally()
    tally.outcomes["openai_json:ok"] = 10
    plateau = series(
        [50_000, 60_000, 65_000, 70_000, 70_500, 70_800, 71_000, 71_000, 71_000, 71_000]
    )
    assert soak.summarize(args(), plateau, tally)["verdict"] == "flat"
    growing = series(
        [50_000, 55_000, 60_000, 65_000, 70_000, 75_000, 80_000, 85_000, 90_000, 90_000]
    )
    result = soak.summarize(args(), growing, tally)
    assert result["verdict"] == "NOT flat" and not result["why"]["rss_flat"]
    leaking_fds = [soak.Sample(s.t, 70_000, 16 + 10 * i, 0) for i, s in enumerate(plateau)]
    assert not soak.summarize(args(), leaking_fds, tally)["why"]["fds_flat"]


def test_an_unexpected_outcome_or_call_count_is_not_flat() -> None:
    flat = series([70_000] * 9)
    tally = soak.Tally()
    tally.unexpected["reset:cut"] = 1
    assert soak.summarize(args(), flat, tally)["verdict"] == "NOT flat"
    tally = soak.Tally()
    tally.bad_calls["openai_json:2"] = 1
    assert soak.summarize(args(), flat, tally)["verdict"] == "NOT flat"


async def test_the_fault_layer_answers_as_its_headers_say() -> None:
    app = make_app()
    app.middlewares.append(soak.fault_layer)
    faults = soak.Faults()
    app[soak.FAULTS] = faults
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    plans = soak.plans()
    base = str(server.make_url("")).rstrip("/")
    try:
        async with ClientSession() as http:
            got = {
                kind: await soak.one(http, base, kind, plans[kind][0], kind)
                for kind in (
                    "openai_json",
                    "openai_stream",
                    "reset",
                    "reset_mid",
                    "provider_5xx",
                    "probe",
                    "probe_refuted",
                )
            }
    finally:
        await server.close()
    # straight at the fake: a reset is a cut connection (trimgate turns it into a 502)
    assert got == {
        "openai_json": "ok",
        "openai_stream": "ok",
        "reset": "cut",
        "reset_mid": "cut",
        "provider_5xx": "provider_5xx",
        # straight at the fake, both 400s go back as they are (trimgate probes them)
        "probe": "status_400",
        "probe_refuted": "status_400",
    }
    assert dict(faults.calls) == dict.fromkeys(got, 1)
