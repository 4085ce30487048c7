"""plan(conversation, policy) -> TrimPlan: every pass, in order, and one report.

The passes run in this order, each for a reason:

1. hoist (opt-in): late system messages move to the front first, so they
   become leading systems that the trim always keeps.
2. tool-result capping: a content rule applied to every forwarded result,
   whatever the budget. It runs before the trim so that the trim sees the
   sizes that will really be sent and drops no turn for bytes that capping
   removes anyway. (It changes no message count, so no later pass cares.)
3. whole-turn trim to the token budget: the primary rule, with breadcrumb.
4. message-count cap: a hard bound on what the trim kept.
5. orphan sweep: the final net over the result of every pass before it,
   including what the client sent; on a trimmed history it finds nothing.

The plan is pure data: the codec applies it to the original wire items.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from trimgate.history import Conversation, Message, Role
from trimgate.trimming.cap import cap_messages, cap_text
from trimgate.trimming.estimate import bytes_tokens, scale, utf8_len
from trimgate.trimming.orphans import sweep_orphans
from trimgate.trimming.turns import TrimResult, leading_systems, trim_to_recent_turns

Placement = Literal["message", "merge", "none"]


@dataclass(frozen=True, slots=True)
class Policy:
    budget: int  # provider tokens; 0 disables token trimming
    breadcrumb_tokens: int = 0  # cost of the breadcrumb in its placement
    placement: Placement = "message"
    max_messages: int = 0  # 0 = off
    max_tool_result_chars: int = 0  # 0 = off
    orphan_sweep: bool = True
    hoist: bool = False
    ratio: float = 1.0  # calibration: provider tokens per estimated token
    max_turns: int | None = None  # reactive retries: keep fewer turns than last time
    step: int = 0  # cache-stable cuts: grid step in raw estimate tokens; 0 = minimal cuts
    anchor_limit: int = 0  # the largest anchor pinned, provider tokens; 0 = no anchor
    # the request's output limit, taken out of the budget (reserve_output_tokens): a
    # retry takes it out of a window an overflow states whole too; 0 = none
    reserve: int = 0


@dataclass(frozen=True, slots=True)
class TrimReport:
    trimmed: bool
    dropped_turns: int
    dropped_messages: int
    kept_turns: int
    tokens_before: int
    tokens_after: int
    budget: int
    capped_messages: int = 0
    orphans_removed: int = 0
    tool_results_capped: int = 0
    hoisted: int = 0
    anchor_tokens: int = 0  # the pinned anchor's size (provider tokens); 0 = none pinned
    kept_units: int = 0  # what a further trim could still drop from, plus the newest turn

    @property
    def tokens_dropped(self) -> int:
        return max(0, self.tokens_before - self.tokens_after)


@dataclass(frozen=True, slots=True)
class TrimPlan:
    kept: tuple[Message, ...]  # forward order; systems included, breadcrumb not
    report: TrimReport
    # Where the breadcrumb goes: before kept[breadcrumb_at] (placement
    # "message"), or merged into kept[breadcrumb_at] ("merge"); None: no breadcrumb.
    breadcrumb_at: int | None = None
    placement: Placement = "message"
    strip: Mapping[int, frozenset[str]] = field(default_factory=dict)  # wire index -> ids
    capped: Mapping[int, tuple[str | None, ...]] = field(default_factory=dict)  # wire index
    changed: bool = False  # False: forward the original bytes


def plan(conversation: Conversation, policy: Policy) -> TrimPlan:
    messages: tuple[Message, ...] = conversation.messages
    hoisted = 0
    if policy.hoist:
        messages, hoisted = _hoist(messages)
    capped: dict[int, tuple[str | None, ...]] = {}
    tool_results_capped = 0
    if policy.max_tool_result_chars > 0:
        messages, capped, tool_results_capped = _cap_tool_results(
            messages, policy.max_tool_result_chars
        )

    placement = policy.placement
    crumb = policy.breadcrumb_tokens if placement != "none" else 0
    trim = _trim(messages, conversation, policy, crumb)
    kept = trim.kept
    # The trim summed the messages it was given: unless capping changed their
    # sizes (hoisting only reorders), that is the conversation's own total.
    before = trim.tokens_before if not capped else scale(conversation.tokens, policy.ratio)

    capped_messages = 0
    if policy.max_messages > 0:
        kept, capped_messages = _cap_count(kept, policy.max_messages, trim, placement)

    strip: Mapping[int, frozenset[str]] = {}
    orphans_removed = 0
    if policy.orphan_sweep:
        swept = sweep_orphans(kept, pending_calls_ok=conversation.pending_calls_ok)
        kept, strip, orphans_removed = swept.kept, swept.strip, swept.removed

    breadcrumb_at = _breadcrumb_at(trim, kept, placement) if trim.trimmed else None
    after = trim.tokens_after  # equals tokens_before when nothing was trimmed
    if capped_messages or orphans_removed:
        crumb = crumb if breadcrumb_at is not None else 0
        after = scale(_tokens(kept, conversation.overhead, crumb), policy.ratio)
    report = TrimReport(
        trimmed=trim.trimmed,
        dropped_turns=trim.dropped_turns,
        dropped_messages=len(conversation.messages) - len(trim.kept) + capped_messages,
        kept_turns=_kept_turns(kept, trim),
        tokens_before=before,
        tokens_after=after,
        budget=policy.budget,
        capped_messages=capped_messages,
        orphans_removed=orphans_removed,
        tool_results_capped=tool_results_capped,
        hoisted=hoisted,
        anchor_tokens=trim.anchor_tokens,
        kept_units=trim.kept_units,
    )
    changed = bool(trim.trimmed or capped_messages or orphans_removed or capped or hoisted)
    return TrimPlan(
        kept=kept,
        report=report,
        breadcrumb_at=breadcrumb_at,
        placement=placement,
        strip=strip,
        capped=capped,
        changed=changed,
    )


def _trim(
    messages: tuple[Message, ...], conversation: Conversation, policy: Policy, crumb: int
) -> TrimResult:
    return trim_to_recent_turns(
        messages,
        policy.budget,
        overhead=conversation.overhead,
        breadcrumb_tokens=crumb,
        ratio=policy.ratio,
        max_turns=policy.max_turns,
        step=policy.step,
        anchor_limit=policy.anchor_limit,
        compacted=conversation.compacted,
    )


def _cap_count(
    kept: tuple[Message, ...], limit: int, trim: TrimResult, placement: Placement
) -> tuple[tuple[Message, ...], int]:
    """The message-count cap over what the trim kept: (kept, messages removed)."""
    if trim.trimmed and placement == "message":
        limit = max(1, limit - 1)  # the breadcrumb is a forwarded message too
    result = cap_messages(kept, limit)
    return result.kept, result.removed


def _breadcrumb_at(trim: TrimResult, kept: tuple[Message, ...], placement: Placement) -> int | None:
    """Where a trimmed plan's breadcrumb goes in ``kept``; None when nowhere."""
    if placement == "none":
        return None
    # After the head the trim kept (leading systems, a compaction's head or the
    # anchor, pinned server-state results); later passes only remove messages.
    at = 0
    for m in trim.kept[: trim.head]:
        if at < len(kept) and kept[at] is m:
            at += 1
    if placement == "merge":
        return next((i for i in range(at, len(kept)) if kept[i].turn_start), None)
    return at if at < len(kept) else None


