"""Whole-turn trimming.

Rules (docs/trimming.md, "Whole-turn trimming"):

1. A turn starts at a real user message (``Message.turn_start``) and runs to the
   next one. Assistant replies, tool calls, tool results and late system
   messages belong to the turn they stand in, so a tool call and its result are
   always dropped together.
2. The leading run of system messages is always kept.
3. The newest turn is always kept, even when it alone is over budget.
4. Turns are dropped oldest first, and only whole: the kept turns are a suffix.
   The cut is minimal: keeping one more turn would not fit.
5. Messages before the first real user message (other than the leading
   systems) leave with the first dropped turn, except exempt ones: results
   that answer calls stored server-side (Responses ``previous_response_id``)
   are needed by the provider whatever is trimmed, so they stay.
6. The breadcrumb that marks the cut counts inside the budget. trimgate's own
   breadcrumb found in an incoming history is never a turn boundary, so a
   re-trimmed history does not drop it as if it were a turn.
7. Budget 0 disables trimming; a conversation with fewer than two turns is
   never trimmed.

Everything runs in one pass over suffix sums: linear in the history.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

from trimgate.history import Message, Role
from trimgate.trimming.estimate import scale


@dataclass(frozen=True, slots=True)
class TrimResult:
    kept: tuple[Message, ...]  # leading systems + the kept turns; no breadcrumb
    dropped_turns: int
    dropped_messages: int
    kept_turns: int
    tokens_before: int  # provider tokens (scaled estimate), overhead included
    tokens_after: int  # provider tokens of what is forwarded, breadcrumb included
    trimmed: bool
    leading: int  # how many leading system messages ``kept`` starts with


def leading_systems(messages: Sequence[Message]) -> int:
    n = 0
    for m in messages:
        if m.role is not Role.SYSTEM:
            break
        n += 1
    return n


def trim_to_recent_turns(
    messages: Sequence[Message],
    budget: int,
    *,
    overhead: int = 0,
    breadcrumb_tokens: int = 0,
    ratio: float = 1.0,
    max_turns: int | None = None,
) -> TrimResult:
    """Keep the most recent whole turns that fit ``budget`` (provider tokens).

    ``ratio`` converts estimates to provider tokens (calibration). ``max_turns``
    caps the kept turns as well (a reactive retry must drop at least one more).
    """
    # One pass for the sizes, one for the turn starts; the suffix sums come from
    # the prefix sums (C loops), so no Python loop walks every message twice.
    sizes = [m.tokens for m in messages]
    raw_before = overhead + sum(sizes)
    before = scale(raw_before, ratio)
    lead = leading_systems(messages)
    starts = [i for i, m in enumerate(messages[lead:], lead) if m.turn_start]
    total_turns = len(starts)

    over_budget = budget > 0 and before > budget
    over_turns = max_turns is not None and total_turns > max(1, max_turns)
    if not (over_budget or over_turns) or total_turns <= 1:
        return TrimResult(tuple(messages), 0, 0, total_turns, before, before, False, lead)

    # Exempt strays (results answering calls stored server-side) are pinned.
    pinned = tuple(m for m in messages[lead : starts[0]] if m.exempt)
    fixed = overhead + sum(sizes[:lead]) + sum(m.tokens for m in pinned) + breadcrumb_tokens
    # prefix[i] = tokens of messages[:i], so messages[starts[k]:] cost total - prefix[starts[k]]
    prefix = list(accumulate(sizes, initial=0))
    total = prefix[-1]

    first = 1  # drop at least the oldest turn
    if max_turns is not None:
        first = max(first, total_turns - max(1, max_turns))
    cut = total_turns - 1  # the newest turn is always kept
    if budget <= 0:
        cut = first
    elif ratio == 1.0:  # scale() is the identity: compare raw sums
        limit = budget - fixed - total
        for k in range(first, total_turns):
            if -prefix[starts[k]] <= limit:
                cut = k
                break
    else:
        for k in range(first, total_turns):
            if scale(fixed + total - prefix[starts[k]], ratio) <= budget:
                cut = k
                break

    start = starts[cut]
    kept = tuple(messages[:lead]) + pinned + tuple(messages[start:])
    after = scale(fixed + total - prefix[start], ratio)
    return TrimResult(
        kept=kept,
        dropped_turns=cut,
        dropped_messages=start - lead - len(pinned),
        kept_turns=total_turns - cut,
        tokens_before=before,
        tokens_after=after,
        trimmed=True,
        leading=lead,
    )
