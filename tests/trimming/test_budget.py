from __future__ import annotations

from trimgate.trimming.budget import effective_budget, reactive_budget


def test_window_alone() -> None:
    assert effective_budget(128_000) == 128_000


def test_history_pruning_lowers_only_when_enabled_and_positive() -> None:
    assert effective_budget(128_000, pruning_enabled=True, pruning_max_tokens=8192) == 8192
    assert effective_budget(128_000, pruning_enabled=False, pruning_max_tokens=8192) == 128_000
    assert effective_budget(128_000, pruning_enabled=True, pruning_max_tokens=0) == 128_000
    assert effective_budget(4096, pruning_enabled=True, pruning_max_tokens=8192) == 4096


def test_request_budget_only_lowers() -> None:
    assert effective_budget(128_000, request_budget=1000) == 1000
    assert effective_budget(1000, request_budget=128_000) == 1000
    assert effective_budget(1000, request_budget=0) == 1000


def test_output_reservation() -> None:
    assert effective_budget(128_000, reserve_output=True, output_limit=4000) == 124_000
    assert effective_budget(128_000, reserve_output=False, output_limit=4000) == 128_000
    assert effective_budget(128_000, reserve_output=True, output_limit=None) == 128_000


def test_reservation_never_disables_trimming() -> None:
    assert effective_budget(1000, reserve_output=True, output_limit=5000) == 1


def test_zero_window_disables() -> None:
    assert effective_budget(0, reserve_output=True, output_limit=100) == 0


def test_reactive_exact_deficit() -> None:
    # estimate 100k, provider says 130k real vs 128k max: aim at 100k * 128/130, less margin
    target = reactive_budget(100_000, real=130_000, maximum=128_000)
    assert 0.95 * 100_000 * 128 / 130 <= target < 100_000 * 128 / 130


def test_reactive_without_counts_shrinks_to_two_thirds() -> None:
    assert reactive_budget(90_000) == 60_000
    assert reactive_budget(90_000, real=None, maximum=128_000) == 60_000
    # counts that do not state an excess are not trusted
    assert reactive_budget(90_000, real=1000, maximum=128_000) == 60_000


def test_reactive_is_never_zero() -> None:
    assert reactive_budget(1) == 1


def test_input_cap_below_the_window() -> None:
    # GPT-5: 400k window, 272k input cap
    assert effective_budget(400_000, max_input=272_000) == 272_000
    assert (
        effective_budget(400_000, reserve_output=True, output_limit=128_000, max_input=272_000)
        == 272_000
    )
    assert (
        effective_budget(400_000, reserve_output=True, output_limit=200_000, max_input=272_000)
        == 200_000
    )
