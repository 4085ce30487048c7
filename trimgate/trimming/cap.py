"""The message-count hard cap, and tool-result capping.

Message cap (``max_history_messages``): at most ``limit``
non-system messages are forwarded, the anchor (first real user message)
included. System messages are always kept. The middle goes: the anchor and
the newest tail stay. Tool results left at the head of the tail lose their
calls, so they go too. When nothing of the tail
would be left, the newest real user message stands in for its turn, so the
cap never empties a conversation nor forwards only the anchor.

Tool-result capping (``max_tool_result_chars``): a longer result keeps its
head (2/3) and tail (1/3) around a marker naming how many characters were cut.
Lengths are characters (code points), so a cut never splits a character.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trimgate.history import Message, Role

TRUNCATION_MARKER = "\n\n[... {n} characters truncated ...]\n\n"


@dataclass(frozen=True, slots=True)
class CapResult:
    kept: tuple[Message, ...]
    removed: int  # non-system messages removed


def cap_messages(messages: Sequence[Message], limit: int) -> CapResult:
    body = [i for i, m in enumerate(messages) if m.role is not Role.SYSTEM]
    if limit <= 0 or len(body) <= limit:
        return CapResult(tuple(messages), 0)

    anchor = next((p for p, i in enumerate(body) if messages[i].turn_start), None)
    if anchor is not None and limit >= 2 and anchor < len(body) - limit:
        head = [body[anchor]]
        tail = body[len(body) - (limit - 1) :]
    else:
        head = []
        tail = body[len(body) - limit :]

    # Tool results at the head of the tail have lost their calls.
    while tail and messages[tail[0]].carries_results and not messages[tail[0]].turn_start:
        tail.pop(0)

    if not tail:
        # Everything recent was tool results that lost their calls: the newest real
        # user message stands in for its turn (else the model would answer the anchor).
        newest = next((i for i in reversed(body) if messages[i].turn_start), body[-1])
        tail = [newest]
    keep = set(head) | set(tail)
    kept = tuple(m for i, m in enumerate(messages) if m.role is Role.SYSTEM or i in keep)
    return CapResult(kept, len(body) - len(keep))


def cap_text(text: str, max_chars: int) -> str | None:
    """The capped form of ``text``, or None when capping would not shorten it."""
    if max_chars <= 0 or len(text) <= max_chars:
        return None
    head = max_chars * 2 // 3
    tail = max_chars - head
    removed = len(text) - head - tail
    marker = TRUNCATION_MARKER.format(n=removed)
    if len(marker) >= removed:
        return None  # the marker would not make it shorter
    return text[:head] + marker + (text[-tail:] if tail else "")
