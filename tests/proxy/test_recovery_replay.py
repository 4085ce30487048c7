"""Real error bodies no reader recognises, replayed end to end (bench/recovery.py): a
growing session gets past them through the probes, and look-alikes go back as sent."""

from __future__ import annotations

import argparse

from bench.recovery import run

# overflows no table lists and no generic reader recognises: CLOVA's "Text too long" and
# GigaChat's 413 "Payload too large" (worded suspects), LLM-GW's "No suitable variant"
# (a plain 400, probed past the largest body that passed)
MISSED = {
    "hb12-clova-40003-textlong",
    "hb13-gigachat-413-payload-too-large-context",
    "hb57-llm-gw-no-suitable-variant",
}
# a rate limit, and a plain 400 that stays whatever is sent
LOOK_ALIKES = {"hb40-mlxengine-413-body-limit", "openai-tpm-rate-limit-reached-429"}


async def test_a_growing_session_gets_past_unrecognised_overflows() -> None:
    args = argparse.Namespace(
        threshold=60_000, tables_off=False, only=sorted(MISSED | LOOK_ALIKES), verbose=False
    )
    outcomes = {o.ident: o for o in await run(args)}
    assert set(outcomes) == MISSED | LOOK_ALIKES
    for ident in MISSED:
        assert outcomes[ident].answered and outcomes[ident].calls == 2, outcomes[ident]
    for ident in LOOK_ALIKES:
        assert not outcomes[ident].answered, outcomes[ident]
