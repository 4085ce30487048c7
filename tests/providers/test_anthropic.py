"""The Anthropic Messages codec: decode, encode, pairing rules, usage."""

from __future__ import annotations

import copy
import itertools
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trimgate.errors import DecodeError
from trimgate.history import Role
from trimgate.providers.anthropic import CODEC, AnthropicCodec
from trimgate.providers.anthropic_items import _strip
from trimgate.providers.base import Decoded, DecodeOptions
from trimgate.trimming import Policy, plan, text_tokens
from trimgate.trimming.estimate import bytes_tokens, message_tokens, utf8_len
from trimgate.trimming.pipeline import Placement, TrimPlan

DATA = Path(__file__).resolve().parent.parent / "data" / "anthropic"
BREADCRUMB = "[earlier turns omitted to fit the context window]"
OPTIONS = DecodeOptions(breadcrumb=BREADCRUMB)
PATH = "/v1/messages"
FIXTURES = sorted(p.name for p in DATA.glob("*.json"))
# Fixtures that already satisfy Anthropic's pairing rules as sent.
VALID = [name for name in FIXTURES if name != "stray_start.json"]
PLACEMENTS: tuple[Placement, ...] = ("message", "merge", "none")


def load(name: str) -> dict[str, Any]:
    body = orjson.loads((DATA / name).read_bytes())
    assert isinstance(body, dict)
    return body


def decode(body: Any, path: str = PATH) -> Decoded:
    return CODEC.decode(body, path=path, options=OPTIONS)


def run(
    body: dict[str, Any], policy: Policy, path: str = PATH
) -> tuple[Decoded, TrimPlan, dict[str, Any]]:
    decoded = decode(body, path)
    trim = plan(decoded.conversation, policy)
    return decoded, trim, CODEC.encode(decoded, trim, breadcrumb=BREADCRUMB)


def policy(budget: int, placement: Placement = "message", **kw: Any) -> Policy:
    return Policy(
        budget=budget, breadcrumb_tokens=text_tokens(BREADCRUMB), placement=placement, **kw
    )


# -- the format's rules ------------------------------------------------------------


def blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message["content"]
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    assert isinstance(content, list)
    return content


def check_pairing(messages: Sequence[Any], *, first_user: bool = True) -> None:
    """Anthropic's rules for a ``messages`` array.

    Roles are user / assistant; the first message is a user message; content is
    non-empty (except a final assistant prefill); a ``tool_use`` id is unique
    and answered by a ``tool_result`` in the very next message, which is a user
    message whose results come before its other blocks; every ``tool_result``
    answers a ``tool_use`` of the message right before it.
    """
    assert messages, "messages is empty"
    if first_user:
        assert messages[0]["role"] == "user", "first message must use the user role"
    seen: set[str] = set()
    for pos, message in enumerate(messages):
        assert isinstance(message, dict)
        role = message["role"]
        assert role in ("user", "assistant"), role
        content = message["content"]
        final_assistant = pos == len(messages) - 1 and role == "assistant"
        assert isinstance(content, str | list)
        if not final_assistant:
            assert content, f"messages.{pos}: empty content"
        items = blocks(message)
        calls = [b["id"] for b in items if b["type"] == "tool_use"]
        results = [b["tool_use_id"] for b in items if b["type"] == "tool_result"]
        if calls:
            assert role == "assistant", f"messages.{pos}: tool_use outside an assistant"
            assert not seen & set(calls), f"messages.{pos}: duplicate tool_use id"
            seen.update(calls)
            assert pos + 1 < len(messages), f"messages.{pos}: tool_use without tool_result"
            following = messages[pos + 1]
            assert following["role"] == "user"
            answered = {b["tool_use_id"] for b in blocks(following) if b["type"] == "tool_result"}
            missing = set(calls) - answered
            assert not missing, f"messages.{pos}: tool_use ids without tool_result: {missing}"
        if results:
            assert role == "user", f"messages.{pos}: tool_result outside a user message"
            assert pos > 0, f"messages.{pos}: tool_result without tool_use"
            previous = messages[pos - 1]
            made = {b["id"] for b in blocks(previous) if b["type"] == "tool_use"}
            assert previous["role"] == "assistant" and set(results) <= made, (
                f"messages.{pos}: unexpected tool_use_id {set(results) - made}"
            )
            kinds = [b["type"] == "tool_result" for b in items]
            assert kinds == sorted(kinds, reverse=True), f"messages.{pos}: results not first"


