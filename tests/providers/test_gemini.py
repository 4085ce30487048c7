"""The Gemini codec: decode, encode, pairing rules, usage, and a property test."""

from __future__ import annotations

import copy
import itertools
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from trimgate.errors import DecodeError
from trimgate.history import Role
from trimgate.providers.base import Decoded, DecodeOptions
from trimgate.providers.gemini import CODEC, GeminiDecoded
from trimgate.trimming import Policy, plan, text_tokens
from trimgate.trimming.estimate import bytes_tokens, utf8_len
from trimgate.trimming.pipeline import Placement, TrimPlan

DATA = Path(__file__).parent.parent / "data" / "gemini"
CRUMB = "[earlier turns omitted to fit the context window]"
OPTIONS = DecodeOptions(breadcrumb=CRUMB)
GENERATE = "/v1beta/models/gemini-2.5-flash:generateContent"
STREAM = "/v1beta/models/gemini-2.5-pro:streamGenerateContent"

FIXTURES = {
    "agent_tools.json": GENERATE,
    "snake_case_ids.json": "/v1/models/gemini-1.5-pro:streamGenerateContent",
    "count_tokens_wrapped.json": "/v1beta/models/gemini-2.0-flash:countTokens",
    "count_tokens_plain.json": "/v1beta/models/gemini-2.0-flash:countTokens",
}
CRUMB_ITEM = {"role": "user", "parts": [{"text": CRUMB}]}


def load(name: str) -> dict[str, Any]:
    body: dict[str, Any] = orjson.loads((DATA / name).read_bytes())
    return body


def history(body: dict[str, Any]) -> list[Any]:
    request = body.get("generateContentRequest", body)
    contents: list[Any] = request["contents"]
    return contents


def crumb_tokens(placement: Placement) -> int:
    if placement == "message":
        return text_tokens(CRUMB)
    if placement == "merge":
        return bytes_tokens(utf8_len(CRUMB + "\n\n"))
    return 0


def run(
    body: dict[str, Any], policy: Policy, path: str = GENERATE
) -> tuple[GeminiDecoded, TrimPlan, dict[str, Any]]:
    decoded = CODEC.decode(body, path=path, options=OPTIONS)
    trim = plan(decoded.conversation, policy)
    return decoded, trim, CODEC.encode(decoded, trim, breadcrumb=CRUMB)


def _field(part: dict[str, Any], camel: str, snake: str) -> Any:
    return part.get(camel, part.get(snake))


def check_pairing(contents: list[Any], *, first_user: bool = True) -> None:
    """Gemini's rules for a history, checked on the wire shape.

    Roles are user / model / function; no content is empty; the first content is a
    user content that answers nothing; the calls of a model content are all answered
    (by id, or by name in order) by the response contents right after it, before any
    other content or further calls; no response without an open call; nothing pending.
    """
    open_calls: list[tuple[str | None, str]] = []
    for pos, item in enumerate(contents):
        assert isinstance(item, dict)
        role = item.get("role", "user")
        assert role in ("user", "model", "function"), role
        parts = item.get("parts")
        assert isinstance(parts, list) and parts, f"content {pos} is empty"
        calls = [c for p in parts if (c := _field(p, "functionCall", "function_call"))]
        responses = [r for p in parts if (r := _field(p, "functionResponse", "function_response"))]
        if pos == 0 and first_user:
            assert role == "user" and not responses and not calls, "bad first content"
        if calls:
            assert role == "model"
            assert not open_calls, f"content {pos}: calls before the last ones were answered"
            open_calls = [(c.get("id"), c["name"]) for c in calls]
        elif responses:
            assert role in ("user", "function")
            for r in responses:
                rid = r.get("id")
                match = next(
                    (
                        k
                        for k, (cid, name) in enumerate(open_calls)
                        if (cid == rid if rid else name == r["name"])
                    ),
                    None,
                )
                assert match is not None, f"content {pos}: response without its call"
                open_calls.pop(match)
        else:
            assert not open_calls, f"content {pos} stands between calls and their responses"
    assert not open_calls, "calls left without responses"


