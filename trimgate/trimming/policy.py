"""The rules around a plan: which policy a request gets, what the breadcrumb costs, what
the next attempt after an overflow may keep, and what calibration learns.

Rules of this module:
- Plain values in, plain values out. The config's pydantic models stay in the shell:
  ``Settings`` carries the trimming keys of one model as plain fields
  (``config.TrimmingConfig.settings()`` builds it once per model).
- A retry after an overflow always keeps fewer turns than the attempt before it, and
  aims at the reactive budget (``budget.reactive_budget``), so the ladder ends.
- Calibration learns from the body really sent, in raw estimate tokens, and keeps at most
  ``MAX_CALIBRATED_MODELS`` models: the label set is bounded, whatever clients send.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from trimgate.trimming.budget import effective_budget, reactive_budget
from trimgate.trimming.estimate import Calibration, bytes_tokens, observe, text_tokens, utf8_len
from trimgate.trimming.pipeline import Placement, Policy, TrimReport

MAX_CALIBRATED_MODELS = 1024


@dataclass(frozen=True, slots=True)
class Settings:
    """One model's trimming keys as plain values."""

    max_context_tokens: int | None = None  # the fallback window; None: not configured
    pruning_enabled: bool = False
    pruning_max_tokens: int = 0
    reserve_output: bool = True
    max_messages: int = 0
    max_tool_result_chars: int = 0
    orphan_sweep: bool = True
    hoist: bool = False  # system_messages: hoist
    breadcrumb: str = ""
    placement: Placement = "message"
    breadcrumb_tokens: int = 0  # breadcrumb_tokens(breadcrumb, placement), computed once
    media_tokens: int = 1600
    calibrate: bool = True
    reactive: bool = True  # reactive.enabled
    max_retries: int = 3  # reactive.max_retries
    probe: bool = True  # reactive.probe: resend once on an error that only suspects an overflow
    log_wordings: bool = False  # reactive.log_wordings: a probed wording in its log line
    cut_step: float = 0.2  # cache-stable cuts: grid step as a fraction of the budget
    keep_anchor: bool = True
    anchor_max_share: float = 0.25  # the largest anchor pinned, as a share of the budget


def breadcrumb_tokens(text: str, placement: str) -> int:
    """The breadcrumb's cost: its own message, merged text plus a blank line, or none."""
    if placement == "message":
        return text_tokens(text)
    if placement == "merge":
        return bytes_tokens(utf8_len(text) + 2)
    return 0


def make_policy(
    settings: Settings,
    window: int,
    *,
    output_limit: int | None = None,
    hoistable: bool = False,
    request_budget: int | None = None,
    budget: int | None = None,
    ratio: float = 1.0,
    max_input: int | None = None,
) -> Policy:
    """The trimming policy of one request (``budget`` overrides the computed one).

    ``window`` is the model's context window (or the configured maximum); ``output_limit``
    and ``hoistable`` come from the decoded body, ``request_budget`` from the client's
    ``x-trimgate-budget``, ``ratio`` from calibration, ``max_input`` from the catalog.
    """
    if budget is None:
        budget = effective_budget(
            window,
            pruning_enabled=settings.pruning_enabled,
            pruning_max_tokens=settings.pruning_max_tokens,
            request_budget=request_budget,
            reserve_output=settings.reserve_output,
            output_limit=output_limit,
            max_input=max_input,
        )
    return Policy(
        budget=budget,
        breadcrumb_tokens=settings.breadcrumb_tokens,
        placement=settings.placement,
        max_messages=settings.max_messages,
        max_tool_result_chars=settings.max_tool_result_chars,
        orphan_sweep=settings.orphan_sweep,
        hoist=hoistable and settings.hoist,
        ratio=ratio,
        step=int(settings.cut_step * budget) if budget > 0 else 0,
        anchor_limit=anchor_limit(settings, budget),
        reserve=max(0, output_limit or 0) if settings.reserve_output else 0,
    )


def anchor_limit(settings: Settings, budget: int) -> int:
    """The largest anchor pinned in a request of this budget (0: no anchor)."""
    if not settings.keep_anchor or budget <= 0:
        return 0
    return int(settings.anchor_max_share * budget)


