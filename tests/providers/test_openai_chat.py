"""The OpenAI Chat Completions codec: decode, encode, pairing, usage."""

from __future__ import annotations

import copy
import itertools
import re
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trimgate.errors import DecodeError
from trimgate.history import Role
from trimgate.providers.base import Decoded, DecodeOptions
from trimgate.providers.openai_chat import CODEC, OpenAIChatCodec
from trimgate.trimming import Policy, plan, text_tokens
from trimgate.trimming.estimate import bytes_tokens, message_tokens, utf8_len
from trimgate.trimming.pipeline import Placement, TrimPlan

DATA = Path(__file__).resolve().parent.parent / "data" / "openai_chat"
FIXTURES = sorted(p.name for p in DATA.glob("*.json"))
CRUMB = "[earlier turns omitted to fit the context window]"
OPTIONS = DecodeOptions(breadcrumb=CRUMB)
PATH = "/v1/chat/completions"

Body = dict[str, Any]


def load(name: str) -> Body:
    body: Body = orjson.loads((DATA / name).read_bytes())
    return body


def decode(body: Any) -> Decoded:
    return CODEC.decode(body, path=PATH, options=OPTIONS)


def run(body: Body, policy: Policy) -> tuple[Decoded, TrimPlan, Body]:
    decoded = decode(body)
    trim = plan(decoded.conversation, policy)
    return decoded, trim, CODEC.encode(decoded, trim, breadcrumb=CRUMB)


# -- the format's rules ------------------------------------------------------------------

ROLES = {"system", "developer", "user", "assistant", "tool", "function"}


def check_pairing(messages: list[Any], *, first_user: bool = True) -> None:
    """Raise AssertionError where OpenAI would reject ``messages``.

    * roles are valid; every item is an object;
    * ``tool`` messages stand right after an assistant ``tool_calls`` message (only tool
      messages between) and answer one of its ids, each id once;
    * every ``tool_calls`` id is answered by that run of tool messages (no pending calls);
      ``tool_calls`` is never an empty array; an assistant message has content or calls;
    * a legacy ``function`` message answers the ``function_call`` just before it, by name;
    * the first non-system message is a user message (``first_user``).
    """
    open_calls: set[str] | None = None  # ids of the current assistant tool_calls run
    fn_name: str | None = None
    seen_non_system = False
    for pos, m in enumerate(messages):
        assert isinstance(m, dict), pos
        role = m.get("role")
        assert role in ROLES, (pos, role)
        if role == "tool":
            assert open_calls is not None, f"tool message {pos} without a preceding call"
            call_id = m.get("tool_call_id")
            assert call_id in open_calls, (pos, call_id)
            open_calls.discard(call_id)
            continue
        if role == "function":
            assert fn_name is not None and m.get("name") == fn_name, pos
            fn_name = None
            continue
        assert not open_calls, f"calls {open_calls} not answered before message {pos}"
        open_calls = None
        assert fn_name is None, f"function_call not answered before message {pos}"
        if role not in ("system", "developer"):
            if first_user and not seen_non_system:
                assert role == "user", f"first non-system message is {role}"
            seen_non_system = True
        if role == "assistant":
            calls = m.get("tool_calls")
            fc = m.get("function_call")
            assert calls is None or (isinstance(calls, list) and calls), pos
            content = m.get("content")
            assert calls or fc or content or m.get("audio") or m.get("refusal"), pos
            if calls:
                ids = [c["id"] for c in calls]
                assert len(set(ids)) == len(ids)
                open_calls = set(ids)
            if fc:
                fn_name = fc["name"]
    assert not open_calls, f"calls {open_calls} left unanswered at the end"
    assert fn_name is None, "function_call left unanswered at the end"


def user_texts(messages: list[Any]) -> list[str]:
    out: list[str] = []
    for m in messages:
        if m.get("role") != "user":
            continue
        content = m["content"]
        if isinstance(content, str):
            out.append(content)
        else:
            out.append("".join(p.get("text", "") for p in content if isinstance(p, dict)))
    return out


# -- fixtures: round trip and trim -------------------------------------------------------