def assert_originals(body: dict[str, Any], trim: TrimPlan, out: dict[str, Any]) -> None:
    """Every kept item the plan does not change is the original object."""
    originals = body["messages"]
    changed = set(trim.strip) | set(trim.capped)
    if trim.breadcrumb_at is not None and trim.placement == "merge":
        changed.add(trim.kept[trim.breadcrumb_at].index)
    sent = [m for m in out["messages"] if m.get("content") != BREADCRUMB]
    kept = [m.index for m in trim.kept]
    assert len(sent) == len(kept)
    for index, item in zip(kept, sent, strict=True):
        if index not in changed:
            assert item is originals[index]
    for key, value in body.items():
        if key != "messages":
            assert out[key] is value


# -- untouched round trip ----------------------------------------------------------


@pytest.mark.parametrize("name", FIXTURES)
def test_untouched_round_trip(name: str) -> None:
    body = load(name)
    before = copy.deepcopy(body)
    decoded = decode(body)
    assert len(decoded.conversation.messages) == len(body["messages"])
    trim = plan(decoded.conversation, Policy(budget=0, orphan_sweep=False))
    assert not trim.changed
    out = CODEC.encode(decoded, trim, breadcrumb=BREADCRUMB)
    assert out is not body
    assert out == body
    assert all(a is b for a, b in zip(out["messages"], body["messages"], strict=True))
    assert body == before


@pytest.mark.parametrize("name", VALID)
def test_valid_fixtures_pass_the_checker_and_the_sweep(name: str) -> None:
    body = load(name)
    check_pairing(body["messages"])
    _, trim, out = run(body, Policy(budget=0))
    assert not trim.changed
    assert trim.report.orphans_removed == 0
    assert out == body


# -- decode ------------------------------------------------------------------------


def test_decode_tools_parallel() -> None:
    body = load("tools_parallel.json")
    decoded = decode(body)
    conv = decoded.conversation
    assert decoded.model == "claude-opus-4-1-20250805"
    assert decoded.output_limit == 4096
    assert decoded.stream is True
    assert decoded.hoistable is False
    assert decoded.skip is None
    assert conv.pending_calls_ok is False
    system_bytes = sum(utf8_len(b["text"]) for b in body["system"])
    tools_bytes = len(orjson.dumps(body["tools"]))
    assert conv.overhead == bytes_tokens(system_bytes) + bytes_tokens(tools_bytes)

    m = conv.messages
    assert [x.index for x in m] == list(range(len(body["messages"])))
    assert [x.role for x in m] == [Role.USER, Role.ASSISTANT] * 4 + [Role.USER]
    assert [x.turn_start for x in m] == [True] + [False] * 5 + [True, False, False]
    assert m[1].calls == ("toolu_01A09q90qw90lq917835lq9", "toolu_01B2c3d4e5f6g7h8i9j0k1l2")
    assert m[1].other_content is True  # it also says something
    assert m[2].results == m[1].calls
    assert m[2].other_content is False
    assert m[2].tool_texts == (
        body["messages"][2]["content"][0]["content"],
        body["messages"][2]["content"][1]["content"][0]["text"],
    )
    assert m[3].other_content is False  # tool_use only
    call = body["messages"][3]["content"][0]
    assert m[3].text_bytes == utf8_len(call["name"]) + len(orjson.dumps(call["input"]))
    assert m[4].results == ("toolu_01C3d4e5f6g7h8i9j0k1l2m3",)
    # A user message with a tool_result is not a real user message, even with text.
    last = m[8]
    assert last.turn_start is False
    assert last.other_content is True
    assert last.media == 1
    assert last.tool_texts == ("ci/last_run.png (12 KB)",)
    text = "ci/last_run.png (12 KB)" + "That is the page from this morning."
    assert last.text_bytes == utf8_len(text)  # the base64 image is not text
    assert last.tokens == message_tokens(utf8_len(text), 1, OPTIONS.media_tokens)
    assert m[0].tokens == message_tokens(utf8_len(body["messages"][0]["content"]))


