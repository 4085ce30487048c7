"""Whole-turn trimming.

Rules (docs/trimming.md, "Whole-turn trimming", "Cache-stable cuts", "The anchor",
"Server-side compaction"):

1. A turn starts at a real user message (``Message.turn_start``) and runs to the
   next one. Assistant replies, tool calls, tool results and late system
   messages belong to the turn they stand in, so a tool call and its result are
   always dropped together.
2. The leading run of system messages is always kept, and so is a pinned head
   right after it: a provider compaction's head (messages marked ``pinned``), or
   else the anchor (every message before the first assistant or tool message, when
   ``anchor_limit`` allows its size). What the trim may drop comes after the head,
   in units dropped oldest first: the items a compaction superseded, then the rest
   of the head's own turn, then whole turns.
3. The newest turn is always kept, even when it alone is over budget.
4. The kept units are a suffix. With ``step`` 0 the cut is minimal: keeping one
   more unit would not fit. With ``step`` S > 0 the kept part starts at the first
   unit boundary at or after a multiple of S of the conversation's cumulative raw
   estimate (counted from its first message), taking the smallest multiple whose
   kept part fits: the cut stays put while a conversation grows at its end.
5. Without a pinned head, messages before the first real user message (other than
   the leading systems) leave with the first dropped turn, except exempt ones:
   results that answer calls stored server-side (Responses
   ``previous_response_id``) are needed by the provider whatever is trimmed, so
   they stay.
6. The breadcrumb that marks the cut counts inside the budget. trimgate's own
   breadcrumb found in an incoming history is never a turn boundary, so a
   re-trimmed history does not drop it as if it were a turn.
7. Budget 0 disables trimming; a conversation with nothing droppable is never
   trimmed.

Everything runs in one pass over suffix sums: linear in the history.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

from trimgate.history import Message, Role
from trimgate.trimming.estimate import scale


@dataclass(frozen=True, slots=True)
class TrimResult:
    kept: tuple[Message, ...]  # leading systems + pinned head + the kept turns; no breadcrumb
    dropped_turns: int  # units dropped (whole turns; the head's own rest; superseded items)
    dropped_messages: int
    kept_turns: int  # turn starts kept after the leading systems
    tokens_before: int  # provider tokens (scaled estimate), overhead included
    tokens_after: int  # provider tokens of what is forwarded, breadcrumb included
    trimmed: bool
    leading: int  # how many leading system messages ``kept`` starts with
    head: int = 0  # how many messages ``kept`` starts with before the droppable part
    kept_units: int = 0  # droppable units kept (the newest turn included)
    anchor_tokens: int = 0  # provider tokens of the pinned anchor, 0 when none


def leading_systems(messages: Sequence[Message]) -> int:
    n = 0
    for m in messages:
        if m.role is not Role.SYSTEM:
            break
        n += 1
    return n


def anchor_end(messages: Sequence[Message], lead: int) -> int:
    """The end of the anchor ``messages[lead:end]``: the first assistant (model) or tool
    message after the leading systems; ``lead`` when there is no anchor (none such
    message, or it comes first)."""
    for i in range(lead, len(messages)):
        if messages[i].role in (Role.ASSISTANT, Role.TOOL):
            return i
    return lead


def trim_to_recent_turns(
    messages: Sequence[Message],
    budget: int,
    *,
    overhead: int = 0,
    breadcrumb_tokens: int = 0,
    ratio: float = 1.0,
    max_turns: int | None = None,
    step: int = 0,
    anchor_limit: int = 0,
    compacted: bool = False,
) -> TrimResult:
    """Keep the most recent whole turns that fit ``budget`` (provider tokens).

    ``ratio`` converts estimates to provider tokens (calibration). ``max_turns``
    caps the kept units as well (a reactive retry must drop at least one more);
    ``step`` (raw estimate tokens, 0 = minimal cuts) puts the cut on a grid;
    ``anchor_limit`` (provider tokens, 0 = off) is the largest anchor pinned;
    ``compacted``: some message is ``pinned`` (a provider compaction's head).
    """
    # One pass for the sizes, one for the turn starts; the suffix sums come from
    # the prefix sums (C loops), so no Python loop walks every message twice.
    sizes = [m.tokens for m in messages]
    raw_before = overhead + sum(sizes)
    before = scale(raw_before, ratio)
    lead = leading_systems(messages)

    pinned_end = -1  # messages[lead:pinned_end] holds a compaction's pinned head
    if compacted:
        for i in range(len(messages) - 1, lead - 1, -1):
            if messages[i].pinned:
                pinned_end = i + 1
                break
    anchor = lead  # messages[lead:anchor] is the pinned anchor
    anchor_tokens = 0
    if pinned_end < 0 and anchor_limit > 0:
        end = anchor_end(messages, lead)
        if end > lead:
            size = scale(sum(sizes[lead:end]), ratio)
            if size <= anchor_limit:
                anchor, anchor_tokens = end, size
    scan = pinned_end if pinned_end >= 0 else anchor
    starts = [i for i, m in enumerate(messages[scan:], scan) if m.turn_start]
    head_turns = sum(1 for m in messages[lead:scan] if m.turn_start) if scan > lead else 0

    # ``cands``: where the kept part may start (messages[start:] after the head)
    superseded = False
    if pinned_end >= 0:
        superseded = any(not m.pinned for m in messages[lead:pinned_end])
        cands = [pinned_end] if superseded else []
        cands += [s for s in starts if s > pinned_end]
    elif anchor > lead:
        cands = starts
    else:
        cands = starts[1:]

    over_budget = budget > 0 and before > budget
    over_turns = max_turns is not None and len(cands) + 1 > max(1, max_turns)
    if not (over_budget or over_turns) or not cands:
        return TrimResult(
            tuple(messages),
            0,
            0,
            head_turns + len(starts),
            before,
            before,
            False,
            lead,
            0,
            len(cands) + 1,
            anchor_tokens,
        )

    if pinned_end >= 0:
        head: tuple[Message, ...] = tuple(messages[:lead])
        if superseded:
            head += tuple(m for m in messages[lead:pinned_end] if m.pinned)
        else:
            head = tuple(messages[:pinned_end])
    elif anchor > lead:
        head = tuple(messages[:anchor])
    else:  # exempt strays (results answering calls stored server-side) are pinned
        head = tuple(messages[:lead]) + tuple(m for m in messages[lead : starts[0]] if m.exempt)
    fixed = overhead + sum(m.tokens for m in head) + breadcrumb_tokens
    # prefix[i] = tokens of messages[:i], so messages[s:] cost total - prefix[s]
    prefix = list(accumulate(sizes, initial=0))
    total = prefix[-1]

    count = len(cands)
    first = 0
    if max_turns is not None:
        first = max(first, count - max(1, max_turns))
    cut = count - 1  # the newest turn is always kept
    if budget <= 0:
        cut = first
    elif ratio == 1.0:  # scale() is the identity: compare raw sums
        limit = budget - fixed - total
        for k in range(first, count):
            if -prefix[cands[k]] <= limit:
                cut = k
                break
    else:
        for k in range(first, count):
            if scale(fixed + total - prefix[cands[k]], ratio) <= budget:
                cut = k
                break
    if step > 0 and cut > first:
        # The first boundary at or after the smallest multiple of ``step`` past the
        # last boundary that did not fit; the minimal cut when no boundary is there.
        target = (prefix[cands[cut - 1]] // step + 1) * step
        for k in range(cut, count):
            if prefix[cands[k]] >= target:
                cut = k
                break

    start = cands[cut]
    kept = head + tuple(messages[start:])
    after = scale(fixed + total - prefix[start], ratio)
    return TrimResult(
        kept=kept,
        dropped_turns=cut + 1,
        dropped_messages=len(messages) - len(kept),
        kept_turns=sum(1 for m in head[lead:] if m.turn_start)
        + len(starts)
        - bisect_left(starts, start),
        tokens_before=before,
        tokens_after=after,
        trimmed=True,
        leading=lead,
        head=len(head),
        kept_units=count - cut,
        anchor_tokens=anchor_tokens,
    )