# --- decode -------------------------------------------------------------------------


def test_decode_agent_fixture() -> None:
    body = load("agent_tools.json")
    decoded = CODEC.decode(body, path=GENERATE, options=OPTIONS)
    assert decoded.model == "gemini-2.5-flash"
    assert decoded.stream is False
    assert decoded.output_limit == 8192
    assert decoded.hoistable is False
    conv = decoded.conversation
    assert conv.pending_calls_ok is False
    assert conv.overhead > bytes_tokens(len(orjson.dumps(body["tools"])))
    msgs = conv.messages
    assert [m.index for m in msgs] == list(range(len(body["contents"])))
    assert [i for i, m in enumerate(msgs) if m.turn_start] == [0, 6, 8, 10]
    assert msgs[1].role is Role.ASSISTANT and len(msgs[1].calls) == 2
    assert msgs[1].other_content  # the thought text
    assert msgs[2].role is Role.USER and not msgs[2].turn_start
    assert msgs[2].results == msgs[1].calls  # by name and order
    assert msgs[2].other_content is False
    # only the single-string response is cappable
    assert msgs[2].tool_texts == (
        body["contents"][2]["parts"][0]["functionResponse"]["response"]["content"],
    )
    assert msgs[3].other_content is False and msgs[4].results == msgs[3].calls
    assert msgs[4].tool_texts[0].startswith("def test_parse_config")
    assert msgs[6].media == 1 and msgs[8].media == 1
    assert msgs[6].tokens == 1600 + bytes_tokens(msgs[6].text_bytes) + 4
    # base64 is never text
    assert msgs[6].text_bytes == utf8_len(body["contents"][6]["parts"][0]["text"])
    # server-side code execution is plain text, never a call
    assert msgs[9].calls == () and msgs[9].results == () and msgs[9].text_bytes > 0


def test_decode_snake_case_ids_and_function_role() -> None:
    body = load("snake_case_ids.json")
    decoded = CODEC.decode(body, path=FIXTURES["snake_case_ids.json"], options=OPTIONS)
    assert decoded.model == "gemini-1.5-pro"
    assert decoded.stream is True
    assert decoded.output_limit == 1024
    msgs = decoded.conversation.messages
    assert not msgs[0].turn_start  # stray model greeting before the first user message
    assert msgs[1].turn_start  # no role: user
    assert msgs[2].calls == ("call_paris", "call_tokyo")
    assert msgs[3].results == ("call_tokyo", "call_paris")
    assert msgs[3].tool_texts == ("Tokyo: 22°C, clear", "Paris: 14°C, rain")
    assert msgs[7].role is Role.TOOL and msgs[7].results == msgs[6].calls
    assert not msgs[7].turn_start
    system = body["system_instruction"]["parts"]
    assert decoded.conversation.overhead >= bytes_tokens(sum(utf8_len(p["text"]) for p in system))


def test_decode_tuned_model_and_breadcrumb() -> None:
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": CRUMB}]},
            {"role": "user", "parts": [{"text": "hi"}]},
        ]
    }
    decoded = CODEC.decode(
        body, path="/v1beta/tunedModels/my-tune-7:generateContent", options=OPTIONS
    )
    assert decoded.model == "my-tune-7"
    first, second = decoded.conversation.messages
    assert first.breadcrumb and not first.turn_start
    assert second.turn_start and not second.breadcrumb