def test_decode_multibyte_text() -> None:
    body = load("multiturn_text.json")
    m = decode(body).conversation.messages
    text = body["messages"][4]["content"][0]["text"]
    assert m[4].text_bytes == len(text.encode("utf-8")) > len(text)
    assert decode(body).stream is False


def test_decode_thinking() -> None:
    body = load("thinking.json")
    m = decode(body).conversation.messages
    first = body["messages"][1]["content"]
    # thinking text counts, its signature does not; tool_use only + thinking: no other content
    expected = utf8_len(first[0]["thinking"]) + sum(
        utf8_len(b["name"]) + len(orjson.dumps(b["input"])) for b in first[1:]
    )
    assert m[1].text_bytes == expected
    assert m[1].other_content is False
    assert len(m[1].calls) == 2
    # redacted thinking counts nothing
    assert m[3].text_bytes == utf8_len(body["messages"][3]["content"][1]["text"])
    assert m[3].other_content is True
    assert m[5].other_content is True
    assert m[6].tool_texts == ("27°C, sunny",)


def test_decode_server_tools_are_not_calls() -> None:
    body = load("server_tools.json")
    m = decode(body).conversation.messages
    assert m[1].calls == () and m[1].results == ()
    assert m[1].text_bytes > utf8_len("I'll search for the release notes.") + 100
    assert m[2].turn_start is True  # container_upload + text: a real user message
    assert m[3].calls == ("toolu_01Note000000000000000001",)
    assert m[3].results == ()
    assert m[3].other_content is True
    assert m[4].results == ("toolu_01Note000000000000000001",)
    assert not any(x.exempt for x in m)


def test_decode_media_and_documents() -> None:
    body = load("media_documents.json")
    m = decode(body).conversation.messages
    assert m[0].media == 2
    assert m[0].text_bytes == utf8_len("What is the difference between these two images?")
    assert m[2].media == 2  # a PDF and a plain-text document
    assert m[6].tool_texts == ("1 result",)
    search = body["messages"][6]["content"][0]["content"][0]
    assert m[6].text_bytes == len(orjson.dumps(search)) + utf8_len("1 result")
    assert m[6].media == 0


def test_decode_count_tokens_path() -> None:
    body = load("count_tokens.json")
    decoded = decode(body, "/v1/messages/count_tokens")
    assert decoded.output_limit is None
    assert decoded.stream is False
    assert decoded.model == "claude-sonnet-4-5"
    assert len(decoded.conversation.messages) == 5
    # the same body on /v1/messages with a max_tokens reads the limit
    assert decode({**body, "max_tokens": 100}).output_limit == 100
    assert decode({**body, "max_tokens": 100}, "/v1/messages/count_tokens").output_limit is None


def test_decode_incoming_breadcrumb() -> None:
    body = load("breadcrumb_incoming.json")
    m = decode(body).conversation.messages
    assert m[0].breadcrumb is True and m[0].turn_start is False
    assert [x.turn_start for x in m[1:]] == [True, False, True]
    listed = {"role": "user", "content": [{"type": "text", "text": BREADCRUMB}]}
    decoded = decode({"messages": [listed, *body["messages"][1:]]})
    assert decoded.conversation.messages[0].breadcrumb is True
    assert decoded.conversation.messages[0].turn_start is False
    # an assistant saying the breadcrumb text is not ours
    said = decode({"messages": [{"role": "assistant", "content": BREADCRUMB}]})
    assert said.conversation.messages[0].breadcrumb is False


