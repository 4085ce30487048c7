"""Provider compaction in the codecs and the trim, on bodies built from the SDKs' own types.

Anthropic: an assistant ``compaction`` block makes the API ignore every block before it;
everything up to it is a pinned head, forwarded untouched, sized from that block.
Responses: the latest ``compaction`` input item is pinned like a leading system item; the
items before it are superseded and go first.
"""

from __future__ import annotations

from typing import Any

import orjson
from anthropic.types.beta import (
    BetaAssistantMessageParam,
    BetaCompactionBlock,
    BetaMessageParam,
    BetaTextBlock,
    BetaTextBlockParam,
    BetaToolResultBlockParam,
    BetaToolUseBlock,
    BetaUserMessageParam,
)
from openai.types.responses import (
    EasyInputMessageParam,
    ResponseCompactionItem,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from openai.types.responses.response_input_param import FunctionCallOutput

from trimgate.providers.anthropic import CODEC as ANTHROPIC
from trimgate.providers.base import DecodeOptions
from trimgate.providers.openai_responses import CODEC as RESPONSES
from trimgate.trimming.estimate import text_tokens
from trimgate.trimming.pipeline import Policy, plan

CRUMB = "[earlier turns omitted to fit the context window]"
OPTIONS = DecodeOptions(breadcrumb=CRUMB)
SUMMARY = "Summary: the user is fixing the parser; tests in tests/test_parse.py fail. " * 4


def wire(value: Any) -> Any:
    """A body as it travels: the SDK values dumped to JSON and read back."""
    return orjson.loads(orjson.dumps(value))


def user(text: str, *, cache: bool = False) -> BetaMessageParam:
    block = BetaTextBlockParam(type="text", text=text)
    if cache:
        block["cache_control"] = {"type": "ephemeral"}
    return BetaUserMessageParam(role="user", content=[block])


def assistant(*blocks: Any) -> BetaMessageParam:
    return BetaAssistantMessageParam(
        role="assistant", content=[b.to_dict(exclude_none=True) for b in blocks]
    )


def compaction_block() -> dict[str, Any]:
    block = BetaCompactionBlock(
        type="compaction", content=SUMMARY, encrypted_content="opaque==", signature="sig"
    ).to_dict(exclude_none=True)
    block["cache_control"] = {"type": "ephemeral"}  # a breakpoint may sit on it
    return block


def anthropic_body(*, calls: bool = False) -> dict[str, Any]:
    old = "x" * 4000
    messages: list[Any] = [
        user("first prompt " + old),
        assistant(BetaTextBlock(type="text", text="old answer " + old)),
        user("second prompt " + old),
    ]
    head: dict[str, Any] = {"role": "assistant", "content": [compaction_block()]}
    if calls:
        tool = BetaToolUseBlock(type="tool_use", id="toolu_1", name="read", input={"p": "a"})
        head["content"].append(tool.to_dict())
        result = BetaToolResultBlockParam(type="tool_result", tool_use_id="toolu_1", content="ok")
        messages += [head, BetaUserMessageParam(role="user", content=[result])]
        messages.append(assistant(BetaTextBlock(type="text", text="read it")))
    else:
        head["content"].append(BetaTextBlock(type="text", text="Continuing.").to_dict())
        messages.append(head)
    for n in range(3, 9):
        messages.append(user(f"task {n} " + "q" * 600, cache=n == 8))
        messages.append(assistant(BetaTextBlock(type="text", text=f"answer {n} " + "r" * 600)))
    messages.append(user("task 9 newest"))
    body: dict[str, Any] = wire(
        {"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": messages}
    )
    return body


def test_anthropic_compaction_head_is_pinned_and_sized_from_its_block() -> None:
    body = anthropic_body()
    decoded = ANTHROPIC.decode(body, path="/v1/messages", options=OPTIONS)
    conv = decoded.conversation
    assert conv.compacted
    head = conv.messages[:4]
    assert all(m.pinned for m in head) and not any(m.pinned for m in conv.messages[4:])
    assert [m.tokens for m in head[:3]] == [0, 0, 0]  # the API ignores them
    summary_bytes = len(SUMMARY) + len("Continuing.")
    assert head[3].tokens == (summary_bytes + 3) // 4 + 4  # the block and what follows it
    assert conv.tokens < 3 * 4000 // 4  # the old turns are not counted

    crumb = text_tokens(CRUMB)
    p = plan(conv, Policy(budget=1200, breadcrumb_tokens=crumb, step=240, anchor_limit=300))
    out = ANTHROPIC.encode(decoded, p, breadcrumb=CRUMB)["messages"]
    assert p.report.trimmed and p.report.anchor_tokens == 0  # the head replaces the anchor
    assert p.report.tokens_after <= 1200
    assert out[:4] == body["messages"][:4]  # forwarded untouched, breakpoint included
    assert out[3]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert out[4] == {"role": "user", "content": CRUMB}  # right after the head
    assert out[-1] == body["messages"][-1]
    assert "cache_control" in orjson.dumps(out[-3]).decode()  # the client's own breakpoint
    assert "cache_control" not in orjson.dumps(out[4]).decode()


def test_anthropic_compaction_with_calls_pins_their_results() -> None:
    body = anthropic_body(calls=True)
    decoded = ANTHROPIC.decode(body, path="/v1/messages", options=OPTIONS)
    conv = decoded.conversation
    assert [m.pinned for m in conv.messages[:6]] == [True] * 5 + [False]
    p = plan(conv, Policy(budget=900, breadcrumb_tokens=text_tokens(CRUMB)))
    out = ANTHROPIC.encode(decoded, p, breadcrumb=CRUMB)["messages"]
    assert p.report.trimmed and p.report.orphans_removed == 0
    assert out[:5] == body["messages"][:5] and out[5] == {"role": "user", "content": CRUMB}


def test_anthropic_compaction_block_in_a_user_message_is_plain_content() -> None:
    body = wire({"messages": [{"role": "user", "content": [compaction_block()]}, user("next")]})
    conv = ANTHROPIC.decode(body, path="/v1/messages", options=OPTIONS).conversation
    assert not conv.compacted and not any(m.pinned for m in conv.messages)


def out_text(text: str, n: int) -> dict[str, Any]:
    part = ResponseOutputText(type="output_text", text=text, annotations=[])
    msg = ResponseOutputMessage(
        id=f"msg_{n}", type="message", role="assistant", status="completed", content=[part]
    )
    return msg.to_dict(exclude_none=True)


def responses_body(compactions: int = 1) -> dict[str, Any]:
    items: list[Any] = [
        EasyInputMessageParam(role="developer", content="Follow the repo's rules."),
        EasyInputMessageParam(role="user", content="first prompt " + "x" * 3000),
        out_text("first answer " + "x" * 3000, 1),
        ResponseFunctionToolCall(
            type="function_call", call_id="call_1", name="read", arguments='{"p": "a"}'
        ).to_dict(exclude_none=True),
        FunctionCallOutput(type="function_call_output", call_id="call_1", output="y" * 2000),
    ]
    for n in range(compactions):
        item = ResponseCompactionItem(id=f"cmp_{n}", type="compaction", encrypted_content="e" * 400)
        items.append(item.to_dict(exclude_none=True))
        if n + 1 < compactions:
            items.append(EasyInputMessageParam(role="user", content=f"between {n} " + "z" * 2000))
    for n in range(2, 8):
        items.append(EasyInputMessageParam(role="user", content=f"task {n} " + "q" * 600))
        items.append(out_text(f"answer {n} " + "r" * 600, n))
    items.append(EasyInputMessageParam(role="user", content="task 8 newest"))
    body: dict[str, Any] = wire({"model": "gpt-5", "input": items})
    return body


def test_responses_latest_compaction_is_pinned_and_what_it_superseded_goes_first() -> None:
    body = responses_body(compactions=2)
    decoded = RESPONSES.decode(body, path="/v1/responses", options=OPTIONS)
    conv = decoded.conversation
    latest = next(
        i for i, x in reversed(list(enumerate(body["input"]))) if x.get("type") == "compaction"
    )
    assert conv.compacted and [m.index for m in conv.messages if m.pinned] == [latest]
    crumb = text_tokens(CRUMB)

    # just over: only the superseded items go, counted until then
    after_head = sum(m.tokens for m in conv.messages[latest + 1 :])
    fits = conv.overhead + conv.messages[0].tokens + conv.messages[latest].tokens + after_head
    p = plan(conv, Policy(budget=fits + crumb, breadcrumb_tokens=crumb))
    out = RESPONSES.encode(decoded, p, breadcrumb=CRUMB)["input"]
    assert p.report.trimmed and p.report.dropped_turns == 1
    assert out[0] == body["input"][0] and out[1] == body["input"][latest]
    assert out[2] == {"role": "user", "content": CRUMB}
    assert out[3:] == body["input"][latest + 1 :]

    # tighter: whole turns after the compaction go too; the compaction item stays
    p = plan(conv, Policy(budget=900, breadcrumb_tokens=crumb, step=180))
    out = RESPONSES.encode(decoded, p, breadcrumb=CRUMB)["input"]
    assert p.report.tokens_after <= 900 and p.report.orphans_removed == 0
    assert out[1] == body["input"][latest] and out[2] == {"role": "user", "content": CRUMB}
    assert out[-1] == body["input"][-1]


def test_responses_with_room_forwards_superseded_items_untouched() -> None:
    body = responses_body()
    decoded = RESPONSES.decode(body, path="/v1/responses", options=OPTIONS)
    p = plan(decoded.conversation, Policy(budget=100_000, breadcrumb_tokens=text_tokens(CRUMB)))
    assert not p.changed and not p.report.trimmed