# --- the retry ladder ---------------------------------------------------------------


def may_retry(settings: Settings, sent: TrimReport, *, shadow: bool) -> bool:
    """Whether an overflow of the body ``sent`` is worth another attempt: reactive retries
    are on, the request is enforced, and the body sent still had something to drop (a lone
    turn, with the head the trim pins, is never resent: nothing could be dropped from it)."""
    return settings.reactive and settings.max_retries > 0 and not shadow and sent.kept_units > 1


def next_attempt(
    policy: Policy,
    sent: TrimReport,
    real: int | None,
    maximum: int | None,
    *,
    retry: int = 0,
    whole: bool = False,
) -> Policy:
    """The policy of the attempt after an overflow of the body ``sent``: at least one turn
    fewer, within the budget the overflow's own counts imply (``reactive_budget``). Its cut
    is minimal (no grid step); the anchor pinned before stays pinned (same limit).

    ``retry`` counts the retries already made. The first one aims at the stated deficit
    (or 2/3 of the estimate when none is stated); each further one aims at most at 2/3 of
    the previous attempt's estimate, so a provider whose stated counts understate (or
    never change) still sees the prompt shrink geometrically: the ladder reaches a fit
    within a few retries instead of dropping one turn at a time.

    ``whole``: ``real`` is the prompt alone and ``maximum`` a window that must hold the
    request's output limit too, which the provider checks next (Anthropic's "prompt is
    too long", then "input length and `max_tokens` exceed context limit"). The deficit is
    then taken against the window less that limit (``policy.reserve``), so that one retry
    fits both checks rather than the first alone. A reservation as large as the window is
    not taken out (no prompt fits; the ladder ends as it would have)."""
    if whole and real and maximum and 0 < policy.reserve < maximum:
        maximum -= policy.reserve
    budget = reactive_budget(sent.tokens_after, real, maximum)
    if retry > 0:
        budget = min(budget, reactive_budget(sent.tokens_after))
    return Policy(
        budget=budget,
        breadcrumb_tokens=policy.breadcrumb_tokens,
        placement=policy.placement,
        max_messages=policy.max_messages,
        max_tool_result_chars=policy.max_tool_result_chars,
        orphan_sweep=policy.orphan_sweep,
        hoist=policy.hoist,
        ratio=policy.ratio,
        max_turns=sent.kept_units - 1,
        step=0,
        anchor_limit=policy.anchor_limit,
        reserve=policy.reserve,
    )


# --- windows learned from overflows ---------------------------------------------------

# A stated maximum below this is no context window (a misread, or a reservation left
# after the output): nothing is learned from it.
MIN_LEARNED_WINDOW = 256


def learned_window(maximum: int | None) -> int | None:
    """The window an overflow teaches for a model whose window is unknown: the maximum
    the error states (less the output reservation when it itemises one, so never above
    the real window), or None when it states none worth keeping."""
    if maximum is None or maximum < MIN_LEARNED_WINDOW:
        return None
    return maximum


# --- calibration bookkeeping --------------------------------------------------------


def planning_ratio(table: Mapping[str, Calibration], label: str, settings: Settings) -> float:
    """The ratio a request of model ``label`` plans with (1.0 when calibration is off)."""
    if not settings.calibrate:
        return 1.0
    state = table.get(label)
    return state.planning_ratio if state is not None else 1.0


def learned(
    table: Mapping[str, Calibration],
    label: str,
    settings: Settings,
    reported: int | None,
    sent: TrimReport,
    *,
    shadow: bool,
    ratio: float,
) -> Calibration | None:
    """The model's new calibration once the provider counted ``reported`` prompt tokens
    for the body ``sent`` (planned with ``ratio``), or None: nothing to learn or to keep.

    A shadowed request sent the whole body, so its count is compared with the estimate
    before trimming; the estimate is taken back to raw tokens (divided by ``ratio``).
    """
    if reported is None or not settings.calibrate:
        return None
    if label not in table and len(table) >= MAX_CALIBRATED_MODELS:
        return None
    scaled = sent.tokens_before if shadow else sent.tokens_after
    estimated = round(scaled / (ratio or 1.0))
    return observe(table.get(label, Calibration()), reported, estimated)