def test_decode_system_role_message() -> None:
    body = {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
        ]
    }
    m = decode(body).conversation.messages
    assert m[0].role is Role.SYSTEM and not m[0].turn_start
    assert m[1].turn_start


def test_decode_unknown_blocks_and_fields_count_as_text() -> None:
    block = {"type": "future_block", "payload": {"k": "v" * 40}}
    body = {"messages": [{"role": "user", "content": [block], "x_extra": 1}]}
    m = decode(body).conversation.messages[0]
    assert m.text_bytes == len(orjson.dumps(block))
    assert m.turn_start


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ([], "body is not an object"),
        ({}, "messages is not a list"),
        ({"messages": {"role": "user"}}, "messages is not a list"),
        ({"messages": "hello"}, "messages is not a list"),
        ({"messages": ["hello"]}, "message is not an object"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "message role is not user or assistant"),
        (
            {"messages": [{"role": ["user"], "content": "x"}]},
            "message role is not user or assistant",
        ),
        ({"messages": [{"content": "x"}]}, "message role is not user or assistant"),
        (
            {"messages": [{"role": "user", "content": 3}]},
            "message content is not a string or a list",
        ),
        ({"messages": [{"role": "user"}]}, "message content is not a string or a list"),
        ({"messages": [{"role": "user", "content": ["x"]}]}, "content block is not an object"),
        ({"system": 5, "messages": []}, "system is not a string or a list"),
    ],
)
def test_decode_error(body: Any, reason: str) -> None:
    with pytest.raises(DecodeError) as info:
        decode(body)
    assert info.value.reason == reason


def test_codec_identity() -> None:
    assert isinstance(CODEC, AnthropicCodec)
    assert CODEC.wire_format == "anthropic" == AnthropicCodec().wire_format


# -- preemptive trim ---------------------------------------------------------------


def turn_starts(decoded: Decoded) -> list[int]:
    return [m.index for m in decoded.conversation.messages if m.turn_start]


@pytest.mark.parametrize("placement", PLACEMENTS)
@pytest.mark.parametrize("name", FIXTURES)
def test_preemptive_trim_keeps_a_suffix_of_whole_turns(name: str, placement: Placement) -> None:
    body = load(name)
    before = copy.deepcopy(body)
    decoded, trim, out = run(body, policy(1, placement))
    starts = turn_starts(decoded)
    kept = [m.index for m in trim.kept if m.turn_start]
    assert kept == starts[-1:]  # budget 1: the newest turn alone
    assert trim.report.trimmed is (len(starts) > 1)
    check_pairing(out["messages"])
    assert_originals(body, trim, out)
    assert body == before  # the input is never mutated
    first = out["messages"][0]
    if trim.report.trimmed and placement == "message":
        assert first == {"role": "user", "content": BREADCRUMB}
    elif trim.report.trimmed and placement == "merge":
        assert BREADCRUMB in orjson.dumps(first).decode()
        assert first["role"] == "user"
    else:
        assert all(BREADCRUMB not in orjson.dumps(m).decode() for m in out["messages"])
    # the output re-plans to itself
    again = plan(decode(out).conversation, policy(1, placement))
    assert not again.report.trimmed and again.report.orphans_removed == 0


def test_trim_to_a_middle_budget() -> None:
    body = load("tools_parallel.json")
    decoded = decode(body)
    conv = decoded.conversation
    last_turn = conv.overhead + sum(m.tokens for m in conv.messages[6:])
    budget = last_turn + text_tokens(BREADCRUMB)
    _, trim, out = run(body, policy(budget))
    assert trim.report.dropped_turns == 1
    assert trim.report.dropped_messages == 6
    assert out["messages"][0] == {"role": "user", "content": BREADCRUMB}
    assert out["messages"][1:] == body["messages"][6:]
    assert all(a is b for a, b in zip(out["messages"][1:], body["messages"][6:], strict=True))
    assert trim.report.tokens_after <= budget
    _, trim, _ = run(body, policy(budget - 1))  # one token less: only the newest turn
    assert trim.report.dropped_turns == 1  # there are only two turns