def test_fixtures_exist() -> None:
    assert len(FIXTURES) >= 4


@pytest.mark.parametrize("name", FIXTURES)
def test_untouched_round_trip(name: str) -> None:
    body = load(name)
    original = copy.deepcopy(body)
    _, trim, out = run(body, Policy(budget=0))
    assert not trim.changed
    assert out == original
    assert out is not body
    assert all(a is b for a, b in zip(out["messages"], body["messages"], strict=True))
    for key in body:
        assert out[key] is body[key] or key == "messages"
    assert body == original  # the input is never mutated
    check_pairing(out["messages"], first_user=False)


@pytest.mark.parametrize("name", FIXTURES)
def test_preemptive_trim_keeps_whole_turns(name: str) -> None:
    body = load(name)
    original = copy.deepcopy(body)
    decoded = decode(body)
    conv = decoded.conversation
    turns = sum(1 for m in conv.messages if m.turn_start)
    assert turns >= 2
    budget = conv.tokens // 2
    decoded, trim, out = run(body, Policy(budget=budget, breadcrumb_tokens=text_tokens(CRUMB)))
    assert body == original
    assert trim.report.trimmed
    assert trim.report.dropped_turns >= 1
    messages = out["messages"]
    check_pairing(messages)
    lead = 0
    while body["messages"][lead]["role"] in ("system", "developer"):
        assert messages[lead] is body["messages"][lead]
        lead += 1
    assert messages[lead] == {"role": "user", "content": CRUMB}
    # The rest is an untouched suffix of the original messages, starting at a user turn.
    tail = messages[lead + 1 :]
    start = len(body["messages"]) - len(tail)
    assert all(a is b for a, b in zip(tail, body["messages"][start:], strict=True))
    assert tail[0]["role"] == "user"
    again = decode(out)
    assert again.conversation.tokens == trim.report.tokens_after
    assert trim.report.tokens_after <= budget or trim.report.kept_turns == 1
    replanned = plan(
        again.conversation, Policy(budget=budget, breadcrumb_tokens=text_tokens(CRUMB))
    )
    assert not replanned.changed


# -- decode details ----------------------------------------------------------------------


def test_decode_agent_fixture() -> None:
    decoded = decode(load("agent_tools.json"))
    msgs = decoded.conversation.messages
    assert decoded.model == "gpt-4o-2024-08-06"
    assert decoded.output_limit == 4096
    assert decoded.stream is True
    assert decoded.hoistable is True
    assert decoded.conversation.pending_calls_ok is False
    roles = [m.role for m in msgs]
    assert roles[:3] == [Role.SYSTEM, Role.SYSTEM, Role.ASSISTANT]
    assert roles[12] is Role.SYSTEM  # a late system message stays in place
    assert [m.index for m in msgs] == list(range(len(msgs)))
    assert [i for i, m in enumerate(msgs) if m.turn_start] == [3, 8, 13]
    call = msgs[4]
    assert call.calls == ("call_9pXq1", "call_9pXq2")
    assert call.other_content is False
    assert call.text_bytes == sum(
        utf8_len(c["function"]["name"]) + utf8_len(c["function"]["arguments"])
        for c in load("agent_tools.json")["messages"][4]["tool_calls"]
    )
    assert msgs[9].calls == ("call_Ab7Kd",)
    assert msgs[9].other_content is True  # it says "Editing the config now."
    assert msgs[14].other_content is False  # content "" and calls only
    t1, t2 = msgs[5], msgs[6]
    assert t1.role is Role.TOOL and t1.results == ("call_9pXq1",) and not t1.other_content
    assert t2.tool_texts == ("reactive:\n  enabled: true\n  max_retries: 5\n",)
    body = load("agent_tools.json")
    tools = len(orjson.dumps(body["tools"]))
    assert decoded.conversation.overhead == bytes_tokens(tools)
    for m in msgs:
        assert m.tokens == message_tokens(m.text_bytes, m.media)