def _kept_turns(kept: tuple[Message, ...], trim: TrimResult) -> int:
    if kept is trim.kept and not trim.trimmed:  # all of ``messages``: the trim counted them
        return trim.kept_turns + sum(1 for m in kept[: trim.leading] if m.turn_start)
    return sum(1 for m in kept if m.turn_start)


def _tokens(messages: tuple[Message, ...], overhead: int, crumb: int) -> int:
    return overhead + crumb + sum(m.tokens for m in messages)


def _hoist(messages: tuple[Message, ...]) -> tuple[tuple[Message, ...], int]:
    lead = leading_systems(messages)
    late = [m for m in messages[lead:] if m.role is Role.SYSTEM]
    if not late:
        return messages, 0
    rest = [m for m in messages[lead:] if m.role is not Role.SYSTEM]
    return (*messages[:lead], *late, *rest), len(late)


def _cap_tool_results(
    messages: tuple[Message, ...], max_chars: int
) -> tuple[tuple[Message, ...], dict[int, tuple[str | None, ...]], int]:
    capped: dict[int, tuple[str | None, ...]] = {}
    count = 0
    out: list[Message] | None = None
    for pos, m in enumerate(messages):
        if not m.tool_texts or m.pinned:  # a pinned head goes untouched
            continue
        new = tuple(cap_text(t, max_chars) for t in m.tool_texts)
        if all(t is None for t in new):
            continue
        if out is None:
            out = list(messages)
        delta = sum(
            utf8_len(old) - utf8_len(t)
            for old, t in zip(m.tool_texts, new, strict=True)
            if t is not None
        )
        text_bytes = max(0, m.text_bytes - delta)
        tokens = m.tokens - bytes_tokens(m.text_bytes) + bytes_tokens(text_bytes)
        out[pos] = m.replace(tokens=tokens, text_bytes=text_bytes)
        capped[m.index] = new
        count += sum(1 for t in new if t is not None)
    return (tuple(out) if out is not None else messages), capped, count
