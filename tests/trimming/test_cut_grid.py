"""Cache-stable cuts and the anchor, on growing conversations through every codec.

A session grows item by item; a request goes out whenever the model has to answer (after
a user message or a tool result). Each request is decoded, planned and encoded as the
proxy does, and the plans of consecutive requests are compared.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.builders import msg
from tests.trimming.test_properties import conversations
from trimgate.history import Conversation, Message
from trimgate.providers.base import DecodeOptions
from trimgate.providers.registry import CODECS
from trimgate.trimming.estimate import scale, text_tokens
from trimgate.trimming.pipeline import Placement, Policy, TrimPlan, plan
from trimgate.trimming.policy import breadcrumb_tokens
from trimgate.trimming.turns import TrimResult, leading_systems, trim_to_recent_turns

CRUMB_TEXT = "[earlier turns omitted to fit the context window]"
CRUMB = text_tokens(CRUMB_TEXT)
OPTIONS = DecodeOptions(breadcrumb=CRUMB_TEXT)
FORMATS = ("openai", "anthropic", "openai-responses", "gemini")
HISTORY = {"openai": "messages", "anthropic": "messages", "openai-responses": "input"}
HISTORY_GEMINI = "contents"


# --- the minimal-cut rules as they were: cut_step 0 and no anchor must match them ---------


def old_trim(
    messages: Sequence[Message],
    budget: int,
    *,
    overhead: int = 0,
    breadcrumb_tokens: int = 0,
    ratio: float = 1.0,
    max_turns: int | None = None,
) -> TrimResult:
    """The whole-turn trim before cut grids and anchors, kept verbatim as the reference."""
    sizes = [m.tokens for m in messages]
    before = scale(overhead + sum(sizes), ratio)
    lead = leading_systems(messages)
    starts = [i for i, m in enumerate(messages[lead:], lead) if m.turn_start]
    total_turns = len(starts)
    over_budget = budget > 0 and before > budget
    over_turns = max_turns is not None and total_turns > max(1, max_turns)
    if not (over_budget or over_turns) or total_turns <= 1:
        return TrimResult(tuple(messages), 0, 0, total_turns, before, before, False, lead)
    pinned = tuple(m for m in messages[lead : starts[0]] if m.exempt)
    fixed = overhead + sum(sizes[:lead]) + sum(m.tokens for m in pinned) + breadcrumb_tokens
    prefix = list(itertools.accumulate(sizes, initial=0))
    total = prefix[-1]
    first = 1
    if max_turns is not None:
        first = max(first, total_turns - max(1, max_turns))
    cut = total_turns - 1
    if budget <= 0:
        cut = first
    else:
        for k in range(first, total_turns):
            if scale(fixed + total - prefix[starts[k]], ratio) <= budget:
                cut = k
                break
    start = starts[cut]
    kept = tuple(messages[:lead]) + pinned + tuple(messages[start:])
    return TrimResult(
        kept,
        cut,
        start - lead - len(pinned),
        total_turns - cut,
        before,
        scale(fixed + total - prefix[start], ratio),
        True,
        lead,
    )


OLD_FIELDS = (
    "kept",
    "dropped_turns",
    "dropped_messages",
    "kept_turns",
    "tokens_before",
    "tokens_after",
    "trimmed",
    "leading",
)


@settings(max_examples=300, deadline=None)
@given(
    conversations(),
    st.one_of(st.just(0), st.integers(1, 4000)),
    st.sampled_from([1.0, 1.3]),
    st.none() | st.integers(0, 6),
)
def test_no_step_and_no_anchor_trim_exactly_as_before(
    c: Conversation, budget: int, ratio: float, max_turns: int | None
) -> None:
    kwargs: dict[str, Any] = {
        "overhead": c.overhead,
        "breadcrumb_tokens": CRUMB,
        "ratio": ratio,
        "max_turns": max_turns,
    }
    new = trim_to_recent_turns(c.messages, budget, **kwargs)
    old = old_trim(c.messages, budget, **kwargs)
    assert [getattr(new, f) for f in OLD_FIELDS] == [getattr(old, f) for f in OLD_FIELDS]
    if old.trimmed:
        assert new.kept_units == old.kept_turns
    # the plan puts the breadcrumb where it did: after leading systems and pinned results
    p = plan(c, Policy(budget=budget, breadcrumb_tokens=CRUMB, ratio=ratio, max_turns=max_turns))
    if p.breadcrumb_at is not None:
        at = leading_systems(p.kept)
        while at < len(p.kept) and p.kept[at].exempt:
            at += 1
        assert p.breadcrumb_at == at


# --- growing sessions -----------------------------------------------------------------


@dataclass(frozen=True)
class Item:
    kind: str  # "system" | "user" | "assistant" | "call" | "result"
    text: str
    call: str = ""
    parts: tuple[str, ...] = ()  # a user message of several text parts (``text`` unused)


@st.composite
def sessions(draw: st.DrawFn) -> list[Item]:
    ids = itertools.count()
    words = st.integers(0, 5000).map(lambda n: f"w{n} ")

    def text(lo: int, hi: int) -> str:
        n = draw(st.integers(lo, hi))
        return ("".join(draw(st.lists(words, min_size=1, max_size=4))) * (n // 8 + 1))[:n]

    items = [Item("system", "You are a careful assistant. " + text(0, 400))]
    for _ in range(draw(st.integers(1, 3))):  # harness preamble + first prompt
        items.append(Item("user", "<context> " + text(10, 700)))
    for turn in range(draw(st.integers(6, 24))):
        if turn:
            items.append(Item("user", f"task {turn}: " + text(10, 500)))
        for _ in range(draw(st.integers(0, 2))):
            cid = f"call_{next(ids)}"
            items.append(Item("call", '{"path": "' + text(5, 80) + '"}', cid))
            items.append(Item("result", text(0, 1200), cid))
        items.append(Item("assistant", "done: " + text(5, 300)))
    return items


def wire_item(fmt: str, item: Item) -> dict[str, Any]:
    k, t, cid = item.kind, item.text, item.call
    if item.parts:
        kind = {"anthropic": "text", "openai": "text", "openai-responses": "input_text"}
        if fmt == "gemini":
            return {"role": "user", "parts": [{"text": x} for x in item.parts]}
        return {"role": "user", "content": [{"type": kind[fmt], "text": x} for x in item.parts]}
    if fmt == "openai":
        if k == "call":
            fn = {"name": "read", "arguments": t}
            return {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": cid, "type": "function", "function": fn}],
            }
        if k == "result":
            return {"role": "tool", "tool_call_id": cid, "content": t}
        return {"role": k, "content": t}
    if fmt == "anthropic":
        if k == "call":
            block = {"type": "tool_use", "id": cid, "name": "read", "input": {"q": t}}
            return {"role": "assistant", "content": [block]}
        if k == "result":
            return {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": cid, "content": t}],
            }
        return {"role": k, "content": [{"type": "text", "text": t}]}
    if fmt == "openai-responses":
        if k == "call":
            return {"type": "function_call", "call_id": cid, "name": "read", "arguments": t}
        if k == "result":
            return {"type": "function_call_output", "call_id": cid, "output": t}
        if k == "assistant":
            part = {"type": "output_text", "text": t}
            return {"type": "message", "role": "assistant", "content": [part]}
        return {"role": "developer" if k == "system" else k, "content": t}
    # gemini
    if k == "call":
        return {
            "role": "model",
            "parts": [{"functionCall": {"name": "read", "args": {"q": t}, "id": cid}}],
        }
    if k == "result":
        resp = {"name": "read", "id": cid, "response": {"output": t}}
        return {"role": "user", "parts": [{"functionResponse": resp}]}
    return {"role": "model" if k == "assistant" else "user", "parts": [{"text": t}]}


def body_of(fmt: str, items: list[Item]) -> dict[str, Any]:
    if fmt == "gemini":
        system = {"parts": [{"text": items[0].text}]}
        return {"systemInstruction": system, "contents": [wire_item(fmt, i) for i in items[1:]]}
    return {"model": "m", HISTORY[fmt]: [wire_item(fmt, i) for i in items]}


def history_of(fmt: str, body: dict[str, Any]) -> list[bytes]:
    return [orjson.dumps(x) for x in body[HISTORY.get(fmt, HISTORY_GEMINI)]]


@dataclass
class Sent:
    plan: TrimPlan
    history: list[bytes]  # the forwarded history items, encoded
    cut: int  # wire index of the first kept item after the head; 0 when untrimmed
    crumb: int  # position of the breadcrumb in ``history``, -1 when none


def send(fmt: str, items: list[Item], policy: Policy) -> Sent:
    body = orjson.loads(orjson.dumps(body_of(fmt, items)))
    decoded = CODECS[fmt].decode(body, path="/v1/x", options=OPTIONS)
    p = plan(decoded.conversation, policy)
    out = CODECS[fmt].encode(decoded, p, breadcrumb=CRUMB_TEXT) if p.changed else body
    at = p.breadcrumb_at
    cut = p.kept[at].index if p.report.trimmed and at is not None else 0
    return Sent(p, history_of(fmt, out), cut, at if at is not None else -1)


def requests(items: list[Item]) -> list[int]:
    """Lengths of the history at each request: after each user message or tool result."""
    return [n + 1 for n, i in enumerate(items) if n and i.kind in ("user", "result")]


@pytest.mark.parametrize("placement", ["message", "merge"])
@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions(), st.integers(1200, 3000))
def test_a_growing_session_keeps_its_cut_and_prefix(
    fmt: str, placement: Placement, items: list[Item], budget: int
) -> None:
    step = int(0.2 * budget)
    crumb = breadcrumb_tokens(CRUMB_TEXT, placement)
    policy = Policy(
        budget=budget,
        breadcrumb_tokens=crumb,
        placement=placement,
        step=step,
        anchor_limit=int(0.25 * budget),
    )
    minimal = replace(policy, step=0)
    merged = 0 if placement == "merge" else 1  # the merged message is the first kept turn
    offset = 1 if fmt == "gemini" else 0  # the system item is not in Gemini's contents
    previous: Sent | None = None
    moves = 0
    last_total = 0
    for n in requests(items):
        sent = send(fmt, items[:n], policy)
        p, r = sent.plan, sent.plan.report
        last_total = r.tokens_before
        # newest kept; the kept part after the head is a suffix; pairs whole
        assert p.kept[-1].index == n - 1 - offset
        if r.trimmed:
            tail = [m.index for m in p.kept[sent.crumb :]]
            assert tail == list(range(sent.cut, n - offset))
        assert r.orphans_removed == 0
        # fits, unless only the newest turn is left after the head
        assert r.tokens_after <= budget or r.kept_units == 1
        # the anchor, while pinned, is all kept, right after the systems, untouched
        if r.anchor_tokens:
            reply = next(i for i, it in enumerate(items) if it.kind not in ("system", "user"))
            assert [m.index for m in p.kept[: reply - offset]] == list(range(reply - offset))
        # the grid never cuts less than the minimal cut
        low = send(fmt, items[:n], minimal)
        assert sent.cut >= low.cut
        if previous is not None:
            assert sent.cut >= previous.cut  # never moves back
            if sent.cut != previous.cut:
                moves += 1
                # the prefix before the first kept turn is byte-identical across the move
                if previous.crumb >= 0:
                    assert (
                        sent.history[: sent.crumb + merged]
                        == previous.history[: previous.crumb + merged]
                    )
            else:
                # same cut: the last request's forwarded history is a prefix of this one's
                assert sent.history[: len(previous.history)] == previous.history
        previous = sent
    assert moves <= last_total // step + 1


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_anchor_stays_and_its_own_turn_goes_first(fmt: str) -> None:
    items = [Item("system", "sys"), Item("user", "<env> cwd=/repo"), Item("user", "fix the bug")]
    items += [Item("call", '{"p": "a"}', "c1"), Item("result", "x" * 3000, "c1")]
    items += [Item("assistant", "done"), Item("user", "task 2"), Item("assistant", "ok")]
    items += [Item("user", "task 3")]
    sent = send(fmt, items, Policy(budget=600, breadcrumb_tokens=CRUMB, anchor_limit=150))
    r = sent.plan.report
    texts = [h.decode() for h in sent.history]
    assert r.trimmed and r.anchor_tokens > 0
    assert r.dropped_turns == 1  # the anchor's own replies and tool round, as one unit
    at = sent.crumb
    assert "cwd=/repo" in texts[at - 2] and "fix the bug" in texts[at - 1]
    assert CRUMB_TEXT in texts[at] and "task 2" in texts[at + 1] and "task 3" in texts[-1]
    # over its share of the budget the anchor is not pinned: the old rules apply
    plain = send(fmt, items, Policy(budget=600, breadcrumb_tokens=CRUMB, anchor_limit=5))
    assert plain.plan.report.anchor_tokens == 0
    assert not any("fix the bug" in h.decode() for h in plain.history)


def test_a_retry_keeps_the_anchor_and_drops_one_more_unit() -> None:
    from trimgate.trimming.policy import next_attempt

    items = [Item("system", "s"), Item("user", "anchor prompt")]
    for t in range(6):
        items += [Item("assistant", "r" * 200), Item("user", f"task {t} " + "q" * 200)]
    first = Policy(budget=100_000, breadcrumb_tokens=CRUMB, step=20_000, anchor_limit=25_000)
    sent = send("anthropic", items, first)
    assert not sent.plan.report.trimmed and sent.plan.report.kept_units == 7
    retry = next_attempt(first, sent.plan.report, None, None)
    again = send("anthropic", items, retry)
    assert again.plan.report.anchor_tokens > 0 and again.plan.report.kept_units <= 6
    assert "anchor prompt" in again.history[1].decode()
    assert CRUMB_TEXT in again.history[2].decode()


def test_grid_cut_stays_put_while_minimal_cut_moves() -> None:
    """Forty requests of a growing chat: minimal cuts move on every turn once trimmed, the
    grid cut once per step of growth (here about two and a half turns)."""
    base = [msg("s" + "x" * 100), msg("u anchor")]
    minimal_cuts: list[int] = []
    grid_cuts: list[int] = []
    history = list(base)
    for _ in range(40):
        history += [msg("a" + "y" * 400), msg("u" + "z" * 200)]
        messages = tuple(m.replace(index=i) for i, m in enumerate(history))
        c = Conversation(messages)
        for cuts, step in ((minimal_cuts, 0), (grid_cuts, 400)):
            p = plan(c, Policy(budget=2000, breadcrumb_tokens=CRUMB, step=step, anchor_limit=500))
            at = p.breadcrumb_at
            cuts.append(p.kept[at].index if at is not None else 0)
    assert len(set(minimal_cuts)) >= 2 * len(set(grid_cuts))
    assert grid_cuts == sorted(grid_cuts)


@settings(max_examples=300, deadline=None)
@given(
    conversations(),
    st.integers(1, 4000),
    st.booleans(),
    st.integers(0, 10**6),
    st.sampled_from([0, 200, 600]),
)
def test_a_compaction_head_is_never_dropped(
    c: Conversation, budget: int, supersede: bool, at: int, step: int
) -> None:
    """Anthropic-style heads (everything up to the compaction pinned) and Responses-style
    ones (only the compaction item pinned, what came before superseded)."""
    messages = list(c.messages)
    lead = leading_systems(messages)
    if len(messages) <= lead:
        return
    # the compaction's position: a message without tool traffic, as compactions are
    places = [
        i
        for i in range(lead, len(messages))
        if not (messages[i].calls or messages[i].carries_results)
    ]
    if not places:
        return
    h = places[at % len(places)]
    for i in range(lead, h + 1):
        if i == h or not supersede:
            messages[i] = messages[i].replace(pinned=True, exempt=True)  # as codecs do
    conv = Conversation(tuple(messages), c.overhead, compacted=True)
    p = plan(conv, Policy(budget=budget, breadcrumb_tokens=CRUMB, step=step, anchor_limit=900))
    kept = [m.index for m in p.kept]
    pinned = [m.index for m in messages if m.pinned]
    assert p.report.anchor_tokens == 0  # the head replaces the anchor
    assert [i for i in kept if i in pinned] == pinned  # never dropped, by the sweep neither
    if p.report.trimmed:
        assert kept[lead : lead + len(pinned)] == pinned  # right after the systems, in order
        # the newest is kept (unless it answered a call the compaction superseded)
        assert kept[-1] == messages[-1].index or p.report.orphans_removed
        rest = kept[lead + len(pinned) :]
        assert rest == list(range(rest[0], len(messages))) if rest else True
        assert not any(lead <= i < h and i not in pinned for i in kept)  # superseded: gone
        assert p.breadcrumb_at in (lead + len(pinned), None)
