"""The OpenAI Responses codec: decode, encode, pairing after trims, usage."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from trimgate.errors import DecodeError
from trimgate.history import Role
from trimgate.providers.base import Decoded, DecodeOptions
from trimgate.providers.openai_responses import CODEC, OpenAIResponsesCodec
from trimgate.trimming import Policy, TrimPlan, plan, text_tokens
from trimgate.trimming.estimate import bytes_tokens, message_tokens

DATA = Path(__file__).parent.parent / "data" / "openai_responses"
CRUMB = "[earlier turns omitted to fit the context window]"
OPTIONS = DecodeOptions(breadcrumb=CRUMB)
PATH = "/v1/responses"
FIXTURES = sorted(p.stem for p in DATA.glob("*.json"))
LIST_FIXTURES = [name for name in FIXTURES if name != "string_input"]

# call item type -> the output item type that answers it (client-side pairs)
PAIRS = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
    "computer_call": "computer_call_output",
    "local_shell_call": "local_shell_call_output",
    "shell_call": "shell_call_output",
    "apply_patch_call": "apply_patch_call_output",
}
OUTPUTS = {v: k for k, v in PAIRS.items()}
ROLES = {"user", "assistant", "system", "developer"}


def load(name: str) -> dict[str, Any]:
    body: dict[str, Any] = orjson.loads((DATA / f"{name}.json").read_bytes())
    return body


def decode(body: Any) -> Decoded:
    return CODEC.decode(body, path=PATH, options=OPTIONS)


def untouched(decoded: Decoded) -> TrimPlan:
    return plan(decoded.conversation, Policy(budget=0))


def trim(decoded: Decoded, budget: int, **policy: Any) -> TrimPlan:
    return plan(
        decoded.conversation,
        Policy(budget=budget, breadcrumb_tokens=text_tokens(CRUMB), **policy),
    )


def encode(decoded: Decoded, trim_plan: TrimPlan) -> dict[str, Any]:
    return CODEC.encode(decoded, trim_plan, breadcrumb=CRUMB)


def check_pairing(items: list[Any], *, stored: bool = False) -> None:
    """The Responses API's rules for an ``input`` list.

    Every client-side output answers a call of the matching type made earlier
    (unless ``stored``: then it may answer a call kept server-side); every
    client-side call is answered later (no pending calls); a reasoning item is
    followed by the item it belongs to; message roles are valid; the first
    non-system item is not a tool output (unless ``stored``).
    """
    calls: dict[str, str] = {}  # call_id -> call type
    shell_ids: dict[str, str] = {}
    answered: set[str] = set()
    first = True
    for pos, item in enumerate(items):
        assert isinstance(item, dict)
        kind = item.get("type", "message")
        if kind == "message" and "role" in item:
            assert item["role"] in ROLES
            if item["role"] in ("system", "developer"):
                continue
        if first:
            assert stored or kind not in OUTPUTS, "history starts with a tool output"
            first = False
        if kind in PAIRS:
            calls[item["call_id"]] = kind
            if kind == "local_shell_call":
                shell_ids[item["id"]] = item["call_id"]
        elif kind in OUTPUTS:
            named = item.get("call_id")
            own: str = item["id"] if named is None else named
            cid = shell_ids.get(own, own)
            if cid in calls:
                assert calls[cid] == OUTPUTS[kind], f"{kind} answers a {calls[cid]}"
            else:
                assert stored, f"output {cid} answers no call"
            answered.add(cid)
        elif kind == "reasoning":
            assert pos + 1 < len(items), "reasoning item without its following item"
            nxt = items[pos + 1]
            assert nxt.get("type") != "message" or nxt.get("role") == "assistant"
    missing = set(calls) - answered
    assert not missing, f"calls without output: {sorted(missing)}"


# --------------------------------------------------------------------- decode


def test_fixtures_are_valid_requests() -> None:
    for name in LIST_FIXTURES:
        body = load(name)
        check_pairing(body["input"], stored="previous_response_id" in body)


@pytest.mark.parametrize("name", FIXTURES)
def test_untouched_round_trip_is_identical(name: str) -> None:
    body = load(name)
    original = copy.deepcopy(body)
    decoded = decode(body)
    trim_plan = untouched(decoded)
    assert not trim_plan.changed
    out = encode(decoded, trim_plan)
    assert out == original
    assert out is not body
    assert body == original  # the input is never mutated
    if isinstance(body.get("input"), list):
        assert all(a is b for a, b in zip(out["input"], body["input"], strict=True))
    for key, value in body.items():
        if key != "input":
            assert out[key] is value


def test_string_input_is_skipped_not_an_error() -> None:
    decoded = decode(load("string_input"))
    assert decoded.skip == "input is not a list"
    assert decoded.conversation.messages == ()
    assert decoded.stream is True
    assert decoded.model == "gpt-4.1-mini"
    missing = decode({"model": "gpt-4.1", "prompt": {"id": "pmpt_1"}})
    assert missing.skip is not None


def test_decode_fields_and_roles() -> None:
    body = load("agent_tools")
    decoded = decode(body)
    conv = decoded.conversation
    assert decoded.model == "gpt-4.1"
    assert decoded.output_limit == 2048
    assert decoded.stream is False
    assert decoded.hoistable is True
    assert decoded.skip is None
    assert not conv.pending_calls_ok
    assert len(conv.messages) == len(body["input"])
    assert [m.index for m in conv.messages] == list(range(len(body["input"])))
    roles = [m.role for m in conv.messages]
    assert roles[0] is Role.SYSTEM
    assert roles[1] is Role.ASSISTANT  # a stray before the first user message
    assert [m.index for m in conv.messages if m.turn_start] == [2, 8, 10, 14]
    calls = conv.messages[3]
    assert calls.calls == ("call_paris",)
    assert calls.role is Role.ASSISTANT and not calls.other_content
    result = conv.messages[5]
    assert result.role is Role.TOOL and result.results == ("call_paris",)
    assert not result.other_content
    assert result.tool_texts == ('{"temperature_c": 14, "sky": "overcast"}',)
    photo = conv.messages[8]
    assert photo.media == 1
    assert photo.text_bytes == len("What landmark is in this photo?")
    structured = conv.messages[12]
    assert structured.media == 1 and len(structured.tool_texts) == 1
    refusal = conv.messages[13]
    assert refusal.text_bytes == len(
        "EU citizens need no visa for short stays.I can't give legal advice."
    )


def test_overhead_counts_instructions_tools_and_text_format() -> None:
    body = load("agent_tools")
    decoded = decode(body)
    tools = len(orjson.dumps(body["tools"]))
    expected = bytes_tokens(len(body["instructions"])) + bytes_tokens(tools)
    assert decoded.conversation.overhead == expected
    body = {**body, "text": {"format": {"type": "json_schema", "name": "x", "schema": {}}}}
    assert decode(body).conversation.overhead > expected


def test_sizes_follow_the_estimate_rule() -> None:
    body = load("agent_tools")
    conv = decode(body).conversation
    call = body["input"][3]
    nbytes = len(call["name"]) + len(call["arguments"].encode())
    assert conv.messages[3].text_bytes == nbytes
    assert conv.messages[3].tokens == message_tokens(nbytes)
    photo = conv.messages[8]
    assert photo.tokens == message_tokens(photo.text_bytes, 1, 1600)
    cheap = CODEC.decode(body, path=PATH, options=DecodeOptions(CRUMB, media_tokens=10))
    assert cheap.conversation.messages[8].tokens == message_tokens(photo.text_bytes, 1, 10)
    # base64 never counts as text
    assert photo.text_bytes < 100


def test_unicode_text_counts_utf8_bytes() -> None:
    body = {"model": "m", "input": [{"role": "user", "content": "héllo €"}]}
    assert decode(body).conversation.messages[0].text_bytes == len("héllo €".encode())


def test_reasoning_codex_shapes() -> None:
    body = load("codex_reasoning")
    conv = decode(body).conversation
    by_index = {m.index: m for m in conv.messages}
    assert by_index[0].role is Role.SYSTEM  # developer message with type "message"
    assert [m.index for m in conv.messages if m.turn_start] == [1, 6, 18]
    # reasoning belongs to the calls that follow it, never a turn start
    assert by_index[2].calls == ("call_ls",) and not by_index[2].other_content
    assert by_index[2].role is Role.ASSISTANT and not by_index[2].turn_start
    assert by_index[2].text_bytes == len("**Listing files**\n\nI'll run ls.")
    assert by_index[7].calls == ("call_patch",)
    assert by_index[10].calls == ("call_pytest", "call_ruff")  # parallel shell calls
    assert by_index[21].calls == ("call_oslo",)
    # local_shell_call_output names its call by id
    assert by_index[4].results == ("call_ls",)
    assert by_index[8].calls == ("call_patch",)
    assert by_index[9].results == ("call_patch",)
    assert by_index[13].tool_texts == ("..........\n10 passed in 0.42s\n", "")
    assert by_index[14].tool_texts == ("All checks passed!\n", "warning: cache dir\n")
    assert by_index[16].results == ("call_ap",)
    assert by_index[19].exempt  # web_search_call: server-side
    assert decode(body).stream is True


def test_reasoning_before_a_message_keeps_its_content() -> None:
    body = {
        "model": "m",
        "input": [
            {"role": "user", "content": "hi"},
            {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "t"}]},
            {"type": "message", "role": "assistant", "content": "hello"},
        ],
    }
    reasoning = decode(body).conversation.messages[1]
    assert reasoning.calls == () and reasoning.other_content


def test_server_side_items_are_exempt() -> None:
    body = load("server_tools")
    conv = decode(body).conversation
    for m in conv.messages:
        kind = body["input"][m.index].get("type")
        if kind in (
            "mcp_list_tools",
            "mcp_approval_request",
            "mcp_approval_response",
            "mcp_call",
            "file_search_call",
            "code_interpreter_call",
            "image_generation_call",
            "item_reference",
        ) or (kind is None and "role" not in body["input"][m.index]):
            assert m.exempt, kind
            assert not m.turn_start
    by_index = {m.index: m for m in conv.messages}
    assert by_index[10].media == 1  # generated image, not its base64
    assert by_index[14].calls == ("call_cu1",)
    assert by_index[15].results == ("call_cu1",) and by_index[15].media == 1
    assert by_index[17].media == 2  # input_file + input_audio
    assert [m.index for m in conv.messages if m.turn_start] == [1, 7, 13, 17]


def test_previous_response_outputs_are_exempt() -> None:
    body = load("previous_response")
    conv = decode(body).conversation
    assert conv.messages[0].exempt and conv.messages[1].exempt
    assert conv.messages[0].results == ("call_stored_1",)
    assert not conv.messages[4].exempt  # its call is in input
    swept = plan(conv, Policy(budget=0))
    assert not swept.changed
    # the same outputs without server-side state are orphans
    stateless = {k: v for k, v in body.items() if k != "previous_response_id"}
    swept = plan(decode(stateless).conversation, Policy(budget=0))
    assert swept.report.orphans_removed == 2
    out = encode(decode(stateless), swept)
    check_pairing(out["input"])
    with_conversation = {**stateless, "conversation": "conv_689667905b048191b4740501625afd94"}
    assert decode(with_conversation).conversation.messages[0].exempt


def test_breadcrumb_in_incoming_history_is_recognised() -> None:
    for content in (CRUMB, [{"type": "input_text", "text": CRUMB}]):
        body = {
            "model": "m",
            "input": [
                {"role": "user", "content": content},
                {"role": "user", "content": "next"},
            ],
        }
        first = decode(body).conversation.messages[0]
        assert first.breadcrumb and not first.turn_start and first.role is Role.USER


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ([], "body is not an object"),
        ({"model": "m", "input": {"role": "user"}}, "input is not a list"),
        ({"model": "m", "input": 3}, "input is not a list"),
        ({"model": "m", "input": ["hi"]}, "input item is not an object"),
        ({"model": "m", "input": [{"role": "user", "content": "a"}, None]}, None),
    ],
)
def test_bad_shapes_raise_decode_error(body: Any, reason: str | None) -> None:
    with pytest.raises(DecodeError) as info:
        decode(body)
    if reason is not None:
        assert info.value.reason == reason


def test_odd_but_valid_json_is_tolerated() -> None:
    body: dict[str, Any] = {
        "model": 5,
        "max_output_tokens": "many",
        "input": [
            {"role": "user", "content": [{"type": "future_part", "x": [1, 2]}, "loose"]},
            {"type": ["weird"], "role": {"odd": 1}, "content": None},
            {"type": "message", "role": "assistant", "content": {"type": "odd"}},
            {"type": "function_call", "name": "f", "arguments": {"a": 1}},  # no call_id
            {"type": "function_call_output", "output": "x"},  # no call_id
            {"type": "compaction", "encrypted_content": "abc"},
            {"type": "new_tool_call", "call_id": "c9", "args": "x"},
            {"type": "new_tool_call_output", "call_id": "c9", "output": "y"},
        ],
    }
    decoded = decode(body)
    assert decoded.model is None and decoded.output_limit is None
    conv = decoded.conversation
    assert conv.messages[0].text_bytes == len(orjson.dumps(body["input"][0]["content"][0])) + 5
    assert conv.messages[3].exempt and conv.messages[4].exempt
    assert conv.messages[6].exempt and conv.messages[6].calls == ("c9",)
    assert conv.messages[7].results == ("c9",) and not conv.messages[7].exempt
    assert not plan(conv, Policy(budget=0)).changed  # nothing is an orphan
    out = encode(decoded, untouched(decoded))
    assert out == body


# --------------------------------------------------------------------- trims


@pytest.mark.parametrize("name", LIST_FIXTURES)
def test_preemptive_trim_keeps_whole_turns_and_pairs(name: str) -> None:
    body = load(name)
    stored = "previous_response_id" in body
    decoded = decode(body)
    originals = body["input"]
    starts = [m.index for m in decoded.conversation.messages if m.turn_start]
    for budget in (1, 50, 200, 600, 1500, 2300, 3500, 8000):
        trim_plan = trim(decoded, budget)
        out = encode(decoded, trim_plan)
        check_pairing(out["input"], stored=stored)
        redecoded = decode(out)
        kept = [m for m in redecoded.conversation.messages if m.turn_start]
        assert 1 <= len(kept) <= len(starts)
        # a suffix of whole turns: everything from the first kept turn on is the original
        first_kept = starts[len(starts) - len(kept)]
        tail = out["input"][-(len(originals) - first_kept) :]
        assert all(a is b for a, b in zip(tail, originals[first_kept:], strict=True))
        if trim_plan.report.trimmed:
            assert trim_plan.report.dropped_turns == len(starts) - len(kept)
            crumbs = [m for m in redecoded.conversation.messages if m.breadcrumb]
            assert len(crumbs) == 1
            assert trim_plan.report.tokens_after <= budget or len(kept) == 1
            again = trim(redecoded, budget)
            assert not again.report.trimmed and again.report.orphans_removed == 0
        # leading system items stay first
        lead = [i for i in originals[: starts[0]] if i.get("role") in ("system", "developer")]
        assert all(a is b for a, b in zip(out["input"], lead, strict=False))


def test_breadcrumb_placement_message() -> None:
    decoded = decode(load("agent_tools"))
    trim_plan = trim(decoded, 600)
    assert trim_plan.report.trimmed
    out = encode(decoded, trim_plan)
    assert out["input"][0]["role"] == "developer"
    assert out["input"][1] == {"role": "user", "content": CRUMB}
    assert out["input"][2]["role"] == "user"
    for key in ("instructions", "tools", "metadata", "x_vendor_extension", "max_output_tokens"):
        assert out[key] is decoded.body[key]


def test_breadcrumb_placement_merge_string_and_list() -> None:
    decoded = decode(load("agent_tools"))
    trim_plan = trim(decoded, 300, placement="merge")
    out = encode(decoded, trim_plan)
    assert out["input"][0]["role"] == "developer"
    merged = out["input"][1]
    assert merged["role"] == "user"
    assert merged["content"] == CRUMB + "\n\n" + "Thanks! And tomorrow in Paris?"
    assert decoded.body["input"][14]["content"] == "Thanks! And tomorrow in Paris?"

    trim_plan = trim(decoded, 2300, placement="merge")
    out = encode(decoded, trim_plan)
    merged = out["input"][1]
    original = decoded.body["input"][10]
    assert merged is not original
    assert merged["content"][0] == {"type": "input_text", "text": CRUMB + "\n\n"}
    assert merged["content"][1:] == original["content"]
    assert len(original["content"]) == 1  # not mutated
    check_pairing(out["input"])
    assert not decode(out).conversation.messages[1].breadcrumb


def test_breadcrumb_placement_none() -> None:
    decoded = decode(load("agent_tools"))
    trim_plan = trim(decoded, 2300, placement="none")
    assert trim_plan.report.trimmed and trim_plan.report.kept_turns == 2
    out = encode(decoded, trim_plan)
    assert all(i.get("content") != CRUMB for i in out["input"])
    assert out["input"][1] is decoded.body["input"][10]


def test_orphans_stripped_whole_with_their_reasoning() -> None:
    body = load("codex_reasoning")
    items = body["input"]
    # drop the output of call_patch: the call and its reasoning item become orphans
    broken = {
        **body,
        "input": [
            i
            for i in items
            if i.get("call_id") != "call_patch" or i["type"] != "custom_tool_call_output"
        ],
    }
    decoded = decode(broken)
    trim_plan = plan(decoded.conversation, Policy(budget=0))
    out = encode(decoded, trim_plan)
    ids = [i.get("id") for i in out["input"]]
    assert "ctc_003" not in ids and "rs_002" not in ids
    assert "rs_001" in ids
    check_pairing(out["input"])
    assert trim_plan.report.orphans_removed >= 1


def test_orphan_partial_parallel_calls_keep_reasoning() -> None:
    body = load("codex_reasoning")
    broken = {
        **body,
        "input": [
            i
            for i in body["input"]
            if not (i.get("type") == "shell_call_output" and i["call_id"] == "call_ruff")
        ],
    }
    decoded = decode(broken)
    trim_plan = plan(decoded.conversation, Policy(budget=0))
    out = encode(decoded, trim_plan)
    ids = [i.get("id") for i in out["input"]]
    assert "sh_005" not in ids  # the unanswered call goes
    assert "rs_003" in ids and "sh_004" in ids  # the reasoning keeps its other call
    reasoning = next(i for i in out["input"] if i.get("id") == "rs_003")
    assert reasoning is next(i for i in broken["input"] if i.get("id") == "rs_003")
    check_pairing(out["input"])


def test_orphan_output_without_call_is_removed() -> None:
    body = {
        "model": "m",
        "input": [
            {"role": "user", "content": "a"},
            {"type": "function_call_output", "call_id": "ghost", "output": "x"},
            {"type": "custom_tool_call", "call_id": "c1", "name": "n", "input": "i"},
            {"type": "function_call_output", "call_id": "c1", "output": "wrong type"},
            {"role": "user", "content": "b"},
        ],
    }
    decoded = decode(body)
    trim_plan = plan(decoded.conversation, Policy(budget=0))
    out = encode(decoded, trim_plan)
    # the id-only model pairs c1 across types; the ghost goes
    assert [i.get("call_id") for i in out["input"]] == [None, "c1", "c1", None]


def test_tool_result_capping_keeps_ids_and_structure() -> None:
    body = load("codex_reasoning")
    big = "x" * 3000
    items = list(body["input"])
    items[9] = {**items[9], "output": big}
    items[13] = {
        **items[13],
        "output": [{"stdout": big, "stderr": "short", "outcome": {"type": "exit", "exit_code": 1}}],
    }
    body = {**body, "input": items}
    snapshot = copy.deepcopy(body)
    decoded = decode(body)
    trim_plan = plan(decoded.conversation, Policy(budget=0, max_tool_result_chars=100))
    assert trim_plan.report.tool_results_capped == 2
    out = encode(decoded, trim_plan)
    assert body == snapshot
    patched = out["input"][9]
    assert patched["call_id"] == "call_patch" and patched["type"] == "custom_tool_call_output"
    assert len(patched["output"]) < 200 and "characters truncated" in patched["output"]
    shell = out["input"][13]
    assert shell["call_id"] == "call_pytest"
    chunk = shell["output"][0]
    assert "characters truncated" in chunk["stdout"] and chunk["stderr"] == "short"
    assert chunk["outcome"] == {"type": "exit", "exit_code": 1}
    assert out["input"][14] is items[14]


def test_capping_list_output_text_parts() -> None:
    body = load("agent_tools")
    decoded = decode(body)
    trim_plan = plan(decoded.conversation, Policy(budget=0, max_tool_result_chars=200))
    out = encode(decoded, trim_plan)
    capped = out["input"][12]
    original = body["input"][12]
    assert capped["call_id"] == "call_docs"
    assert capped["output"][0]["type"] == "input_text"
    assert "characters truncated" in capped["output"][0]["text"]
    assert capped["output"][1] is original["output"][1]  # the image part is untouched
    assert "characters truncated" not in original["output"][0]["text"]


def test_hoist_moves_late_developer_messages() -> None:
    body = {
        "model": "m",
        "input": [
            {"role": "user", "content": "a"},
            {"role": "developer", "content": "late rule"},
            {"role": "user", "content": "b"},
        ],
    }
    decoded = decode(body)
    trim_plan = plan(decoded.conversation, Policy(budget=0, hoist=decoded.hoistable))
    out = encode(decoded, trim_plan)
    assert [i["content"] for i in out["input"]] == ["late rule", "a", "b"]


def test_skip_encode_returns_the_body() -> None:
    decoded = decode(load("string_input"))
    out = encode(decoded, untouched(decoded))
    assert out == decoded.body


# --------------------------------------------------------------------- usage


def test_usage_from_json_response() -> None:
    response = {
        "id": "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b",
        "object": "response",
        "created_at": 1741476542,
        "status": "completed",
        "model": "gpt-4.1-2025-04-14",
        "output": [
            {
                "type": "message",
                "id": "msg_67ccd2bf17f0819081ff3bb2cf6508e60bb6a6b452d3795b",
                "status": "completed",
                "role": "assistant",
                "content": [
                    {"type": "output_text", "text": "In a peaceful grove...", "annotations": []}
                ],
            }
        ],
        "usage": {
            "input_tokens": 36,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 87,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 123,
        },
    }
    assert CODEC.usage(response) == 36
    assert CODEC.usage({"usage": None}) is None
    assert CODEC.usage([]) is None
    assert CODEC.usage({"error": {"message": "x"}}) is None


def test_usage_from_stream_events() -> None:
    created = json.dumps(
        {
            "type": "response.created",
            "sequence_number": 0,
            "response": {"id": "resp_1", "status": "in_progress", "usage": None},
        }
    )
    delta = json.dumps(
        {
            "type": "response.output_text.delta",
            "sequence_number": 4,
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "delta": "input_tokens",
        }
    )
    completed = json.dumps(
        {
            "type": "response.completed",
            "sequence_number": 9,
            "response": {
                "id": "resp_1",
                "object": "response",
                "status": "completed",
                "output": [],
                "usage": {
                    "input_tokens": 1234,
                    "input_tokens_details": {"cached_tokens": 1024},
                    "output_tokens": 56,
                    "output_tokens_details": {"reasoning_tokens": 0},
                    "total_tokens": 1290,
                },
            },
        }
    )
    incomplete = completed.replace("response.completed", "response.incomplete")
    assert CODEC.stream_usage(created) is None
    assert CODEC.stream_usage(delta) is None
    assert CODEC.stream_usage(completed) == 1234
    assert CODEC.stream_usage(incomplete) == 1234
    assert CODEC.stream_usage('{"type":"response.completed", "input_tokens"') is None
    assert CODEC.stream_usage("[DONE]") is None


def test_codec_identity() -> None:
    assert OpenAIResponsesCodec().wire_format == "openai-responses"
    assert isinstance(CODEC, OpenAIResponsesCodec)


def test_decode_speed_large_history() -> None:
    import time

    items: list[dict[str, Any]] = [{"role": "developer", "content": "rules"}]
    for t in range(1000):
        items.append({"role": "user", "content": [{"type": "input_text", "text": f"q{t} " * 80}]})
        items.append(
            {"type": "function_call", "call_id": f"c{t}", "name": "f", "arguments": "{}" * 40}
        )
        items.append({"type": "function_call_output", "call_id": f"c{t}", "output": "r" * 1200})
        items.append({"type": "message", "role": "assistant", "content": "done " * 60})
    body = {"model": "m", "input": items}
    assert len(orjson.dumps(body)) > 1_800_000
    best = min(_timed(lambda: decode(body), time.perf_counter) for _ in range(5))
    assert best < 0.05  # generous for CI; the real figure is a few ms


def _timed(fn: Any, clock: Any) -> float:
    start = clock()
    fn()
    return float(clock() - start)


# --------------------------------------------------------------------- property


@st.composite
def conversations(draw: st.DrawFn) -> dict[str, Any]:
    ids = iter(range(10_000))
    text = st.integers(min_value=1, max_value=400).map(lambda n: "w" * n)
    items: list[dict[str, Any]] = []
    if draw(st.booleans()):
        items.append({"role": draw(st.sampled_from(["system", "developer"])), "content": "sys"})
    for _ in range(draw(st.integers(0, 2))):  # strays before the first user message
        items.append(
            draw(
                st.sampled_from(
                    [
                        {"type": "message", "role": "assistant", "content": "stray"},
                        {"type": "web_search_call", "id": "ws_s", "status": "completed"},
                        {"role": "developer", "content": "late"},
                    ]
                )
            )
        )
    turns = draw(st.integers(1, 7))
    for t in range(turns):
        parts: Any = f"u{t} " + draw(text)
        if draw(st.booleans()):
            parts = [{"type": "input_text", "text": parts}]
            if draw(st.booleans()):
                parts.append({"type": "input_image", "image_url": "data:image/png;base64,AAAA"})
        items.append({"role": "user", "content": parts})
        for _ in range(draw(st.integers(0, 3))):
            step = draw(st.sampled_from(["say", "calls", "custom", "server"]))
            if step == "say":
                items.append(
                    {
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": draw(text), "annotations": []}],
                    }
                )
            elif step == "server":
                items.append({"type": "web_search_call", "id": f"ws{next(ids)}", "status": "ok"})
            else:
                kind = "function_call" if step == "calls" else "custom_tool_call"
                if draw(st.booleans()):
                    items.append(
                        {
                            "type": "reasoning",
                            "id": f"rs{next(ids)}",
                            "summary": [{"type": "summary_text", "text": draw(text)}],
                        }
                    )
                cids = [f"call_{next(ids)}" for _ in range(draw(st.integers(1, 3)))]
                for cid in cids:
                    call: dict[str, Any] = {"type": kind, "call_id": cid, "name": "tool"}
                    call["arguments" if kind == "function_call" else "input"] = draw(text)
                    items.append(call)
                for cid in cids:
                    output: Any = draw(text)
                    if draw(st.booleans()):
                        output = [{"type": "input_text", "text": output}]
                    items.append({"type": f"{kind}_output", "call_id": cid, "output": output})
        if draw(st.booleans()):
            items.append({"type": "message", "role": "assistant", "content": draw(text)})
    body: dict[str, Any] = {"model": "gpt-4.1", "input": items, "unknown": {"x": 1}}
    if draw(st.booleans()):
        body["instructions"] = "be brief"
    return body


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    body=conversations(),
    budget=st.integers(min_value=1, max_value=3000),
    placement=st.sampled_from(["message", "merge", "none"]),
)
def test_property_trim_round_trip(body: dict[str, Any], budget: int, placement: str) -> None:
    original = body["input"]
    check_pairing(original)
    decoded = decode(body)
    starts = [m.index for m in decoded.conversation.messages if m.turn_start]
    trim_plan = trim(decoded, budget, placement=placement)
    out = encode(decoded, trim_plan)
    items = out["input"]
    check_pairing(items)
    redecoded = decode(out)
    conv = redecoded.conversation
    kept_starts = [m.index for m in conv.messages if m.turn_start]
    n = len(kept_starts)
    assert n >= 1
    # the kept turns are a suffix, in order, item for item after the first kept turn start
    first = starts[len(starts) - n]
    tail = original[first:]
    assert len(items) >= len(tail)
    got = items[len(items) - len(tail) :]
    for a, b in zip(got, tail, strict=True):
        assert a is b or (placement == "merge" and a.get("role") == "user" and a is got[0])
    # leading systems kept, first
    lead = 0
    while lead < len(original) and original[lead].get("role") in ("system", "developer"):
        assert items[lead] is original[lead]
        lead += 1
    # newest turn kept (the merge placement may have put the breadcrumb into it)
    newest = items[len(items) - (len(original) - starts[-1])]
    assert newest is original[starts[-1]] or (placement == "merge" and n == 1)
    report = trim_plan.report
    event("trimmed" if report.trimmed else "untouched")
    if report.trimmed:
        assert report.kept_turns == n
        assert report.dropped_turns == len(starts) - n
        crumbs = sum(1 for m in conv.messages if m.breadcrumb)
        assert crumbs == (1 if placement == "message" else 0)
        assert conv.tokens <= budget or n == 1
    else:
        assert items == original
    again = plan(
        conv,
        Policy(
            budget=budget,
            breadcrumb_tokens=text_tokens(CRUMB),
            placement=placement,  # type: ignore[arg-type]
        ),
    )
    assert not again.report.trimmed
    assert again.report.orphans_removed == 0


def test_overflow_detection_delegates() -> None:
    error = {
        "error": {
            "message": "Your input exceeds the context window of this model. "
            "Please adjust your input and try again.",
            "type": "invalid_request_error",
            "param": "input",
            "code": "context_length_exceeded",
        }
    }
    assert CODEC.detect_overflow(400, orjson.dumps(error)) is not None
    rate = {"error": {"message": "Rate limit reached for requests", "code": "rate_limit_exceeded"}}
    assert CODEC.detect_overflow(429, orjson.dumps(rate)) is None
    head = b'event: response.created\ndata: {"type":"response.created","response":{}}\n\n'
    assert CODEC.detect_stream_overflow(head) is None
