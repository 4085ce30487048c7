"""The rules around a plan: policy, breadcrumb cost, the retry ladder, calibration."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from trimgate.config import TrimmingConfig
from trimgate.trimming.budget import reactive_budget
from trimgate.trimming.estimate import Calibration, text_tokens
from trimgate.trimming.pipeline import Policy, TrimReport
from trimgate.trimming.policy import (
    MAX_CALIBRATED_MODELS,
    MIN_LEARNED_WINDOW,
    Settings,
    breadcrumb_tokens,
    learned,
    learned_window,
    make_policy,
    may_retry,
    next_attempt,
    planning_ratio,
)

CRUMB = "[earlier turns omitted]"


def report(kept: int = 5, before: int = 10_000, after: int = 8_000) -> TrimReport:
    return TrimReport(
        trimmed=after < before,
        dropped_turns=1,
        dropped_messages=2,
        kept_turns=kept,
        tokens_before=before,
        tokens_after=after,
        budget=9_000,
        kept_units=kept,
    )


def test_settings_carry_the_configs_keys_as_plain_values() -> None:
    tc = TrimmingConfig.model_validate(
        {
            "breadcrumb": {"text": CRUMB, "placement": "merge"},
            "system_messages": "hoist",
            "history_pruning": {"enabled": True, "max_tokens": 500},
            "reactive": {"enabled": False, "max_retries": 2},
        }
    )
    s = tc.settings()
    assert (s.breadcrumb, s.placement, s.hoist) == (CRUMB, "merge", True)
    assert (s.pruning_enabled, s.pruning_max_tokens) == (True, 500)
    assert (s.reactive, s.max_retries) == (False, 2)
    assert s.breadcrumb_tokens == breadcrumb_tokens(CRUMB, "merge")
    assert (s.cut_step, s.keep_anchor, s.anchor_max_share) == (0.2, True, 0.25)
    other = TrimmingConfig.model_validate(
        {"cut_step": 0, "keep_anchor": False, "anchor_max_share": 0.5}
    ).settings()
    assert (other.cut_step, other.keep_anchor, other.anchor_max_share) == (0.0, False, 0.5)


def test_the_breadcrumb_costs_what_its_placement_adds() -> None:
    assert breadcrumb_tokens(CRUMB, "message") == text_tokens(CRUMB)
    assert breadcrumb_tokens(CRUMB, "merge") == (len(CRUMB) + 2 + 3) // 4
    assert breadcrumb_tokens(CRUMB, "none") == 0


def test_make_policy_reserves_the_output_and_hoists_only_where_it_applies() -> None:
    s = Settings(max_context_tokens=0, hoist=True, breadcrumb_tokens=9, max_messages=7)
    p = make_policy(s, 10_000, output_limit=1_000, hoistable=False, request_budget=5_000)
    assert p == Policy(
        budget=4_000,
        breadcrumb_tokens=9,
        max_messages=7,
        hoist=False,
        step=800,  # cut_step 0.2 of the budget
        anchor_limit=1_000,  # anchor_max_share 0.25 of the budget
        reserve=1_000,  # a retry takes it out of a window an overflow states
    )
    assert make_policy(s, 10_000, hoistable=True, budget=123, ratio=1.5) == replace(
        p, budget=123, hoist=True, ratio=1.5, step=24, anchor_limit=30, reserve=0
    )
    off = replace(s, cut_step=0.0, keep_anchor=False)
    assert make_policy(off, 10_000) == Policy(
        budget=10_000, breadcrumb_tokens=9, max_messages=7, hoist=False
    )


def test_a_retry_needs_reactive_retries_enforcement_and_more_than_one_turn() -> None:
    s = Settings(max_context_tokens=0)
    assert may_retry(s, report(kept=2), shadow=False)
    assert not may_retry(s, report(kept=1), shadow=False)
    assert not may_retry(s, report(kept=2), shadow=True)
    assert not may_retry(replace(s, reactive=False), report(kept=2), shadow=False)
    assert not may_retry(replace(s, max_retries=0), report(kept=2), shadow=False)


@given(
    st.integers(2, 500),
    st.integers(1, 10**6),
    st.none() | st.integers(1, 10**6),
    st.none() | st.integers(1, 10**6),
)
def test_each_attempt_keeps_fewer_turns_within_the_reactive_budget(
    kept: int, after: int, real: int | None, maximum: int | None
) -> None:
    first = Policy(
        budget=10**6,
        breadcrumb_tokens=8,
        placement="merge",
        hoist=True,
        ratio=1.2,
        step=2 * 10**5,
        anchor_limit=25 * 10**4,
    )
    sent = report(kept=kept, after=after)
    nxt = next_attempt(first, sent, real, maximum)
    assert nxt.max_turns == kept - 1
    assert nxt.budget == reactive_budget(after, real, maximum)
    assert nxt.step == 0  # a retry cuts minimally
    assert nxt.anchor_limit == first.anchor_limit  # and keeps the anchor pinned
    assert replace(nxt, budget=first.budget, max_turns=None, step=first.step) == first


@given(
    st.integers(2, 500),
    st.integers(1, 10**6),
    st.none() | st.integers(1, 10**6),
    st.none() | st.integers(1, 10**6),
    st.integers(1, 10),
)
def test_later_attempts_aim_at_most_at_two_thirds_of_the_previous_estimate(
    kept: int, after: int, real: int | None, maximum: int | None, retry: int
) -> None:
    first = Policy(budget=10**6, breadcrumb_tokens=8)
    nxt = next_attempt(first, report(kept=kept, after=after), real, maximum, retry=retry)
    assert nxt.max_turns == kept - 1
    assert nxt.budget == min(reactive_budget(after, real, maximum), max(1, after * 2 // 3))


def test_a_fixed_understated_count_still_shrinks_the_prompt_geometrically() -> None:
    # a provider that always says 4100 > 4096, whatever it was sent
    first = Policy(budget=10**6, breadcrumb_tokens=8)
    estimate, targets = 90_000, []
    for retry in range(3):
        nxt = next_attempt(first, report(kept=50, after=estimate), 4100, 4096, retry=retry)
        targets.append(nxt.budget)
        estimate = nxt.budget
    assert targets[0] == reactive_budget(90_000, 4100, 4096)  # the stated deficit first
    assert targets[2] < 90_000 * 0.45  # then 2/3 of each previous attempt


def test_a_window_the_output_must_fit_too_leaves_the_requests_output_limit_out() -> None:
    # Anthropic's "prompt is too long: 210000 tokens > 200000 maximum" to a request that
    # reserves 32,000 tokens: the prompt must fit 168,000, not 200,000
    first = make_policy(Settings(), 200_000, output_limit=32_000)
    assert first.reserve == 32_000 and first.budget == 168_000
    sent = report(kept=40, after=190_000)
    nxt = next_attempt(first, sent, 210_000, 200_000, whole=True)
    assert nxt.budget == reactive_budget(190_000, 210_000, 168_000)
    assert nxt.reserve == 32_000  # and so does every later attempt
    # any other maximum (net of a reservation, an input cap, beside a total) is taken as is
    assert next_attempt(first, sent, 210_000, 200_000).budget == reactive_budget(
        190_000, 210_000, 200_000
    )
    # a prompt under the window that the reservation pushes over: aimed, not 2/3
    assert next_attempt(first, sent, 190_000, 200_000, whole=True).budget == reactive_budget(
        190_000, 190_000, 168_000
    )


def test_no_reservation_is_taken_out_when_off_or_as_large_as_the_window() -> None:
    sent = report(kept=40, after=190_000)
    off = make_policy(Settings(reserve_output=False), 200_000, output_limit=32_000)
    assert off.reserve == 0
    assert next_attempt(off, sent, 210_000, 200_000, whole=True).budget == reactive_budget(
        190_000, 210_000, 200_000
    )
    huge = make_policy(Settings(), 200_000, output_limit=250_000)
    assert next_attempt(huge, sent, 210_000, 200_000, whole=True).budget == reactive_budget(
        190_000, 210_000, 200_000
    )


def test_calibration_learns_from_the_body_sent_in_raw_estimate_tokens() -> None:
    s = Settings(max_context_tokens=0)
    sent = report(before=20_000, after=10_000)
    got = learned({}, "m", s, 15_000, sent, shadow=False, ratio=2.0)
    assert got == Calibration(3.0, 0.06, 1)  # 15,000 over 10,000 / 2.0, at most 3.0
    shadowed = learned({}, "m", s, 10_000, sent, shadow=True, ratio=1.0)
    assert shadowed is not None and shadowed.ratio == 0.5  # the whole body went
    assert learned({}, "m", s, None, sent, shadow=False, ratio=1.0) is None
    assert learned({}, "m", replace(s, calibrate=False), 9, sent, shadow=False, ratio=1.0) is None


def test_calibration_keeps_a_bounded_set_of_models() -> None:
    s = Settings(max_context_tokens=0)
    full = {f"m{i}": Calibration(1.5, 0.0, 1) for i in range(MAX_CALIBRATED_MODELS)}
    sent = report()
    assert learned(full, "new", s, 9_000, sent, shadow=False, ratio=1.0) is None
    assert learned(full, "m1", s, 9_000, sent, shadow=False, ratio=1.0) is not None
    assert planning_ratio(full, "m1", s) == 1.5
    assert planning_ratio(full, "new", s) == 1.0
    assert planning_ratio(full, "m1", replace(s, calibrate=False)) == 1.0


def test_an_overflow_teaches_the_maximum_it_states() -> None:
    assert learned_window(32_768) == 32_768
    assert learned_window(None) is None  # nothing stated: nothing learned
    assert learned_window(MIN_LEARNED_WINDOW - 1) is None  # no window is that small
    assert learned_window(MIN_LEARNED_WINDOW) == MIN_LEARNED_WINDOW


def test_the_fallback_window_is_unset_by_default() -> None:
    assert TrimmingConfig().max_context_tokens is None
    assert TrimmingConfig().settings().max_context_tokens is None
    assert TrimmingConfig(max_context_tokens=0).settings().max_context_tokens == 0
