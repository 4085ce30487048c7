from __future__ import annotations

from tests.builders import conv, msg, tool
from trimgate.history import Role
from trimgate.trimming.estimate import text_tokens
from trimgate.trimming.pipeline import Policy, plan

CRUMB = text_tokens("[earlier turns omitted to fit the context window]")


def idx(ms: tuple[object, ...]) -> list[int]:
    return [m.index for m in ms]  # type: ignore[attr-defined]


def test_untouched_plan_changes_nothing() -> None:
    c = conv("sys", tool("u1", "c", "r"), "u2", "a2")
    p = plan(c, Policy(budget=100_000, breadcrumb_tokens=CRUMB))
    assert not p.changed and p.kept == c.messages and p.breadcrumb_at is None
    r = p.report
    assert not r.trimmed and r.tokens_before == r.tokens_after == c.tokens
    assert r.kept_turns == 2 and r.budget == 100_000


def test_trim_places_breadcrumb_after_leading_systems() -> None:
    c = conv("s1", "s2", "u1" + "x" * 400, "a1", "u2", "a2")
    p = plan(c, Policy(budget=60, breadcrumb_tokens=CRUMB))
    assert p.changed and p.report.trimmed
    assert idx(p.kept) == [0, 1, 4, 5] and p.breadcrumb_at == 2
    assert p.report.tokens_after == sum(m.tokens for m in p.kept) + CRUMB
    assert p.report.dropped_turns == 1 and p.report.dropped_messages == 2


def test_merge_placement_targets_first_kept_user() -> None:
    c = conv("s1", "u1" + "x" * 400, "a1", "u2", "a2")
    p = plan(c, Policy(budget=60, breadcrumb_tokens=CRUMB, placement="merge"))
    assert p.breadcrumb_at == 1 and p.kept[1].turn_start and p.placement == "merge"


def test_none_placement_has_no_breadcrumb_and_no_cost() -> None:
    c = conv("s1", "u1" + "x" * 400, "a1", "u2", "a2")
    p = plan(c, Policy(budget=60, breadcrumb_tokens=CRUMB, placement="none"))
    assert p.report.trimmed and p.breadcrumb_at is None
    assert p.report.tokens_after == sum(m.tokens for m in p.kept)


def test_hoist_moves_late_systems_to_front() -> None:
    c = conv("s1", "u1", "s late", "a1", "u2")
    p = plan(c, Policy(budget=0, hoist=True))
    assert idx(p.kept) == [0, 2, 1, 3, 4] and p.changed and p.report.hoisted == 1


def test_tool_result_capping_runs_before_the_trim() -> None:
    # Two turns whose only size is a huge tool result: capping makes both fit.
    c = conv(tool("u1", "c", "r" * 8000), tool("u2", "c", "r" * 8000))
    p = plan(c, Policy(budget=400, breadcrumb_tokens=CRUMB, max_tool_result_chars=300))
    assert not p.report.trimmed and p.report.tool_results_capped == 2
    assert p.report.tokens_after < 400 < p.report.tokens_before
    assert len(p.capped) == 2 and p.changed
    (texts,) = list(p.capped.values())[:1]
    assert texts[0] is not None and "characters truncated" in texts[0]


def test_message_cap_after_trim_counts_breadcrumb() -> None:
    c = conv("sys", "u1" + "x" * 400, "a1", "u2", "a2", "u3", "a3", "u4", "a4")
    p = plan(c, Policy(budget=80, breadcrumb_tokens=CRUMB, max_messages=4))
    assert p.report.trimmed
    non_system = [m for m in p.kept if m.role is not Role.SYSTEM]
    assert len(non_system) + (1 if p.breadcrumb_at is not None else 0) <= 4
    assert p.report.capped_messages > 0


def test_cap_without_trim_has_no_breadcrumb() -> None:
    c = conv("sys", "u1", "a1", "u2", "a2", "u3", "a3")
    p = plan(c, Policy(budget=0, max_messages=3))
    assert not p.report.trimmed and p.breadcrumb_at is None
    assert idx(p.kept) == [0, 1, 5, 6] and p.report.capped_messages == 3


def test_orphan_sweep_reports_and_strips() -> None:
    dangling = msg("acall", Role.ASSISTANT, calls=("a", "b"), other_content=False)
    res = msg("tres", Role.TOOL, results=("a",), anonymous_results=False, other_content=False)
    c = conv("u1", [dangling, res], "u2")
    p = plan(c, Policy(budget=0))
    assert p.report.orphans_removed == 1 and p.strip == {1: frozenset({"b"})} and p.changed


def test_sweep_can_be_disabled() -> None:
    res = msg("tres", Role.TOOL, results=("zz",), anonymous_results=False, other_content=False)
    c = conv("u1", [res], "u2")
    assert not plan(c, Policy(budget=0, orphan_sweep=False)).changed


def test_calibrated_report_is_in_provider_tokens() -> None:
    c = conv("u1" + "x" * 400, "a1", "u2", "a2")
    p = plan(c, Policy(budget=10_000, ratio=1.25))
    assert p.report.tokens_before == -(-c.tokens * 5 // 4)


def test_breadcrumb_goes_after_pinned_server_state_results() -> None:
    stored = msg("t stored output", Role.TOOL, results=("call_srv",), exempt=True)
    c = conv("sys", [stored], "u1" + "x" * 400, "a1", "u2", "a2")
    p = plan(c, Policy(budget=60, breadcrumb_tokens=CRUMB))
    assert idx(p.kept) == [0, 1, 4, 5] and p.breadcrumb_at == 2


def test_dropped_messages_counts_trim_and_cap_not_the_orphan_sweep() -> None:
    # a call whose result never came, and a result whose call was never made
    orphan_call = msg("a call", Role.ASSISTANT, calls=("lost",), other_content=False)
    orphan_result = msg(
        "t result", Role.TOOL, results=("never",), anonymous_results=False, other_content=False
    )
    c = conv("s", "u1", [orphan_call], "u2", [orphan_result], "a2", "u3")
    swept = plan(c, Policy(budget=100_000, breadcrumb_tokens=CRUMB))
    r = swept.report
    assert swept.changed and not r.trimmed and r.orphans_removed == 2
    assert r.dropped_messages == 0 and r.dropped_turns == 0
    capped = plan(c, Policy(budget=100_000, breadcrumb_tokens=CRUMB, max_messages=3))
    assert capped.report.capped_messages > 0
    assert capped.report.dropped_messages == capped.report.capped_messages