def test_unanswerable_anonymous_response_gets_an_orphan_id() -> None:
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "go"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "a", "args": {}}}]},
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"name": "a", "response": {"r": "1"}}},
                    {"functionResponse": {"name": "a", "response": {"r": "2"}}},
                    {"functionResponse": {"name": "b", "response": {"r": "3"}}},
                ],
            },
        ]
    }
    msgs = CODEC.decode(body, path=GENERATE, options=OPTIONS).conversation.messages
    first, second, third = msgs[2].results
    assert first == msgs[1].calls[0]
    assert second not in msgs[1].calls and third not in msgs[1].calls
    assert len({first, second, third}) == 3


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ([], "body is not an object"),
        ({"generationConfig": {}}, "contents is missing"),
        ({"contents": {"role": "user"}}, "contents is not a list"),
        ({"contents": ["hello"]}, "content is not an object"),
        ({"contents": [{"role": "user", "parts": "hello"}]}, "parts is not a list"),
        ({"contents": [{"role": "user", "parts": ["hello"]}]}, "part is not an object"),
        ({"generateContentRequest": {"contents": 3}}, "contents is not a list"),
    ],
)
def test_decode_errors(body: Any, reason: str) -> None:
    with pytest.raises(DecodeError) as info:
        CODEC.decode(body, path=GENERATE, options=OPTIONS)
    assert info.value.reason == reason


# --- encode -------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_untouched_round_trip(name: str) -> None:
    body = load(name)
    original = copy.deepcopy(body)
    _, trim, out = run(body, Policy(budget=0), FIXTURES[name])
    assert not trim.changed
    assert out == original and out is not body
    for new, old in zip(history(out), history(body), strict=True):
        assert new is old
    assert body == original


@pytest.mark.parametrize("name", sorted(FIXTURES))
@pytest.mark.parametrize("placement", ["message", "merge", "none"])
def test_preemptive_trim_keeps_whole_turns(name: str, placement: Placement) -> None:
    body = load(name)
    original = copy.deepcopy(body)
    decoded = CODEC.decode(body, path=FIXTURES[name], options=OPTIONS)
    conv = decoded.conversation
    budget = conv.overhead + crumb_tokens(placement) + conv.messages[-1].tokens + 1
    policy = Policy(budget=budget, breadcrumb_tokens=crumb_tokens(placement), placement=placement)
    trim = plan(conv, policy)
    out = CODEC.encode(decoded, trim, breadcrumb=CRUMB)
    assert trim.report.trimmed and trim.report.kept_turns == 1
    assert body == original  # nothing mutated
    contents = history(out)
    check_pairing(contents)
    old = history(body)
    if placement == "message":
        assert contents[0] == CRUMB_ITEM
        kept = contents[1:]
    elif placement == "merge":
        assert contents[0]["parts"][0] == {"text": CRUMB + "\n\n"}
        assert contents[0]["parts"][1:] == old[len(old) - len(contents)]["parts"]
        kept = contents[1:]
        assert len(contents) == 1
    else:
        kept = contents
    assert all(a is b for a, b in zip(kept, old[len(old) - len(kept) :], strict=True))
    # every non-history field is the very same object
    request, before = (
        out.get("generateContentRequest", out),
        body.get("generateContentRequest", body),
    )
    assert all(request[k] is before[k] for k in before if k != "contents")
    assert all(out[k] is body[k] for k in body if k not in ("generateContentRequest", "contents"))
    again = CODEC.decode(out, path=FIXTURES[name], options=OPTIONS)
    assert not plan(again.conversation, policy).report.trimmed


def test_count_tokens_wrapper_is_encoded_in_place() -> None:
    body = load("count_tokens_wrapped.json")
    path = FIXTURES["count_tokens_wrapped.json"]
    decoded = CODEC.decode(body, path=path, options=OPTIONS)
    assert decoded.output_limit == 256 and decoded.stream is False
    assert decoded.body is body
    policy = Policy(budget=decoded.conversation.tokens - 1, breadcrumb_tokens=text_tokens(CRUMB))
    trim = plan(decoded.conversation, policy)
    out = CODEC.encode(decoded, trim, breadcrumb=CRUMB)
    assert set(out) == {"generateContentRequest"}
    inner = out["generateContentRequest"]
    assert inner["model"] == "models/gemini-2.0-flash"
    assert inner["contents"][0] == CRUMB_ITEM
    assert inner["contents"][1] is body["generateContentRequest"]["contents"][4]
    check_pairing(inner["contents"])


