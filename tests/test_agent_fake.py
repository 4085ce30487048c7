"""bench.agent_fake answers each wire format as the agents expect, and records it all.

Real clients on loopback: the official openai and anthropic SDKs, aiohttp for
Gemini and for the Responses WebSocket mode.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import anthropic
import openai
import pytest
from aiohttp import WSMsgType
from aiohttp.test_utils import TestServer

from bench.agent_fake import DONE_MARK, AgentFake, Script

SHELL_PARAMS = {
    "type": "object",
    "properties": {"command": {"type": "string"}, "description": {"type": "string"}},
    "required": ["command", "description"],
}


@pytest.fixture
async def fake() -> AsyncIterator[tuple[AgentFake, str]]:
    agent_fake = AgentFake(websocket=True, script=Script(rounds=2, commands=("ls", "cat a.txt")))
    server = TestServer(agent_fake.app(), host="127.0.0.1")
    await server.start_server()
    try:
        yield agent_fake, str(server.make_url("")).rstrip("/")
    finally:
        await server.close()


# --------------------------------------------------------------------------- Responses


def _responses_tools() -> list[Any]:
    return [
        {
            "type": "function",
            "name": "shell",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "array", "items": {"type": "string"}}},
            },
        }
    ]


async def test_responses_stream_scripts_tool_calls_then_text(fake: tuple[AgentFake, str]) -> None:
    agent_fake, base = fake
    client = openai.AsyncOpenAI(base_url=base + "/v1", api_key="sk-test", max_retries=0)
    items: list[Any] = [{"role": "user", "content": "go"}]
    seen: list[str] = []
    for _ in range(3):
        stream = await client.responses.create(
            model="m", input=items, tools=_responses_tools(), stream=True
        )
        types = []
        final = None
        async for ev in stream:
            types.append(ev.type)
            if ev.type == "response.completed":
                final = ev.response
        assert types[0] == "response.created" and types[-1] == "response.completed"
        assert final is not None and final.usage is not None and final.usage.input_tokens > 0
        item = final.output[0]
        if item.type == "function_call":
            assert json.loads(item.arguments) == {
                "command": ["bash", "-lc", ["ls", "cat a.txt"][len(seen)]]
            }
            seen.append(item.name)
            items += [
                item.model_dump(exclude_none=True),
                {"type": "function_call_output", "call_id": item.call_id, "output": "x"},
            ]
        else:
            assert item.type == "message"
            assert final.output_text.startswith(DONE_MARK)
            break
    assert seen == ["shell", "shell"]
    recs = agent_fake.records
    assert [r.answer for r in recs] == ["tool:ls", "tool:cat a.txt", "text"]
    assert all(
        r.transport == "http" and r.path == "/v1/responses" and r.fmt == "responses" for r in recs
    )
    assert recs[0].headers["authorization"] == "<redacted>"  # credentials are not recorded
    assert "sk-test" not in json.dumps([r.as_json() for r in recs])
    assert recs[2].body["input"][-1]["type"] == "function_call_output"
    await client.close()


async def test_responses_overflow_is_the_real_error(fake: tuple[AgentFake, str]) -> None:
    agent_fake, base = fake
    agent_fake.script.windows = {"small": 50}
    client = openai.AsyncOpenAI(base_url=base + "/v1", api_key="sk-test", max_retries=0)
    with pytest.raises(openai.BadRequestError) as err:
        await client.responses.create(model="small", input="x" * 400)
    assert err.value.code == "context_length_exceeded"
    ok = await client.responses.create(model="small", input="short")
    assert ok.output_text == "ok"  # no shell tool offered: a plain text
    assert [r.answer for r in agent_fake.records] == ["overflow", "text"]
    assert agent_fake.records[0].status == 400
    await client.close()


async def test_responses_websocket_mode(fake: tuple[AgentFake, str]) -> None:
    agent_fake, base = fake
    async with (
        aiohttp.ClientSession() as s,
        s.ws_connect(
            base + "/v1/responses", headers={"OpenAI-Beta": "responses_websockets=2026-02-06"}
        ) as ws,
    ):
        create: dict[str, Any] = {
            "type": "response.create",
            "model": "m",
            "tools": _responses_tools(),
            "input": [{"role": "user", "content": "go"}],
        }
        await ws.send_str(json.dumps({**create, "generate": False}))
        warm = [json.loads((await ws.receive()).data) for _ in range(2)]
        assert [e["type"] for e in warm] == ["response.created", "response.completed"]
        assert warm[1]["response"]["output"] == []
        await ws.send_str(
            json.dumps({**create, "previous_response_id": warm[1]["response"]["id"], "input": []})
        )
        events = []
        while True:
            msg = await ws.receive()
            assert msg.type == WSMsgType.TEXT
            events.append(json.loads(msg.data))
            if events[-1]["type"] == "response.completed":
                break
        call = events[-1]["response"]["output"][0]
        assert (
            call["type"] == "function_call" and json.loads(call["arguments"])["command"][-1] == "ls"
        )
        out = {"type": "function_call_output", "call_id": call["call_id"], "output": "a.txt"}
        await ws.send_str(
            json.dumps(
                {**create, "previous_response_id": events[-1]["response"]["id"], "input": [out]}
            )
        )
        while (ev := json.loads((await ws.receive()).data))["type"] != "response.completed":
            pass
        assert ev["response"]["output"][0]["name"] == "shell"
        agent_fake.script.windows = {"m": 10}
        await ws.send_str(
            json.dumps({**create, "previous_response_id": ev["response"]["id"], "input": []})
        )
        err = json.loads((await ws.receive()).data)
        assert err["type"] == "error" and err["status"] == 400
        assert err["error"]["code"] == "context_length_exceeded"
    recs = agent_fake.records
    assert [r.transport for r in recs] == ["ws-handshake", "ws", "ws", "ws", "ws"]
    assert (
        recs[0].status == 101
        and recs[0].headers["openai-beta"] == "responses_websockets=2026-02-06"
    )
    assert [r.answer for r in recs[1:]] == ["prewarm", "tool:ls", "tool:cat a.txt", "overflow"]
    # the continued request is counted with the whole input kept on the connection
    assert recs[3].effective["input"][0] == {"role": "user", "content": "go"}
    assert recs[3].effective["input"][-1] == out


async def test_responses_websocket_refused_when_off(fake: tuple[AgentFake, str]) -> None:
    agent_fake, base = fake
    agent_fake.websocket = False
    async with aiohttp.ClientSession() as s:
        with pytest.raises(aiohttp.WSServerHandshakeError) as err:
            await s.ws_connect(base + "/v1/responses")
    assert err.value.status == 405
    assert [(r.transport, r.status, r.answer) for r in agent_fake.records] == [
        ("ws-handshake", 405, "refused")
    ]


# --------------------------------------------------------------------------- Anthropic


async def test_anthropic_stream_tool_use_then_text(fake: tuple[AgentFake, str]) -> None:
    agent_fake, base = fake
    client = anthropic.AsyncAnthropic(base_url=base, api_key="sk-ant-test", max_retries=0)
    tools: Any = [{"name": "Bash", "description": "run", "input_schema": SHELL_PARAMS}]
    messages: list[Any] = [{"role": "user", "content": [{"type": "text", "text": "go"}]}]
    for expected in ("ls", "cat a.txt"):
        async with client.messages.stream(
            model="c", max_tokens=100, messages=messages, tools=tools
        ) as stream:
            msg = await stream.get_final_message()
        assert msg.stop_reason == "tool_use"
        block = msg.content[0]
        assert block.type == "tool_use" and block.name == "Bash"
        assert block.input == {"command": expected, "description": f"run {expected}"}
        messages += [
            {"role": "assistant", "content": [block.model_dump()]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": block.id, "content": "x"}],
            },
        ]
    final = await client.messages.create(model="c", max_tokens=100, messages=messages, tools=tools)
    assert final.stop_reason == "end_turn"
    assert final.content[0].type == "text" and final.content[0].text.startswith(DONE_MARK)
    count = await client.messages.count_tokens(model="c", messages=messages)
    assert count.input_tokens > 0
    agent_fake.script.windows = {"c": 20}
    with pytest.raises(anthropic.BadRequestError) as err:
        await client.messages.create(model="c", max_tokens=100, messages=messages, tools=tools)
    assert "prompt is too long" in str(err.value)
    assert [r.answer for r in agent_fake.records] == [
        "tool:ls",
        "tool:cat a.txt",
        "text",
        "count",
        "overflow",
    ]
    sent = agent_fake.records[0].headers
    assert "<redacted>" in (sent.get("x-api-key"), sent.get("authorization"))
    assert "sk-ant-test" not in json.dumps([r.as_json() for r in agent_fake.records])
    await client.close()


# --------------------------------------------------------------------------- Gemini


async def test_gemini_function_calls_stream_and_overflow(fake: tuple[AgentFake, str]) -> None:
    agent_fake, base = fake
    tools = [
        {
            "functionDeclarations": [
                {"name": "run_shell_command", "parametersJsonSchema": SHELL_PARAMS}
            ]
        }
    ]
    contents: list[Any] = [{"role": "user", "parts": [{"text": "go"}]}]
    url = base + "/v1beta/models/g:streamGenerateContent?alt=sse"
    async with aiohttp.ClientSession(headers={"x-goog-api-key": "goog-secret"}) as s:
        async with s.post(url, json={"contents": contents, "tools": tools}) as r:
            assert r.status == 200 and r.content_type == "text/event-stream"
            text = (await r.read()).decode()
        chunk = json.loads(text.removeprefix("data: ").strip())
        call = chunk["candidates"][0]["content"]["parts"][0]["functionCall"]
        assert call == {
            "name": "run_shell_command",
            "args": {"command": "ls", "description": "run ls"},
        }
        assert chunk["usageMetadata"]["promptTokenCount"] > 0
        contents += [
            {"role": "model", "parts": [{"functionCall": call}]},
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"name": call["name"], "response": {"output": "a.txt"}}}
                ],
            },
            {"role": "model", "parts": [{"functionCall": call}]},
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"name": call["name"], "response": {"output": "a"}}}
                ],
            },
        ]
        async with s.post(
            base + "/v1beta/models/g:generateContent", json={"contents": contents, "tools": tools}
        ) as r:
            done = await r.json()
        assert done["candidates"][0]["content"]["parts"][0]["text"].startswith(DONE_MARK)
        schema = {
            "type": "object",
            "properties": {
                "next_speaker": {"type": "string", "enum": ["user", "model"]},
                "reasoning": {"type": "string"},
            },
        }
        body = {
            "contents": contents,
            "generationConfig": {
                "responseMimeType": "application/json",
                "responseJsonSchema": schema,
            },
        }
        async with s.post(base + "/v1beta/models/g:generateContent", json=body) as r:
            answer = json.loads((await r.json())["candidates"][0]["content"]["parts"][0]["text"])
        assert answer == {"next_speaker": "user", "reasoning": "ok"}
        agent_fake.script.windows = {"g": 30}
        async with s.post(
            base + "/v1beta/models/g:generateContent", json={"contents": contents}
        ) as r:
            assert r.status == 400
            err = await r.json()
        assert err["error"]["status"] == "INVALID_ARGUMENT"
        assert "exceeds the maximum number of tokens allowed (30)" in err["error"]["message"]
        async with s.get(base + "/v1/models") as r:
            assert r.status == 404
        async with s.get(base + "/_fake/requests") as r:
            listed = await r.json()
    assert [x["answer"] for x in listed] == ["tool:ls", "text", "json", "overflow", "unknown path"]
    assert [x["model"] for x in listed[:4]] == ["g"] * 4
    assert listed[0]["headers"]["x-goog-api-key"] == "<redacted>"
    assert "goog-secret" not in json.dumps(listed)
