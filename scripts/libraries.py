"""The heavy client libraries through trimgate, outside the test suite.

tests/proxy/test_libraries.py covers the libraries that are cheap to install (the
``test`` extra: google-genai, langchain-openai, langchain-anthropic). These pull in a
lot more (MCP servers, boto3, tokenizers...), so CI does not install them; run this
before a release, or after touching routing, framing or the codecs:

    pip install -e '.[test]' openai-agents 'pydantic-ai-slim[openai,anthropic]' litellm
    python scripts/libraries.py            # or: python scripts/libraries.py litellm

For each library: a plain call, a streamed call, and a long history that trimgate
must trim (seen in the trim event), through trimgate to a loopback fake provider
(tests/fakes.py): no network, no API key. Prints one line per check; exits 1 when
one fails, 2 when a library is not installed.
"""

from __future__ import annotations

import asyncio
import os
import sys
import traceback
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no download at import
os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")  # no traces sent anywhere

from tests.fakes import FakeProvider
from tests.proxy.conftest import Stack, stacks
from tests.proxy.test_libraries import CRUMB, any_api

TURNS = 8
SIZE = 800  # characters per user message: 8 turns overflow the 1000-token `small-*` model


def long_chat() -> list[dict[str, str]]:
    messages = [{"role": "system", "content": "You are a careful agent."}]
    for t in range(TURNS):
        messages.append({"role": "user", "content": f"task {t}: " + "u" * SIZE})
        if t < TURNS - 1:
            messages.append({"role": "assistant", "content": f"done {t}"})
    return messages


def trimmed(stack: Stack) -> bool:
    sent = stack.fake.requests[-1].body
    events = stack.events()
    return CRUMB.encode() in sent and b"task 0:" not in sent and bool(events)


# --- openai-agents -----------------------------------------------------------------


async def openai_agents(stack: Stack) -> dict[str, bool]:
    from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=stack.base + "/v1", api_key="sk-test", max_retries=0)
    model = OpenAIChatCompletionsModel(model="small-1", openai_client=client)
    agent = Agent(name="helper", instructions="You are a careful agent.", model=model)
    history: Any = long_chat()[1:]
    plain = await Runner.run(agent, input=[history[-1]])
    streamed = Runner.run_streamed(agent, input=[history[-1]])
    async for _ in streamed.stream_events():
        pass
    streamed_ok = streamed.final_output == "ok" and stack.fake.requests[-1].json()["stream"]
    long = await Runner.run(agent, input=history)
    return {
        "call": plain.final_output == "ok",
        "stream": bool(streamed_ok),
        "trim": long.final_output == "ok" and trimmed(stack),
    }


# --- pydantic-ai ---------------------------------------------------------------------


async def pydantic_ai(stack: Stack) -> dict[str, bool]:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.anthropic import AnthropicProvider
    from pydantic_ai.providers.openai import OpenAIProvider

    history: list[Any] = []
    chat = long_chat()
    for m in chat[1:-1]:
        if m["role"] == "user":
            history.append(ModelRequest(parts=[UserPromptPart(content=m["content"])]))
        else:
            history.append(ModelResponse(parts=[TextPart(content=m["content"])]))
    out: dict[str, bool] = {}
    providers = {
        "openai": OpenAIChatModel(
            "small-1", provider=OpenAIProvider(base_url=stack.base + "/v1", api_key="sk-test")
        ),
        "anthropic": AnthropicModel(
            "small-1", provider=AnthropicProvider(base_url=stack.base, api_key="sk-ant-test")
        ),
    }
    for name, model in providers.items():
        agent = Agent(model, instructions="You are a careful agent.")
        plain = await agent.run("hello")
        out[f"{name} call"] = plain.output == "ok"
        async with agent.run_stream("hello") as result:
            text = await result.get_output()
        out[f"{name} stream"] = text == "ok" and stack.fake.requests[-1].json()["stream"]
        long = await agent.run(chat[-1]["content"], message_history=history)
        out[f"{name} trim"] = long.output == "ok" and trimmed(stack)
    return out


# --- litellm -------------------------------------------------------------------------


async def litellm_(stack: Stack) -> dict[str, bool]:
    import litellm

    out: dict[str, bool] = {}
    targets = {
        "openai": ("openai/small-1", stack.base + "/v1"),
        "anthropic": ("anthropic/small-1", stack.base),
    }
    for name, (model, base) in targets.items():
        kw: dict[str, Any] = {"model": model, "api_base": base, "api_key": "sk-test"}
        if name == "anthropic":
            kw["max_tokens"] = 100
        hello = [{"role": "user", "content": "hello"}]
        plain = await litellm.acompletion(messages=hello, **kw)
        out[f"{name} call"] = plain.choices[0].message.content == "ok"
        chunks = await litellm.acompletion(messages=hello, stream=True, **kw)
        text = "".join([c.choices[0].delta.content or "" async for c in chunks])
        out[f"{name} stream"] = text == "ok"
        long = await litellm.acompletion(messages=long_chat(), **kw)
        out[f"{name} trim"] = long.choices[0].message.content == "ok" and trimmed(stack)
    return out


LIBRARIES: dict[str, Callable[[Stack], Awaitable[dict[str, bool]]]] = {
    "openai-agents": openai_agents,
    "pydantic-ai": pydantic_ai,
    "litellm": litellm_,
}


async def main(names: list[str]) -> int:
    failed = missing = 0
    async with stacks("trimgate", "trimgate") as make:
        for name in names:
            stack = await make(FakeProvider(any_api))
            try:
                results = await LIBRARIES[name](stack)
            except ImportError as exc:
                print(f"{name}: not installed ({exc.name})")
                missing += 1
                continue
            except Exception:
                print(f"{name}: FAIL (raised)")
                traceback.print_exc()
                failed += 1
                continue
            for check, ok in results.items():
                print(f"{name} {check}: {'ok' if ok else 'FAIL'}")
                failed += not ok
    return 1 if failed else 2 if missing else 0


if __name__ == "__main__":
    chosen = sys.argv[1:] or list(LIBRARIES)
    unknown = [n for n in chosen if n not in LIBRARIES]
    if unknown:
        print(f"unknown library: {', '.join(unknown)} (choose from {', '.join(LIBRARIES)})")
        raise SystemExit(2)
    raise SystemExit(asyncio.run(main(chosen)))