def test_merge_shapes() -> None:
    body = load("multiturn_text.json")  # the last turn's user message is a list
    _, _, out = run(body, policy(1, "merge"))
    assert len(out["messages"]) == 1
    merged = out["messages"][0]
    original = body["messages"][-1]
    assert merged["content"][0] == {"type": "text", "text": BREADCRUMB}
    assert merged["content"][1:] == original["content"]
    assert merged["content"][1] is original["content"][0]  # cache_control block untouched
    assert original["content"][0]["text"] == "And what about Frankfurt?"

    body = load("stray_start.json")  # the last turn's user message is a string
    _, _, out = run(body, policy(1, "merge"))
    assert out["messages"] == [{"role": "user", "content": BREADCRUMB + "\n\nShow it."}]
    assert body["messages"][-1] == {"role": "user", "content": "Show it."}


def test_merge_skips_tool_result_messages() -> None:
    body = load("count_tokens.json")  # the newest turn ends with a tool_result message
    _, _, out = run(body, policy(1, "merge"), "/v1/messages/count_tokens")
    assert [m["role"] for m in out["messages"]] == ["user", "assistant", "user"]
    assert out["messages"][0]["content"] == BREADCRUMB + "\n\n" + body["messages"][2]["content"]
    assert out["messages"][2] is body["messages"][4]
    check_pairing(out["messages"])


def test_retrim_of_a_trimmed_history_keeps_the_breadcrumb() -> None:
    body = load("breadcrumb_incoming.json")
    _, trim, out = run(body, policy(1))
    assert trim.report.dropped_turns == 1
    assert trim.report.kept_turns == 1
    # the old breadcrumb leaves with the first dropped turn, a new one stands in front
    assert out["messages"] == [{"role": "user", "content": BREADCRUMB}, body["messages"][3]]


# -- orphan sweep ------------------------------------------------------------------


def tool_use(cid: str, name: str = "lookup") -> dict[str, Any]:
    return {"type": "tool_use", "id": cid, "name": name, "input": {"q": cid}}


def tool_result(cid: str, content: Any = "ok") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": cid, "content": content}


def test_orphan_strip_partial() -> None:
    body: dict[str, Any] = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 100,
        "messages": [
            {"role": "user", "content": "Look both up."},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "two lookups", "signature": "sig"},
                    tool_use("toolu_a"),
                    tool_use("toolu_b"),
                ],
            },
            {
                "role": "user",
                "content": [
                    tool_result("toolu_a"),
                    tool_result("toolu_x"),
                    {"type": "text", "text": "and?"},
                ],
            },
        ],
    }
    before = copy.deepcopy(body)
    _, trim, out = run(body, Policy(budget=0))
    assert trim.report.orphans_removed == 2
    assert trim.report.trimmed is False
    assert out["messages"][0] is body["messages"][0]
    assert out["messages"][1]["content"] == [
        {"type": "thinking", "thinking": "two lookups", "signature": "sig"},
        tool_use("toolu_a"),
    ]
    assert out["messages"][2]["content"] == [
        tool_result("toolu_a"),
        {"type": "text", "text": "and?"},
    ]
    check_pairing(out["messages"])
    assert body == before


