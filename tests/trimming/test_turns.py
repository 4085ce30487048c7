"""Whole-turn trimming rules (docs/trimming.md, "Whole-turn trimming"), including the
scenarios listed under "What the tests pin down" there."""

from __future__ import annotations

from tests.builders import conv, msg, tool
from trimgate.history import Message, Role
from trimgate.trimming.estimate import text_tokens
from trimgate.trimming.turns import trim_to_recent_turns

BREADCRUMB = "[earlier turns omitted to fit the context window]"
CRUMB = text_tokens(BREADCRUMB)


def big_reference_history() -> list[Message]:
    return [
        msg("system"),
        msg("turn1 " + "x" * 2000, Role.USER),
        msg("a1"),
        msg("turn2 " + "x" * 2000, Role.USER),
        msg("a2"),
        msg("turn3 short", Role.USER),
        msg("a3"),
    ]


def test_breadcrumb_costs_17_tokens() -> None:
    assert CRUMB == 17


def test_under_budget_is_untouched() -> None:
    c = conv("sys", "u1", "a1", "u2", "a2")
    r = trim_to_recent_turns(c.messages, 1_000_000)
    assert not r.trimmed
    assert r.kept == c.messages
    assert r.tokens_before == r.tokens_after == c.tokens
    assert r.kept_turns == 2 and r.dropped_turns == 0 and r.dropped_messages == 0


def test_zero_budget_is_untouched() -> None:
    c = conv("sys", "u" + "x" * 4000, "a1", "u2")
    r = trim_to_recent_turns(c.messages, 0)
    assert not r.trimmed and r.kept == c.messages


def test_drops_oldest_whole_turns_keeps_system_reference_example() -> None:
    c = conv(big_reference_history())
    assert c.tokens == 1040
    r = trim_to_recent_turns(c.messages, 200)
    assert r.trimmed
    assert [m.index for m in r.kept] == [0, 5, 6]
    assert (r.dropped_messages, r.dropped_turns, r.kept_turns) == (4, 2, 1)
    assert r.tokens_before == 1040 and r.tokens_after == 18


def test_breadcrumb_counts_inside_the_budget() -> None:
    c = conv(big_reference_history())
    r = trim_to_recent_turns(c.messages, 200, breadcrumb_tokens=CRUMB)
    assert r.tokens_after == 18 + CRUMB
    # A budget that fits the kept turn but not turn + breadcrumb drops nothing more:
    # the newest turn is kept anyway, and the count stays honest.
    tight = trim_to_recent_turns(c.messages, 20, breadcrumb_tokens=CRUMB)
    assert tight.tokens_after == 35 and tight.tokens_after > 20


def test_overhead_counts_once_in_before_and_after() -> None:
    c = conv("u1" + "x" * 400, "a1", "u2", "a2", overhead=50)
    r = trim_to_recent_turns(c.messages, 80, overhead=c.overhead)
    assert r.tokens_before == c.tokens
    assert r.trimmed and r.tokens_after == 50 + sum(m.tokens for m in r.kept)


def test_keeps_last_turn_even_if_over_budget() -> None:
    c = conv("sys", "u1", "a1", "u2" + "x" * 10_000, "a2")
    r = trim_to_recent_turns(c.messages, 50)
    assert r.trimmed and r.kept_turns == 1
    assert [m.index for m in r.kept] == [0, 3, 4]
    assert r.tokens_after > 50


def test_single_turn_is_never_trimmed_even_over_budget() -> None:
    c = conv("sys", "a stray", "u1" + "x" * 10_000, "a1")
    r = trim_to_recent_turns(c.messages, 10)
    assert not r.trimmed and r.kept == c.messages and r.kept_turns == 1


def test_stray_messages_before_first_user_leave_with_first_dropped_turn() -> None:
    c = conv("sys", "a stray", "t orphan", "u1" + "x" * 400, "a1", "u2", "a2")
    r = trim_to_recent_turns(c.messages, 30)
    assert [m.index for m in r.kept] == [0, 5, 6]
    assert r.dropped_turns == 1
    assert r.dropped_messages == 4  # two strays and the first turn's two messages


def test_never_splits_tool_pair() -> None:
    c = conv("sys", tool("u1" + "x" * 300, "call", "r" * 300), tool("u2", "call", "result"))
    r = trim_to_recent_turns(c.messages, 60)
    assert r.trimmed
    kept_ids = {i for m in r.kept for i in m.calls}
    answered = {i for m in r.kept for i in m.results}
    assert kept_ids == answered
    assert r.kept[1].turn_start


def test_late_system_messages_go_with_their_turn() -> None:
    c = conv("s lead", "u1" + "x" * 400, "s late", "a1", "u2", "a2")
    r = trim_to_recent_turns(c.messages, 40)
    assert [m.index for m in r.kept] == [0, 4, 5]


def test_two_leading_systems_are_kept() -> None:
    c = conv("s one", "s two", "u1" + "x" * 400, "a1", "u2", "a2")
    r = trim_to_recent_turns(c.messages, 40)
    assert [m.index for m in r.kept] == [0, 1, 4, 5] and r.leading == 2


def test_incoming_breadcrumb_is_not_a_turn() -> None:
    crumb = msg(BREADCRUMB, Role.USER, turn_start=False, breadcrumb=True)
    c = conv("sys", [crumb], "u2" + "x" * 400, "a2")
    r = trim_to_recent_turns(c.messages, 20, breadcrumb_tokens=CRUMB)
    # one real turn: nothing to drop, no spurious trim
    assert not r.trimmed and r.kept_turns == 1


def test_drops_minimum_number_of_turns() -> None:
    c = conv("u1" + "x" * 100, "a1", "u2" + "x" * 100, "a2", "u3", "a3")
    whole = trim_to_recent_turns(c.messages, 10_000)
    assert not whole.trimmed
    budget = c.messages[2].tokens + c.messages[3].tokens + 20
    r = trim_to_recent_turns(c.messages, budget)
    assert r.dropped_turns == 1 and r.kept_turns == 2


def test_max_turns_forces_one_more_turn_out() -> None:
    c = conv("u1", "a1", "u2", "a2", "u3", "a3")
    r = trim_to_recent_turns(c.messages, 10_000, max_turns=2)
    assert r.trimmed and r.kept_turns == 2 and r.dropped_turns == 1
    one = trim_to_recent_turns(c.messages, 10_000, max_turns=0)
    assert one.kept_turns == 1


def test_ratio_scales_the_comparison() -> None:
    c = conv("u1" + "x" * 400, "a1", "u2", "a2")
    assert not trim_to_recent_turns(c.messages, c.tokens).trimmed
    r = trim_to_recent_turns(c.messages, c.tokens, ratio=1.5)
    assert r.trimmed and r.tokens_before == -(-c.tokens * 3 // 2)


def test_empty_history_is_untouched() -> None:
    r = trim_to_recent_turns((), 10)
    assert not r.trimmed and r.kept == () and r.kept_turns == 0


def test_exempt_strays_are_pinned() -> None:
    # Responses with previous_response_id: outputs answering stored calls come first
    stored = msg("t stored output", Role.TOOL, results=("call_srv",), exempt=True)
    c = conv("sys", [stored], "u1" + "x" * 400, "a1", "u2", "a2")
    r = trim_to_recent_turns(c.messages, 40)
    assert r.trimmed and [m.index for m in r.kept] == [0, 1, 4, 5]
    assert r.dropped_messages == 2 and r.dropped_turns == 1
    assert r.tokens_after == sum(m.tokens for m in r.kept)