def test_decode_media_and_unknown_parts() -> None:
    body = load("vision_audio.json")
    decoded = decode(body)
    msgs = decoded.conversation.messages
    assert decoded.output_limit == 1024  # max_tokens when max_completion_tokens is absent
    assert decoded.stream is False
    assert [m.media for m in msgs] == [0, 1, 0, 1, 1, 2, 0, 1]
    assert msgs[1].text_bytes == utf8_len("What is in this image?")  # base64 is not text
    assert msgs[5].text_bytes == utf8_len(body["messages"][5]["content"][2]["text"])
    assert msgs[6].text_bytes == 2 * utf8_len("I can't read the attached PDF: it is encrypted.")
    unknown = body["messages"][7]["content"][2]
    assert msgs[7].text_bytes == utf8_len("Fine, just the chart then.") + len(orjson.dumps(unknown))
    assert msgs[1].tokens == message_tokens(msgs[1].text_bytes, 1)
    small = CODEC.decode(body, path=PATH, options=DecodeOptions(breadcrumb=CRUMB, media_tokens=10))
    assert small.conversation.messages[5].tokens == message_tokens(msgs[5].text_bytes, 2, 10)


def test_decode_legacy_functions() -> None:
    decoded = decode(load("legacy_functions.json"))
    msgs = decoded.conversation.messages
    assert msgs[2].calls == ("fn:2",) and msgs[2].other_content is False
    assert msgs[3].role is Role.TOOL and msgs[3].results == ("fn:2",)
    assert msgs[6].calls == ("fn:6",) and msgs[6].other_content is True
    assert msgs[7].results == ("fn:6",)
    assert msgs[3].tool_texts == (load("legacy_functions.json")["messages"][3]["content"],)
    assert decoded.conversation.overhead > 0  # legacy ``functions`` count as tools


def test_legacy_function_without_matching_call_is_anonymous() -> None:
    body = {
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "function", "name": "lookup", "content": "42"},
        ]
    }
    msg = decode(body).conversation.messages[1]
    assert msg.anonymous_results and msg.results == ()
    swept = plan(decode(body).conversation, Policy(budget=0))
    assert [m.index for m in swept.kept] == [0]


def test_decode_reasoning_custom_and_breadcrumb() -> None:
    body = load("reasoning_custom.json")
    decoded = decode(body)
    msgs = decoded.conversation.messages
    assert msgs[1].breadcrumb and not msgs[1].turn_start and msgs[1].role is Role.USER
    assert msgs[3].text_bytes == (
        utf8_len("calculator")
        + utf8_len(body["messages"][3]["tool_calls"][0]["function"]["arguments"])
        + utf8_len(body["messages"][3]["reasoning_content"])
    )
    custom = body["messages"][7]["tool_calls"][0]["custom"]
    assert msgs[7].calls == ("call_patch_1",)
    assert msgs[7].text_bytes == (
        utf8_len("Applying the patch.") + utf8_len(custom["name"]) + utf8_len(custom["input"])
    )
    assert msgs[8].tool_texts == ("Created result.txt", "1 file changed, 1 insertion(+)")
    assert msgs[9].role is Role.SYSTEM
    schema = body["response_format"]["json_schema"]
    expected = bytes_tokens(len(orjson.dumps(body["tools"]))) + bytes_tokens(
        len(orjson.dumps(schema))
    )
    assert decoded.conversation.overhead == expected
    single = {"messages": [{"role": "user", "content": [{"type": "text", "text": CRUMB}]}]}
    assert decode(single).conversation.messages[0].breadcrumb