def test_orphan_strip_whole() -> None:
    body = load("stray_start.json")
    _, trim, out = run(body, Policy(budget=0))
    assert trim.report.orphans_removed == 1
    assert trim.report.dropped_messages == 0  # the sweep's removal is not a dropped message
    # the stray orphan result goes; the stray assistant stays first (the client sent it)
    assert out["messages"] == body["messages"][1:]
    check_pairing(out["messages"], first_user=False)

    pending: dict[str, Any] = {
        "messages": [
            {"role": "user", "content": "Run it."},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "run", "signature": "sig"},
                    tool_use("toolu_p"),
                ],
            },
        ]
    }
    _, trim, out = run(pending, Policy(budget=0))  # no pending calls on Anthropic
    assert trim.report.orphans_removed == 1
    assert out["messages"] == [pending["messages"][0]]


def test_strip_guard_never_leaves_empty_content() -> None:
    item: dict[str, Any] = {
        "role": "assistant",
        "content": [{"type": "redacted_thinking", "data": "x"}, tool_use("toolu_z")],
    }
    stripped = _strip(item, frozenset({"toolu_z"}))
    assert stripped["content"] == [{"type": "text", "text": "[tool call removed]"}]
    assert item["content"][1]["id"] == "toolu_z"
    same = _strip(item, frozenset({"toolu_other"}))
    assert same is item
    text = {"role": "user", "content": "hi"}
    assert _strip(text, frozenset({"a"})) is text


# -- tool-result capping -----------------------------------------------------------


def test_cap_keeps_ids_and_structure() -> None:
    body = load("tools_parallel.json")
    before = copy.deepcopy(body)
    _, trim, out = run(body, Policy(budget=0, max_tool_result_chars=30))
    assert trim.report.tool_results_capped == 3
    assert trim.report.trimmed is False
    messages = out["messages"]
    first = messages[2]["content"]
    assert first[0]["tool_use_id"] == "toolu_01A09q90qw90lq917835lq9"
    assert "characters truncated" in first[0]["content"]
    assert first[1]["tool_use_id"] == "toolu_01B2c3d4e5f6g7h8i9j0k1l2"
    assert first[1]["content"][0]["type"] == "text"
    assert "characters truncated" in first[1]["content"][0]["text"]
    failed = messages[4]["content"][0]
    assert failed["is_error"] is True and "characters truncated" in failed["content"]
    shot = messages[8]["content"]
    assert shot[0]["content"][0]["text"] == "ci/last_run.png (12 KB)"  # short: unchanged
    assert shot[0]["content"][1] is body["messages"][8]["content"][0]["content"][1]  # the image
    assert messages[8] is body["messages"][8]  # nothing capped in it: the original
    assert messages[0] is body["messages"][0]
    assert body == before
    check_pairing(messages)
    # the decoded sizes of the output are what the plan counted
    assert decode(out).conversation.tokens == trim.report.tokens_after


# -- usage -------------------------------------------------------------------------


def test_usage_from_json() -> None:
    response = {
        "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "text", "text": "Hi! My name is Claude."}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 2095,
            "cache_creation_input_tokens": 100,
            "cache_read_input_tokens": 2000,
            "cache_creation": {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 0},
            "output_tokens": 503,
            "service_tier": "standard",
        },
    }
    assert CODEC.usage(response) == 4195
    assert CODEC.usage({"usage": {"input_tokens": 12, "cache_read_input_tokens": None}}) == 12
    assert CODEC.usage({"input_tokens": 2095}) == 2095  # count_tokens answer
    assert CODEC.usage({"type": "error", "error": {"type": "overloaded_error"}}) is None
    assert CODEC.usage([]) is None
    assert CODEC.usage({"usage": {"output_tokens": 3}}) is None


def test_usage_from_stream_events() -> None:
    start = (
        '{"type":"message_start","message":{"id":"msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY",'
        '"type":"message","role":"assistant","content":[],"model":"claude-opus-4-1-20250805",'
        '"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":472,'
        '"cache_creation_input_tokens":0,"cache_read_input_tokens":1000,"output_tokens":2}}}'
    )
    assert CODEC.stream_usage(start) == 1472
    delta = (
        '{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},'
        '"usage":{"input_tokens":472,"output_tokens":15}}'
    )
    assert CODEC.stream_usage(delta) is None
    assert CODEC.stream_usage('{"type": "ping"}') is None
    text = (
        '{"type":"content_block_delta","index":0,'
        '"delta":{"type":"text_delta","text":"message_start input_tokens"}}'
    )
    assert CODEC.stream_usage(text) is None
    assert CODEC.stream_usage('{"type":"message_start", "input_tokens": ') is None
    assert CODEC.stream_usage("[DONE]") is None


