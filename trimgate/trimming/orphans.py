"""The orphan sweep: the final net before a chat request is forwarded.

Providers reject a tool result whose call is absent, and a tool call whose
result is absent (SPEC §3). The sweep removes both, by id:

* a result id is an orphan unless a call with that id stands earlier;
* a call id is an orphan unless a result with that id stands later, except
  for the newest turn's pending calls when the API accepts them;
* a result without any id is kept when the nearest earlier message, across
  only tool traffic, makes calls (conservative: ids are unknown);
* exempt messages (server-side tool blocks, results that answer calls stored
  server-side) are never touched.

A message whose only content is the removed calls or results goes entirely;
otherwise only those ids are stripped from it (``strip``). The sweep never
empties a conversation: if it would, it removes nothing and the provider
answers the request as it stands.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from trimgate.history import Message, Role


@dataclass(frozen=True, slots=True)
class SweepResult:
    kept: tuple[Message, ...]
    strip: Mapping[int, frozenset[str]] = field(default_factory=dict)  # wire index -> ids
    removed: int = 0  # tool calls and tool results removed


def _is_tool_traffic(m: Message) -> bool:
    return not m.turn_start and (m.role is Role.TOOL or m.carries_results or bool(m.calls))


def sweep_orphans(messages: Sequence[Message], *, pending_calls_ok: bool = False) -> SweepResult:
    newest_start = max((i for i, m in enumerate(messages) if m.turn_start), default=0)

    called: set[str] = set()
    bad: dict[int, set[str]] = {}
    drop_whole: set[int] = set()
    for pos, m in enumerate(messages):
        if m.exempt:
            called.update(m.calls)
            continue
        orphan = {r for r in m.results if r not in called}
        lone = m.anonymous_results and not m.other_content
        if lone and not _anonymous_is_answered(messages, pos):
            drop_whole.add(pos)
        if orphan:
            bad[pos] = orphan
        called.update(m.calls)

    answered: set[str] = set()
    for pos in range(len(messages) - 1, -1, -1):
        m = messages[pos]
        if not m.exempt and m.calls and not (pending_calls_ok and pos >= newest_start):
            orphan = {c for c in m.calls if c not in answered}
            if orphan:
                bad.setdefault(pos, set()).update(orphan)
        answered.update(m.results)

    if not bad and not drop_whole:
        return SweepResult(tuple(messages))

    removed = 0
    strip: dict[int, frozenset[str]] = {}
    for pos, ids in bad.items():
        m = messages[pos]
        removed += len(ids)
        owned = set(m.calls) | set(m.results)
        if ids >= owned and not m.other_content and not m.anonymous_results:
            drop_whole.add(pos)
        else:
            strip[m.index] = frozenset(ids)
    for pos in drop_whole:
        if pos not in bad:
            removed += 1
        strip.pop(messages[pos].index, None)

    kept = tuple(m for pos, m in enumerate(messages) if pos not in drop_whole)
    if not any(m.role is not Role.SYSTEM for m in kept):
        return SweepResult(tuple(messages))
    return SweepResult(kept, strip, removed)


def _anonymous_is_answered(messages: Sequence[Message], pos: int) -> bool:
    for back in range(pos - 1, -1, -1):
        prev = messages[back]
        if prev.calls:
            return True
        if not _is_tool_traffic(prev):
            return False
    return False
