"""Property tests of the core's invariants over generated conversations."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders import conv, msg
from trimgate.history import Conversation, Message, Role
from trimgate.trimming.estimate import text_tokens
from trimgate.trimming.orphans import sweep_orphans
from trimgate.trimming.pipeline import Policy, TrimPlan, plan
from trimgate.trimming.turns import leading_systems

CRUMB = text_tokens("[earlier turns omitted to fit the context window]")
ids = itertools.count()


@st.composite
def conversations(draw: st.DrawFn) -> Conversation:
    out: list[Message] = []
    for _ in range(draw(st.integers(0, 2))):
        out.append(msg("s" + "x" * draw(st.integers(0, 200))))
    for _ in range(draw(st.integers(0, 2))):  # strays before the first user message
        out.append(msg(draw(st.sampled_from(["a stray", "t stray tool"]))))
    for _ in range(draw(st.integers(1, 8))):
        out.append(msg("u" + "x" * draw(st.integers(0, 800))))
        for _ in range(draw(st.integers(0, 3))):
            kind = draw(st.sampled_from(["text", "calls", "late-system"]))
            if kind == "text":
                out.append(msg("a" + "x" * draw(st.integers(0, 300))))
            elif kind == "late-system":
                out.append(msg("s late"))
            else:
                n = draw(st.integers(1, 3))
                cids = tuple(f"c{next(ids)}" for _ in range(n))
                out.append(msg("acall", Role.ASSISTANT, calls=cids, other_content=False))
                for cid in cids:
                    size = draw(st.integers(0, 1500))
                    text = "r" * size
                    out.append(
                        msg(
                            "t" + text,
                            Role.TOOL,
                            results=(cid,),
                            anonymous_results=False,
                            other_content=False,
                            tool_texts=(text,),
                        )
                    )
    overhead = draw(st.integers(0, 100))
    return conv(out, overhead=overhead)


def turns_of(messages: tuple[Message, ...]) -> list[int]:
    return [m.index for m in messages if m.turn_start]


def replay(c: Conversation, p: TrimPlan) -> Conversation:
    """The forwarded conversation as the codec would decode it again."""
    out: list[Message] = []
    for pos, m in enumerate(p.kept):
        if pos == p.breadcrumb_at:
            out.append(
                msg(
                    "[earlier turns omitted to fit the context window]",
                    Role.USER,
                    turn_start=False,
                    breadcrumb=True,
                )
            )
        out.append(m)
    return conv(out, overhead=c.overhead)


budgets = st.one_of(st.just(0), st.integers(1, 4000))


@settings(max_examples=300, deadline=None)
@given(conversations(), budgets)
def test_whole_turn_invariants(c: Conversation, budget: int) -> None:
    p = plan(c, Policy(budget=budget, breadcrumb_tokens=CRUMB))
    r = p.report
    before_turns = turns_of(c.messages)
    kept_turns = turns_of(p.kept)
    # kept turns are a suffix of the original turns, in order
    assert kept_turns == before_turns[len(before_turns) - len(kept_turns) :]
    # the newest turn is kept
    assert kept_turns[-1] == before_turns[-1]
    # leading systems kept
    lead = leading_systems(c.messages)
    assert p.kept[:lead] == c.messages[:lead]
    # fits unless one turn is left
    if budget and r.kept_turns > 1:
        assert r.tokens_after <= budget
    # minimal: the newest dropped turn would not fit
    if r.trimmed and budget:
        assert budget_needed_for(c, r.kept_turns + 1) > budget
    # counts are coherent
    assert r.kept_turns == len(kept_turns)
    assert r.dropped_turns == len(before_turns) - len(kept_turns)
    # (orphan-sweep removals are counted in orphans_removed only)
    assert r.dropped_messages <= len(c.messages) - len(p.kept)
    if not r.orphans_removed:
        assert r.dropped_messages == len(c.messages) - len(p.kept)
    # the orphan sweep removes nothing from a trimmed, swept history
    assert sweep_orphans(p.kept).removed == 0
    # planning the output again with the same budget drops nothing
    again = plan(replay(c, p), Policy(budget=budget, breadcrumb_tokens=CRUMB))
    assert not again.report.trimmed and not again.changed


def budget_needed_for(c: Conversation, turns: int) -> int:
    """Tokens of leading systems + the newest ``turns`` turns + breadcrumb + overhead."""
    lead = leading_systems(c.messages)
    starts = [i for i, m in enumerate(c.messages) if i >= lead and m.turn_start]
    if turns == len(starts):  # all turns back: the strays before them come back too
        return c.tokens
    kept = c.messages[:lead] + c.messages[starts[len(starts) - turns] :]
    return c.overhead + CRUMB + sum(m.tokens for m in kept)


@settings(max_examples=200, deadline=None)
@given(conversations(), budgets, st.integers(1, 12))
def test_message_cap_invariants(c: Conversation, budget: int, limit: int) -> None:
    p = plan(c, Policy(budget=budget, breadcrumb_tokens=CRUMB, max_messages=limit))
    non_system = [m for m in p.kept if m.role is not Role.SYSTEM]
    assert non_system, "the cap never empties the conversation"
    crumb = 1 if p.breadcrumb_at is not None else 0
    assert len(non_system) + crumb <= max(limit, 1 + crumb)
    assert sweep_orphans(p.kept).removed == 0
    lead = leading_systems(c.messages)
    assert p.kept[:lead] == c.messages[:lead]


@settings(max_examples=150, deadline=None)
@given(conversations(), budgets, st.integers(50, 2000))
def test_capping_then_trimming_invariants(c: Conversation, budget: int, chars: int) -> None:
    p = plan(c, Policy(budget=budget, breadcrumb_tokens=CRUMB, max_tool_result_chars=chars))
    for texts in p.capped.values():
        for t in texts:
            assert t is None or "characters truncated" in t
    assert turns_of(p.kept)[-1] == turns_of(c.messages)[-1]
    if budget and p.report.kept_turns > 1:
        assert p.report.tokens_after <= budget