def test_overflow_detection_delegates_with_the_wire_format() -> None:
    # The recognition rules are tested with overflow.py; this checks the wiring.
    error = (
        b'{"type":"error","error":{"type":"invalid_request_error",'
        b'"message":"prompt is too long: 208000 tokens > 200000 maximum"}}'
    )
    found = CODEC.detect_overflow(400, error)
    assert found is not None and (found.real, found.maximum) == (208000, 200000)
    streamed = CODEC.detect_stream_overflow(b"event: error\ndata: " + error + b"\n\n")
    assert streamed == found
    head = b'event: message_start\ndata: {"type":"message_start","message":{}}\n\n'
    assert CODEC.detect_stream_overflow(head) is None


# -- performance -------------------------------------------------------------------


def test_decode_is_linear_and_fast() -> None:
    messages: list[dict[str, Any]] = []
    for i in range(1000):
        cid = f"toolu_{i:024d}"
        messages.append({"role": "user", "content": f"Question {i}: " + "x" * 600})
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Looking it up." + "y" * 200},
                    {"type": "tool_use", "id": cid, "name": "search", "input": {"q": "z" * 80}},
                ],
            }
        )
        messages.append(
            {"role": "user", "content": [tool_result(cid, "r" * 800)]},
        )
        messages.append({"role": "assistant", "content": "Answer " + "w" * 300})
    body = {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": messages}
    assert len(orjson.dumps(body)) > 2_000_000
    best = min(_timed(body) for _ in range(5))
    assert best < 0.15  # linear takes milliseconds; quadratic would take seconds


def _timed(body: dict[str, Any]) -> float:
    start = time.perf_counter()
    decode(body)
    return time.perf_counter() - start


# -- property ----------------------------------------------------------------------

TEXT = st.text(
    alphabet=st.sampled_from("abcdefghij klmnop\nqrstuvwxyz.éü✓🙂"), min_size=1, max_size=120
)
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}}


@st.composite
def anthropic_bodies(draw: st.DrawFn) -> dict[str, Any]:
    ids = itertools.count()
    messages: list[dict[str, Any]] = []

    def text_content() -> Any:
        text = draw(TEXT)
        form = draw(st.integers(0, 2))
        if form == 0:
            return text
        parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
        if form == 2:
            parts.insert(draw(st.integers(0, 1)), dict(IMAGE))
        return parts

    def result_content() -> Any:
        text = draw(TEXT) * draw(st.integers(1, 5))
        form = draw(st.integers(0, 2))
        if form == 0:
            return text
        if form == 1:
            return [{"type": "text", "text": text}]
        return [{"type": "text", "text": text}, dict(IMAGE)]

    if draw(st.booleans()):  # a stray assistant reply before the first user message
        messages.append({"role": "assistant", "content": draw(TEXT)})
    if draw(st.booleans()):  # a stray result whose call the client already dropped
        messages.append({"role": "user", "content": [tool_result(f"toolu_gone{next(ids)}")]})
    turns = draw(st.integers(1, 6))
    for t in range(turns):
        messages.append({"role": "user", "content": text_content()})
        for _ in range(draw(st.integers(0, 3))):
            content: list[dict[str, Any]] = []
            if draw(st.booleans()):
                content.append({"type": "thinking", "thinking": draw(TEXT), "signature": "c2ln"})
            if draw(st.booleans()):
                content.append({"type": "text", "text": draw(TEXT)})
            calls = [f"toolu_{next(ids)}" for _ in range(draw(st.integers(1, 3)))]
            content.extend(tool_use(c) for c in calls)
            messages.append({"role": "assistant", "content": content})
            answers: list[dict[str, Any]] = [tool_result(c, result_content()) for c in calls]
            if draw(st.integers(0, 4)) == 0:
                answers.append({"type": "text", "text": draw(TEXT)})
            messages.append({"role": "user", "content": answers})
        if t < turns - 1 or draw(st.booleans()):
            messages.append({"role": "assistant", "content": text_content()})
    if draw(st.integers(0, 5)) == 0:  # an unanswered call at the end: rejected as is
        content = [tool_use(f"toolu_{next(ids)}")]
        if draw(st.booleans()):
            content.insert(0, {"type": "text", "text": draw(TEXT)})
        messages.append({"role": "assistant", "content": content})
    body: dict[str, Any] = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": messages}
    if draw(st.booleans()):
        body["system"] = [
            {"type": "text", "text": draw(TEXT), "cache_control": {"type": "ephemeral"}}
        ]
    if draw(st.booleans()):
        body["tools"] = [{"name": "lookup", "input_schema": {"type": "object"}}]
    return body