def test_anonymous_tool_result() -> None:
    body = {
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "content": "done"},
        ]
    }
    msg = decode(body).conversation.messages[2]
    assert msg.anonymous_results and msg.results == () and msg.tool_texts == ("done",)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ([], "body is not an object"),
        ({"model": "gpt-4o"}, "messages is not a list"),
        ({"messages": {"role": "user"}}, "messages is not a list"),
        ({"messages": "hello"}, "messages is not a list"),
        ({"messages": [{"role": "user", "content": "a"}, "b"]}, "message is not an object"),
        ({"messages": [{"role": "wizard", "content": "a"}]}, "unknown message role"),
        ({"messages": [{"content": "a"}]}, "unknown message role"),
        ({"messages": [{"role": "assistant", "tool_calls": {}}]}, "tool_calls is not a list"),
        ({"messages": [{"role": "assistant", "tool_calls": [1]}]}, "tool call is not an object"),
        (
            {"messages": [{"role": "assistant", "tool_calls": [{"type": "function"}]}]},
            "tool call id is not a string",
        ),
        ({"messages": [{"role": "tool", "tool_call_id": 5}]}, "tool_call_id is not a string"),
        ({"messages": [{"role": "assistant", "function_call": "x"}]}, "function_call is not"),
    ],
)
def test_decode_errors(body: Any, reason: str) -> None:
    with pytest.raises(DecodeError) as info:
        decode(body)
    assert info.value.reason.startswith(reason)
    assert "hello" not in info.value.reason


def test_output_limit_and_model_types() -> None:
    base: Body = {"messages": []}
    assert decode(base).output_limit is None and decode(base).model is None
    assert decode({**base, "max_completion_tokens": 10, "max_tokens": 99}).output_limit == 10
    assert decode({**base, "max_completion_tokens": None, "max_tokens": 99}).output_limit == 99
    assert decode({**base, "max_tokens": True}).output_limit is None
    assert decode({**base, "stream": "yes"}).stream is False
    assert decode({**base, "model": 3}).model is None


# -- breadcrumb placements ---------------------------------------------------------------


def three_turns(first: Any) -> Body:
    return {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "old " * 200},
            {"role": "assistant", "content": "old answer " * 100},
            {"role": "user", "content": first},
            {"role": "assistant", "content": "fine"},
            {"role": "user", "content": "newest"},
        ],
    }


def policy(budget: int, placement: Placement) -> Policy:
    crumb = text_tokens(CRUMB) if placement != "none" else 0
    return Policy(budget=budget, breadcrumb_tokens=crumb, placement=placement)


def test_breadcrumb_message_shape() -> None:
    body = three_turns("middle")
    _, trim, out = run(body, policy(200, "message"))
    assert trim.report.dropped_turns == 1
    msgs = out["messages"]
    assert msgs[1] == {"role": "user", "content": CRUMB}
    assert msgs[2] is body["messages"][3]
    assert decode(out).conversation.messages[1].breadcrumb


def test_breadcrumb_merge_into_string() -> None:
    body = three_turns("middle")
    original = copy.deepcopy(body)
    _, _, out = run(body, policy(200, "merge"))
    msgs = out["messages"]
    assert len(msgs) == 4
    assert msgs[1] == {"role": "user", "content": CRUMB + "\n\nmiddle"}
    assert msgs[1] is not body["messages"][3]
    assert body == original
    again = decode(out).conversation.messages[1]
    assert again.turn_start and not again.breadcrumb
    # merging twice does not mark the message twice
    _, _, twice = run(
        {**out, "messages": [out["messages"][0], *body["messages"][1:3], *msgs[1:]]},
        policy(200, "merge"),
    )
    assert twice["messages"][1]["content"] == CRUMB + "\n\nmiddle"


def test_breadcrumb_merge_into_parts() -> None:
    parts = [
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
        {"type": "text", "text": "middle"},
    ]
    body = three_turns(parts)
    _, _, out = run(body, policy(2000, "merge"))
    merged = out["messages"][1]
    assert merged["content"][0] == {"type": "text", "text": CRUMB + "\n\n"}
    assert merged["content"][1] is parts[0] and merged["content"][2] is parts[1]
    assert body["messages"][3]["content"] == parts and len(parts) == 2


def test_breadcrumb_none() -> None:
    body = three_turns("middle")
    _, trim, out = run(body, policy(200, "none"))
    assert trim.report.trimmed
    assert out["messages"] == [body["messages"][0], *body["messages"][3:]]


# -- orphan sweep, capping, hoisting -----------------------------------------------------


