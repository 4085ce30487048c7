"""bench/ablate.py's variants still switch off what they say (the harness patches the shell)."""

from __future__ import annotations

import orjson
import pytest

from bench import ablate
from tests.proxy.bodies import openai_chat
from tests.proxy.conftest import MakeStack
from trimgate.proxy import forward


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