def _orphan_body() -> dict[str, Any]:
    return {
        "contents": [
            {"role": "user", "parts": [{"text": "start"}]},
            {
                "role": "model",
                "parts": [
                    {"text": "Two lookups."},
                    {"functionCall": {"id": "a", "name": "f", "args": {"x": 1}}},
                    {"functionCall": {"id": "b", "name": "f", "args": {"x": 2}}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"id": "a", "name": "f", "response": {"r": "A"}}},
                    {"functionResponse": {"id": "zz", "name": "f", "response": {"r": "?"}}},
                ],
            },
            {"role": "model", "parts": [{"text": "Done."}]},
            {"role": "user", "parts": [{"text": "again"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "g", "args": {}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "h", "response": {"r": ""}}}]},
            {"role": "user", "parts": [{"text": "last"}]},
        ]
    }


def test_orphan_sweep_partial_and_whole() -> None:
    body = _orphan_body()
    original = copy.deepcopy(body)
    _, trim, out = run(body, Policy(budget=0))
    assert body == original
    contents = out["contents"]
    # partial: call b loses its part, response zz loses its part, the rest stays
    assert contents[1]["parts"] == original["contents"][1]["parts"][:2]
    assert contents[2]["parts"] == original["contents"][2]["parts"][:1]
    # whole: the unanswered anonymous call g and the response to h (no call) go entirely
    assert contents[3:] == [original["contents"][i] for i in (3, 4, 7)]
    assert trim.report.orphans_removed == 4
    check_pairing(contents)
    # a swept history sweeps clean
    again = CODEC.decode(out, path=GENERATE, options=OPTIONS)
    assert plan(again.conversation, Policy(budget=0)).changed is False


def test_checker_rejects_orphans_and_bad_starts() -> None:
    with pytest.raises(AssertionError):
        check_pairing(_orphan_body()["contents"])
    with pytest.raises(AssertionError):
        check_pairing(load("snake_case_ids.json")["contents"])  # starts with a model content
    check_pairing(load("snake_case_ids.json")["contents"], first_user=False)
    check_pairing(load("agent_tools.json")["contents"])


def test_strip_with_a_plain_decoded() -> None:
    body = _orphan_body()
    decoded = CODEC.decode(body, path=GENERATE, options=OPTIONS)
    plain = Decoded(  # the protocol's own type, without the part ids
        body=decoded.body,
        conversation=decoded.conversation,
        model=decoded.model,
        output_limit=None,
        stream=False,
    )
    trim = plan(decoded.conversation, Policy(budget=0))
    assert CODEC.encode(plain, trim, breadcrumb=CRUMB) == CODEC.encode(
        decoded, trim, breadcrumb=CRUMB
    )


def test_tool_result_capping_keeps_structure_and_id() -> None:
    long = "é" * 300 + "END"
    body: dict[str, Any] = {
        "contents": [
            {"role": "user", "parts": [{"text": "read both"}]},
            {
                "role": "model",
                "parts": [
                    {"functionCall": {"id": "r1", "name": "read", "args": {"p": "a"}}},
                    {"functionCall": {"id": "r2", "name": "read", "args": {"p": "b"}}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {
                        "functionResponse": {
                            "id": "r1",
                            "name": "read",
                            "response": {"content": long},
                        },
                        "x": 1,
                    },
                    {
                        "functionResponse": {
                            "id": "r2",
                            "name": "read",
                            "response": {"a": long, "b": 1},
                        }
                    },
                    {
                        "functionResponse": {
                            "id": "r9",
                            "name": "read",
                            "response": {"output": long},
                        }
                    },
                ],
            },
            {"role": "user", "parts": [{"text": "thanks"}]},
        ]
    }
    original = copy.deepcopy(body)
    _, trim, out = run(body, Policy(budget=0, max_tool_result_chars=60))
    assert body == original
    assert trim.report.tool_results_capped == 2  # r1 and r9; r2 has no single string field
    parts = out["contents"][2]["parts"]
    assert len(parts) == 2  # r9 answers no call: stripped after capping
    first = parts[0]
    assert first["x"] == 1
    response = first["functionResponse"]
    assert response["id"] == "r1" and response["name"] == "read"
    assert set(response["response"]) == {"content"}
    capped = response["response"]["content"]
    assert capped.startswith("é" * 40) and capped.endswith("END") and "truncated" in capped
    assert parts[1] is body["contents"][2]["parts"][1]
    assert out["contents"][1] is body["contents"][1]


# --- usage --------------------------------------------------------------------------

RESPONSE = {
    "candidates": [
        {
            "content": {"role": "model", "parts": [{"text": "Hello!"}]},
            "finishReason": "STOP",
            "index": 0,
        }
    ],
    "usageMetadata": {
        "promptTokenCount": 1234,
        "candidatesTokenCount": 9,
        "totalTokenCount": 1270,
        "thoughtsTokenCount": 27,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 1234}],
    },
    "modelVersion": "gemini-2.5-flash",
    "responseId": "tTCwacuEBMvnitYP06qsgQY",
}


