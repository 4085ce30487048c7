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
    before = scale(overhead + sum(sizes), ratio)
    lead = leading_systems(messages)

    pinned_end = _pinned_end(messages, lead) if compacted else -1
    anchor, anchor_tokens = lead, 0  # messages[lead:anchor] is the pinned anchor
    if pinned_end < 0 and anchor_limit > 0:
        anchor, anchor_tokens = _anchor(messages, sizes, lead, ratio, anchor_limit)
    scan = pinned_end if pinned_end >= 0 else anchor
    starts = [i for i, m in enumerate(messages[scan:], scan) if m.turn_start]
    superseded = pinned_end >= 0 and any(not m.pinned for m in messages[lead:pinned_end])
    cands = _candidates(starts, lead, pinned_end, anchor, superseded)

    over_budget = budget > 0 and before > budget
    over_turns = max_turns is not None and len(cands) + 1 > max(1, max_turns)
    if not (over_budget or over_turns) or not cands:
        return _untrimmed(messages, lead, scan, len(starts), len(cands), before, anchor_tokens)

    head = _head(messages, lead, pinned_end, superseded, anchor, starts)
    fixed = overhead + sum(m.tokens for m in head) + breadcrumb_tokens
    # prefix[i] = tokens of messages[:i], so messages[s:] cost total - prefix[s]
    prefix = list(accumulate(sizes, initial=0))
    count = len(cands)
    first = 0 if max_turns is None else max(0, count - max(1, max_turns))
    cut = _fitting_cut(prefix, cands, first, budget - fixed, budget, ratio)
    if step > 0 and cut > first:
        cut = _grid_cut(prefix, cands, cut, step)

    start = cands[cut]
    kept = head + tuple(messages[start:])
    return TrimResult(
        kept=kept,
        dropped_turns=cut + 1,
        dropped_messages=len(messages) - len(kept),
        kept_turns=sum(1 for m in head[lead:] if m.turn_start)
        + len(starts)
        - bisect_left(starts, start),
        tokens_before=before,
        tokens_after=scale(fixed + prefix[-1] - prefix[start], ratio),
        trimmed=True,
        leading=lead,
        head=len(head),
        kept_units=count - cut,
        anchor_tokens=anchor_tokens,
    )


def _untrimmed(
    messages: Sequence[Message],
    lead: int,
    scan: int,
    starts: int,
    cands: int,
    before: int,
    anchor_tokens: int,
) -> TrimResult:
    """Everything kept: the turn starts after ``scan`` are ``starts``, the head's own
    ones are counted here; ``cands`` droppable units, plus the newest turn."""
    head_turns = sum(1 for m in messages[lead:scan] if m.turn_start) if scan > lead else 0
    return TrimResult(
        tuple(messages),
        0,
        0,
        head_turns + starts,
        before,
        before,
        False,
        lead,
        0,
        cands + 1,
        anchor_tokens,
    )


def _pinned_end(messages: Sequence[Message], lead: int) -> int:
    """``messages[lead:end]`` holds a compaction's pinned head: the end after the
    newest pinned message; -1 when none is pinned."""
    for i in range(len(messages) - 1, lead - 1, -1):
        if messages[i].pinned:
            return i + 1
    return -1


def _anchor(
    messages: Sequence[Message], sizes: list[int], lead: int, ratio: float, limit: int
) -> tuple[int, int]:
    """The anchor's end and size (provider tokens) when it fits ``limit``; else (lead, 0)."""
    end = anchor_end(messages, lead)
    if end > lead:
        size = scale(sum(sizes[lead:end]), ratio)
        if size <= limit:
            return end, size
    return lead, 0


def _candidates(
    starts: list[int], lead: int, pinned_end: int, anchor: int, superseded: bool
) -> list[int]:
    """Where the kept part may start (``messages[start:]`` after the head), oldest first:
    the end of the pinned head when it superseded items, then the turn starts after it;
    every turn start after an anchor; else every turn start but the first (rule 5)."""
    if pinned_end >= 0:
        return ([pinned_end] if superseded else []) + [s for s in starts if s > pinned_end]
    if anchor > lead:
        return starts
    return starts[1:]


def _head(
    messages: Sequence[Message],
    lead: int,
    pinned_end: int,
    superseded: bool,
    anchor: int,
    starts: list[int],
) -> tuple[Message, ...]:
    """What a trim always keeps before the kept units: the leading systems, then the
    pinned compaction head, the anchor, or the exempt strays before the first turn."""
    if pinned_end >= 0:
        if superseded:
            return tuple(messages[:lead]) + tuple(m for m in messages[lead:pinned_end] if m.pinned)
        return tuple(messages[:pinned_end])
    if anchor > lead:
        return tuple(messages[:anchor])
    # exempt strays (results answering calls stored server-side) are pinned
    return tuple(messages[:lead]) + tuple(m for m in messages[lead : starts[0]] if m.exempt)


def _fitting_cut(
    prefix: list[int], cands: list[int], first: int, room: int, budget: int, ratio: float
) -> int:
    """The minimal cut: the oldest candidate from ``first`` whose suffix fits (``room``
    is the budget less the fixed part); the newest when none does; ``first`` when
    there is no budget (a turn cap alone)."""
    count = len(cands)
    if budget <= 0:
        return first
    total = prefix[-1]
    if ratio == 1.0:  # scale() is the identity: compare raw sums
        limit = room - total
        for k in range(first, count):
            if -prefix[cands[k]] <= limit:
                return k
        return count - 1
    fixed = budget - room
    for k in range(first, count):
        if scale(fixed + total - prefix[cands[k]], ratio) <= budget:
            return k
    return count - 1  # the newest turn is always kept


def _grid_cut(prefix: list[int], cands: list[int], cut: int, step: int) -> int:
    """The first boundary at or after the smallest multiple of ``step`` past the last
    boundary that did not fit; the minimal cut when no boundary is there."""
    target = (prefix[cands[cut - 1]] // step + 1) * step
    for k in range(cut, len(cands)):
        if prefix[cands[k]] >= target:
            return k
    return cut