def fn_call(call_id: str, name: str = "lookup") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def test_orphan_strip_partial_and_whole() -> None:
    body: Body = {
        "messages": [
            {"role": "tool", "tool_call_id": "ghost", "content": "lost"},
            {"role": "user", "content": "q1"},
            {"role": "assistant", "content": None, "tool_calls": [fn_call("a"), fn_call("b")]},
            {"role": "tool", "tool_call_id": "a", "content": "A"},
            {"role": "assistant", "content": None, "tool_calls": [fn_call("lonely")]},
            {"role": "assistant", "content": "I'll try", "tool_calls": [fn_call("c")]},
            {"role": "user", "content": "q2"},
        ]
    }
    original = copy.deepcopy(body)
    _, trim, out = run(body, Policy(budget=0))
    assert trim.report.orphans_removed == 4
    msgs = out["messages"]
    assert body == original
    assert msgs[0] is body["messages"][1]
    assert msgs[1] == {"role": "assistant", "content": None, "tool_calls": [fn_call("a")]}
    assert msgs[1]["tool_calls"][0] is body["messages"][2]["tool_calls"][0]
    assert msgs[2] is body["messages"][3]
    assert msgs[3] == {"role": "assistant", "content": "I'll try"}  # no empty tool_calls
    assert msgs[4] is body["messages"][6]
    check_pairing(msgs)


def test_orphan_strip_legacy_function_call() -> None:
    body: Body = {
        "messages": [
            {"role": "user", "content": "q1"},
            {"role": "assistant", "content": "hm", "function_call": {"name": "f", "arguments": ""}},
            {"role": "user", "content": "q2"},
        ]
    }
    _, trim, out = run(body, Policy(budget=0))
    assert trim.report.orphans_removed == 1
    assert out["messages"][1] == {"role": "assistant", "content": "hm"}


def test_tool_result_capping_keeps_id() -> None:
    long = "x" * 300 + "é" * 300
    body: Body = {
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "tool_calls": [fn_call("c1"), fn_call("c2")]},
            {"role": "tool", "tool_call_id": "c1", "content": long},
            {
                "role": "tool",
                "tool_call_id": "c2",
                "content": [
                    {"type": "text", "text": "short"},
                    {"type": "text", "text": long, "prompt_cache_breakpoint": {"mode": "explicit"}},
                ],
            },
        ]
    }
    original = copy.deepcopy(body)
    _, trim, out = run(body, Policy(budget=0, max_tool_result_chars=100))
    assert trim.report.tool_results_capped == 2
    assert body == original
    first, second = out["messages"][2], out["messages"][3]
    assert first["tool_call_id"] == "c1" and first["role"] == "tool"
    assert len(first["content"]) < 200 and "characters truncated" in first["content"]
    assert first["content"].startswith("x" * 66) and first["content"].endswith("é" * 34)
    assert second["tool_call_id"] == "c2"
    assert second["content"][0] is body["messages"][3]["content"][0]
    assert second["content"][1]["prompt_cache_breakpoint"] == {"mode": "explicit"}
    assert "characters truncated" in second["content"][1]["text"]
    again = decode(out).conversation
    kept = {m.index: m for m in trim.kept}
    assert again.messages[2].text_bytes == kept[2].text_bytes
    assert again.messages[3].text_bytes == kept[3].text_bytes


def test_hoist_moves_late_systems() -> None:
    body = load("agent_tools.json")
    _, trim, out = run(body, Policy(budget=0, hoist=True))
    assert trim.report.hoisted == 1
    assert out["messages"][2] is body["messages"][12]
    assert [m["role"] for m in out["messages"][:3]] == ["system", "developer", "system"]


# -- usage -------------------------------------------------------------------------------

COMPLETION = {
    "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
    "object": "chat.completion",
    "created": 1741570283,
    "model": "gpt-4o-2024-08-06",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Hi", "refusal": None, "annotations": []},
            "logprobs": None,
            "finish_reason": "stop",
        }
    ],
    "usage": {
        "prompt_tokens": 1117,
        "completion_tokens": 46,
        "total_tokens": 1163,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
    },
    "service_tier": "default",
    "system_fingerprint": "fp_fc9f1d7035",
}