def test_usage_from_json() -> None:
    assert CODEC.usage(RESPONSE) == 1234
    assert CODEC.usage({"totalTokens": 31, "cachedContentTokenCount": 0}) == 31
    assert CODEC.usage({"usage_metadata": {"prompt_token_count": 7}}) == 7
    # streamGenerateContent without alt=sse answers with a JSON array of chunks
    assert CODEC.usage([{"candidates": []}, RESPONSE, {"candidates": []}]) == 1234
    assert CODEC.usage({"candidates": []}) is None
    assert CODEC.usage({"usageMetadata": {"promptTokenCount": "12"}}) is None
    assert CODEC.usage("nope") is None


def test_usage_from_stream_events() -> None:
    early = {
        "candidates": [{"content": {"role": "model", "parts": [{"text": "Hel"}]}}],
        "usageMetadata": {"trafficType": "ON_DEMAND"},
        "modelVersion": "gemini-2.5-flash",
    }
    assert CODEC.stream_usage(orjson.dumps(early).decode()) is None
    assert CODEC.stream_usage(orjson.dumps(RESPONSE).decode()) == 1234
    assert CODEC.stream_usage('{"promptTokenCount": ') is None
    assert CODEC.stream_usage("[DONE]") is None


def test_module_shape() -> None:
    assert CODEC.wire_format == "gemini"


# --- property -----------------------------------------------------------------------

NAMES = ("read_file", "search", "run")