@settings(max_examples=150, deadline=None)
@given(body=anthropic_bodies(), data=st.data())
def test_property_trim_round_trip(body: dict[str, Any], data: st.DataObject) -> None:
    before = copy.deepcopy(body)
    decoded = decode(body)
    total = decoded.conversation.tokens
    budget = data.draw(st.integers(1, total + 50), label="budget")
    placement = data.draw(st.sampled_from(PLACEMENTS), label="placement")
    cap = data.draw(st.sampled_from([0, 0, 40]), label="cap")
    pol = policy(budget, placement, max_tool_result_chars=cap)

    trim = plan(decoded.conversation, pol)
    out = CODEC.encode(decoded, trim, breadcrumb=BREADCRUMB)
    assert body == before
    assert_originals(body, trim, out)

    starts = turn_starts(decoded)
    kept = [m.index for m in trim.kept if m.turn_start]
    assert kept and kept == starts[len(starts) - len(kept) :]  # a suffix, newest included
    assert trim.report.kept_turns == len(kept)
    assert trim.report.dropped_turns == len(starts) - len(kept)

    first_user = trim.report.trimmed or messages_start_with_user(body)
    check_pairing(out["messages"], first_user=first_user)
    if trim.report.trimmed and placement == "message":
        assert out["messages"][0] == {"role": "user", "content": BREADCRUMB}
    if trim.report.trimmed and placement == "merge":
        assert orjson.dumps(out["messages"][0]).decode().count(BREADCRUMB) == 1

    again = decode(out)
    replanned = plan(again.conversation, pol)
    assert not replanned.report.trimmed
    assert replanned.report.orphans_removed == 0
    assert again.conversation.tokens <= trim.report.tokens_after
    assert again.conversation.tokens <= budget or trim.report.kept_turns == 1


def messages_start_with_user(body: dict[str, Any]) -> bool:
    return bool(body["messages"]) and body["messages"][0]["role"] == "user"


@pytest.mark.parametrize("odd", [[], {}, [1]], ids=["list", "object", "list-of-one"])
def test_a_block_type_of_any_json_value_is_sized_not_raised(odd: Any) -> None:
    # A list or an object where a string belongs: sized as an unknown block, never a
    # TypeError (a set lookup of a list raises one), and kept by the strip
    block = {"type": odd, "text": "x"}
    body: dict[str, Any] = {
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [block, {"type": "tool_use", "id": "t1"}]},
        ]
    }
    decoded = CODEC.decode(body, path=PATH, options=OPTIONS)
    message = decoded.conversation.messages[1]
    assert message.text_bytes == len(orjson.dumps(block)) + len(orjson.dumps(None))
    assert _strip(body["messages"][1], frozenset({"t1"}))["content"] == [block]