def test_usage_from_json() -> None:
    assert CODEC.usage(COMPLETION) == 1117
    assert CODEC.usage({"usage": None}) is None
    assert CODEC.usage({"usage": {"prompt_tokens": "12"}}) is None
    assert CODEC.usage([]) is None
    assert CODEC.usage({}) is None


def test_stream_usage() -> None:
    chunk = (
        '{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,'
        '"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,'
        '"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}],"usage":null}'
    )
    final = (
        '{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,'
        '"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb","choices":[],'
        '"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21,'
        '"prompt_tokens_details":{"cached_tokens":0}}}'
    )
    assert CODEC.stream_usage(chunk) is None
    assert CODEC.stream_usage(final) == 9
    assert CODEC.stream_usage("[DONE]") is None
    assert CODEC.stream_usage('{"prompt_tokens": broken') is None


def test_overflow_delegation_smoke() -> None:
    # The recognition rules are tested with overflow.py; this only checks the wiring.
    error = (
        b'{"error":{"message":"This model\'s maximum context length is 128000 tokens. However,'
        b' your messages resulted in 130532 tokens. Please reduce the length of the messages.",'
        b'"type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}'
    )
    found = CODEC.detect_overflow(400, error)
    assert found is not None and (found.real, found.maximum) == (130532, 128000)
    assert CODEC.detect_stream_overflow(b"data: " + error + b"\n\n") is not None
    assert CODEC.detect_overflow(200, orjson.dumps(COMPLETION)) is None


def test_module_shape() -> None:
    assert isinstance(CODEC, OpenAIChatCodec)
    assert CODEC.wire_format == "openai"


def test_decode_speed() -> None:
    messages: list[Any] = [{"role": "system", "content": "s" * 2000}]
    for i in range(1000):
        messages.append({"role": "user", "content": f"question {i} " + "q" * 600})
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "search", "arguments": '{"q": "' + "a" * 200 + '"}'},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": "r" * 900})
        messages.append({"role": "assistant", "content": "answer " * 40})
    body = {"model": "gpt-4o", "messages": messages}
    assert len(orjson.dumps(body)) > 2_000_000
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        decode(body)
        best = min(best, time.perf_counter() - t0)
    assert best < 0.05  # milliseconds when linear; generous for CI


# -- property ----------------------------------------------------------------------------

TURN = re.compile(r"turn-(\d+)")


@st.composite
def conversations(draw: st.DrawFn) -> Body:
    counter = iter(range(10_000))
    text = st.text(alphabet="abcdé日 ", min_size=0, max_size=60)
    messages: list[Any] = []
    if draw(st.booleans()):
        messages.append({"role": draw(st.sampled_from(["system", "developer"])), "content": "S"})
    for _ in range(draw(st.integers(0, 2))):  # strays before the first user message
        messages.append(
            draw(
                st.sampled_from(
                    [
                        {"role": "assistant", "content": "stray hello"},
                        {"role": "developer", "content": "late dev"},
                        {"role": "user", "content": CRUMB},
                    ]
                )
            )
        )
    for turn in range(draw(st.integers(1, 6))):
        label = f"turn-{turn} " + draw(text)
        if draw(st.booleans()):
            messages.append({"role": "user", "content": label})
        else:
            messages.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": label},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                    ],
                }
            )
        for _ in range(draw(st.integers(0, 3))):
            kind = draw(st.sampled_from(["tools", "text", "legacy", "system"]))
            if kind == "text":
                messages.append({"role": "assistant", "content": draw(text) or "ok"})
            elif kind == "system":
                messages.append({"role": "system", "content": "mid-turn note"})
            elif kind == "legacy":
                messages.append(
                    {
                        "role": "assistant",
                        "content": None,
                        "function_call": {"name": "fn", "arguments": draw(text)},
                    }
                )
                messages.append({"role": "function", "name": "fn", "content": draw(text)})
            else:
                ids = [f"call_{next(counter)}" for _ in range(draw(st.integers(1, 3)))]
                messages.append(
                    {
                        "role": "assistant",
                        "content": draw(st.sampled_from([None, "", "let me look"])),
                        "tool_calls": [
                            {
                                "id": i,
                                "type": "function",
                                "function": {"name": "search", "arguments": draw(text)},
                            }
                            for i in ids
                        ],
                    }
                )
                for i in ids:
                    result = draw(text)
                    content: Any = (
                        result if draw(st.booleans()) else [{"type": "text", "text": result}]
                    )
                    messages.append({"role": "tool", "tool_call_id": i, "content": content})
    return {"model": "gpt-4o", "messages": messages, "tools": [{"type": "function"}]}