@st.composite
def gemini_contents(draw: st.DrawFn) -> list[dict[str, Any]]:
    contents: list[dict[str, Any]] = []
    ids = itertools.count()

    def text() -> str:
        return "é" * draw(st.integers(0, 40)) + "w" * draw(st.integers(0, 600))

    def tool_round() -> None:
        calls: list[tuple[str | None, str]] = []
        for _ in range(draw(st.integers(1, 3))):
            cid = f"call-{next(ids)}" if draw(st.booleans()) else None
            calls.append((cid, draw(st.sampled_from(NAMES))))
        parts: list[dict[str, Any]] = []
        if draw(st.booleans()):
            parts.append({"text": text(), "thought": True})
        for k, (cid, name) in enumerate(calls):
            call: dict[str, Any] = {"name": name, "args": {"q": text()}}
            if cid:
                call["id"] = cid
            part: dict[str, Any] = {"functionCall": call}
            if k == 0 and draw(st.booleans()):
                part["thoughtSignature"] = "c2lnbmF0dXJl"
            parts.append(part)
        contents.append({"role": "model", "parts": parts})
        responses: list[dict[str, Any]] = []
        for cid, name in calls:
            result: dict[str, Any] = (
                {"result": text()} if draw(st.booleans()) else {"items": [text()], "ok": True}
            )
            response: dict[str, Any] = {"name": name, "response": result}
            if cid and draw(st.booleans()):
                response["id"] = cid
            responses.append({"functionResponse": response})
        if all("id" in r["functionResponse"] for r in responses):
            responses = draw(st.permutations(responses))
        role = draw(st.sampled_from(("user", "function")))
        if draw(st.booleans()):
            contents.extend({"role": role, "parts": [r]} for r in responses)
        else:
            contents.append({"role": role, "parts": responses})

    stray = draw(st.sampled_from(("none", "text", "tools")))
    if stray != "none":
        contents.append({"role": "model", "parts": [{"text": text() or "hi"}]})
    if stray == "tools":
        tool_round()
    for _ in range(draw(st.integers(1, 7))):
        user: dict[str, Any] = {"parts": [{"text": text() or "?"}]}
        if draw(st.booleans()):
            user["role"] = "user"
        if draw(st.integers(0, 4)) == 0:
            user["parts"].append({"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}})
        contents.append(user)
        for _ in range(draw(st.integers(0, 2))):
            tool_round()
        if draw(st.booleans()):
            contents.append({"role": "model", "parts": [{"text": text() or "ok"}]})
    return contents


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(contents=gemini_contents(), data=st.data())
def test_property_trim_round_trip(contents: list[dict[str, Any]], data: st.DataObject) -> None:
    system = {"parts": [{"text": "Be brief."}]}
    tools = [{"functionDeclarations": [{"name": n, "description": n} for n in NAMES]}]
    body: dict[str, Any] = {"systemInstruction": system, "tools": tools, "contents": contents}
    original = copy.deepcopy(body)
    decoded = CODEC.decode(body, path=STREAM, options=OPTIONS)
    conv = decoded.conversation
    starts = [i for i, m in enumerate(conv.messages) if m.turn_start]
    total = conv.tokens
    budget = data.draw(
        st.one_of(st.integers(0, total + 50), st.integers(total * 2 // 3, total + 50)),
        label="budget",
    )
    placement: Placement = data.draw(st.sampled_from(("message", "merge", "none")))
    policy = Policy(budget=budget, breadcrumb_tokens=crumb_tokens(placement), placement=placement)
    trim = plan(conv, policy)
    out = CODEC.encode(decoded, trim, breadcrumb=CRUMB)
    event(f"trimmed={trim.report.trimmed} placement={placement}")
    event(f"kept_turns={min(trim.report.kept_turns, 3)}")

    assert body == original
    assert out["systemInstruction"] is system and out["tools"] is tools
    assert trim.report.orphans_removed == 0  # a valid history has no orphans
    result = out["contents"]
    kept = list(result)
    if trim.breadcrumb_at is not None:
        assert trim.report.trimmed
        if placement == "message":
            assert kept.pop(0) == CRUMB_ITEM
        else:
            head = kept[0]
            assert head["parts"][0] == {"text": CRUMB + "\n\n"}
            kept[0] = {**head, "parts": head["parts"][1:]}
    start = len(contents) - len(kept)
    assert start >= 0
    # the kept items are a suffix of the original, in order, the very same objects
    for pos, (new, old) in enumerate(zip(kept, contents[start:], strict=True)):
        assert new is old or (pos == 0 and placement == "merge" and new == old)
    if trim.report.trimmed:
        assert start in starts
        assert (trim.breadcrumb_at is not None) == (placement != "none")
    else:
        assert start == 0
    assert starts[-1] >= start  # the newest turn is kept
    first_is_user = contents[0].get("role", "user") == "user"
    check_pairing(result, first_user=trim.report.trimmed or first_is_user)

    again = CODEC.decode(out, path=STREAM, options=OPTIONS)
    assert sum(m.turn_start for m in again.conversation.messages) == trim.report.kept_turns
    replanned = plan(again.conversation, policy)
    assert not replanned.report.trimmed and not replanned.changed
    if budget and trim.report.kept_turns > 1:
        assert again.conversation.tokens <= budget
        assert trim.report.tokens_after <= budget
