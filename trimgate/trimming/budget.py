"""Budgets: the effective budget of a request and the target of a reactive retry.

Every figure here is in provider tokens (calibrated estimates), the space the
budget is stated in. A budget of 0 disables token trimming.
"""

from __future__ import annotations

RETRY_MARGIN = 0.97  # aim a little below the provider's stated maximum
FALLBACK_SHRINK_NUM, FALLBACK_SHRINK_DEN = 2, 3


def effective_budget(
    max_context_tokens: int,
    *,
    pruning_enabled: bool = False,
    pruning_max_tokens: int = 0,
    request_budget: int | None = None,
    reserve_output: bool = False,
    output_limit: int | None = None,
    max_input: int | None = None,
) -> int:
    """The budget of a request (docs/trimming.md, "Budget").

    ``request_budget`` (the ``x-trimgate-budget`` header) may only lower it, and so
    does a model's ``max_input`` (an input cap below its window). The
    output reservation never turns trimming off: a request that reserves more
    than its window keeps only its newest turn (budget 1) rather than budget 0.
    """
    budget = max(0, max_context_tokens)
    if pruning_enabled and pruning_max_tokens > 0:
        budget = min(budget, pruning_max_tokens) if budget else pruning_max_tokens
    if request_budget is not None and request_budget > 0:
        budget = min(budget, request_budget) if budget else request_budget
    if budget and reserve_output and output_limit and output_limit > 0:
        budget = max(1, budget - output_limit)
    if budget and max_input:  # the model's own cap on input, below its window
        budget = min(budget, max_input)
    return budget


def reactive_budget(estimate: int, real: int | None = None, maximum: int | None = None) -> int:
    """The target of the next attempt after an overflow, in provider tokens.

    ``estimate`` is trimgate's estimate of the body that overflowed. When the
    error states the real and the maximum counts, the estimate is scaled by
    ``maximum / real`` (so a wrong estimate does not matter), with a small
    margin; otherwise the target is 2/3 of the estimate.
    """
    if real and maximum and real > maximum > 0:
        return max(1, int(estimate * maximum / real * RETRY_MARGIN))
    return max(1, estimate * FALLBACK_SHRINK_NUM // FALLBACK_SHRINK_DEN)