def turn_labels(messages: list[Any]) -> list[int]:
    out: list[int] = []
    for t in user_texts(messages):
        found = TURN.search(t)
        if found:
            out.append(int(found.group(1)))
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=conversations(), data=st.data())
def test_property_trim_round_trip(body: Body, data: st.DataObject) -> None:
    check_pairing(body["messages"], first_user=False)
    original = copy.deepcopy(body)
    decoded = decode(body)
    total = decoded.conversation.tokens
    # Either any budget, or one right at the size of a suffix of whole turns (edge cases).
    conv = decoded.conversation.messages
    starts = [i for i, m in enumerate(conv) if m.turn_start]
    k = data.draw(st.integers(0, len(starts) - 1))
    lead = sum(1 for _ in itertools.takewhile(lambda m: m.role is Role.SYSTEM, conv))
    edge = (
        decoded.conversation.overhead
        + sum(m.tokens for m in conv[:lead])
        + text_tokens(CRUMB)
        + sum(m.tokens for m in conv[starts[k] :])
    )
    budget = data.draw(
        st.one_of(st.integers(1, total + 20), st.integers(max(1, edge - 2), edge + 2)),
        label="budget",
    )
    placement: Placement = data.draw(st.sampled_from(["message", "merge", "none"]))
    pol = policy(budget, placement)
    trim = plan(decoded.conversation, pol)
    out = CODEC.encode(decoded, trim, breadcrumb=CRUMB)
    assert body == original
    msgs = out["messages"]

    before = turn_labels(body["messages"])
    after = turn_labels(msgs)
    assert after == before[len(before) - len(after) :]  # a suffix, in order
    assert after and after[-1] == before[-1]  # the newest turn is kept
    lead = 0
    while body["messages"][lead]["role"] in ("system", "developer"):
        assert msgs[lead] is body["messages"][lead]
        lead += 1
    newest = max(i for i, m in enumerate(body["messages"]) if TURN.search(str(m.get("content"))))
    tail = body["messages"][newest + 1 :]
    assert all(a is b for a, b in zip(msgs[len(msgs) - len(tail) :], tail, strict=True))

    if trim.report.trimmed:
        check_pairing(msgs)
        if placement == "message":
            assert msgs[lead] == {"role": "user", "content": CRUMB}
        elif placement == "merge":
            first = user_texts(msgs[lead:])[0]
            assert first.startswith(CRUMB + "\n\n")
        else:
            assert CRUMB not in user_texts(msgs[lead:])[0]
    else:
        check_pairing(msgs, first_user=False)
        assert msgs == body["messages"]

    again = decode(out)
    assert trim.report.orphans_removed == 0
    if trim.report.trimmed:
        assert again.conversation.tokens <= budget or trim.report.kept_turns == 1
    replanned = plan(again.conversation, pol)
    assert not replanned.report.trimmed
    assert replanned.report.orphans_removed == 0
    assert not replanned.changed


@pytest.mark.parametrize("odd", [[], {}, [1]], ids=["list", "object", "list-of-one"])
def test_a_role_or_part_type_of_any_json_value_is_refused_or_sized(odd: Any) -> None:
    # A list or an object where a string belongs: refused or sized, never a TypeError (a
    # set lookup of a list raises one)
    with pytest.raises(DecodeError):
        decode({"messages": [{"role": odd, "content": "x"}]})
    part = {"type": odd, "text": "x"}
    decoded = decode({"messages": [{"role": "user", "content": [part]}]})
    assert decoded.conversation.messages[0].text_bytes == len(orjson.dumps(part))
