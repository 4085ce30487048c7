"""The orphan sweep: the final net before a chat request is forwarded.

Providers reject a tool result whose call is absent, and a tool call whose
result is absent. The sweep removes both, by id:

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
    # One forward pass over every message finds the orphan results, and notes
    # where each result id last stands and which messages make calls; the
    # calls are then checked against those positions (a call is answered when
    # a result with its id stands later), visiting only the calling messages.
    bad: dict[int, set[str]] = {}
    drop_whole: set[int] = set()
    last_result: dict[str, int] = {}  # result id -> position of its newest result
    callers = _scan_results(messages, bad, drop_whole, last_result)
    if callers:
        _find_orphan_calls(messages, callers, last_result, bad, pending_calls_ok)
    if not bad and not drop_whole:
        return SweepResult(tuple(messages))
    return _remove(messages, bad, drop_whole)


def _scan_results(
    messages: Sequence[Message],
    bad: dict[int, set[str]],
    drop_whole: set[int],
    last_result: dict[str, int],
) -> list[int]:
    """The forward pass: marks orphan results in ``bad`` and unanswered anonymous
    results in ``drop_whole``, fills ``last_result``; returns the positions of
    the non-exempt messages that make calls."""
    called: set[str] = set()
    callers: list[int] = []
    for pos, m in enumerate(messages):
        results = m.results
        calls = m.calls
        if results:
            for r in results:
                last_result[r] = pos
        if m.exempt:
            if calls:
                called.update(calls)
            continue
        if results:
            for r in results:
                if r not in called:
                    bad.setdefault(pos, set()).add(r)
        if (
            m.anonymous_results
            and not m.other_content
            and not _anonymous_is_answered(messages, pos)
        ):
            drop_whole.add(pos)
        if calls:
            called.update(calls)
            callers.append(pos)
    return callers


def _find_orphan_calls(
    messages: Sequence[Message],
    callers: list[int],
    last_result: dict[str, int],
    bad: dict[int, set[str]],
    pending_calls_ok: bool,
) -> None:
    """Marks in ``bad`` the calls no later result answers, but for the newest turn's
    pending calls when the API accepts them."""
    newest_start = len(messages)  # calls at or after it may stay pending
    if pending_calls_ok:
        newest_start = next(
            (i for i in range(len(messages) - 1, -1, -1) if messages[i].turn_start), 0
        )
    for pos in reversed(callers):
        if pos >= newest_start:
            continue
        orphan = {c for c in messages[pos].calls if last_result.get(c, -1) <= pos}
        if orphan:
            bad.setdefault(pos, set()).update(orphan)


def _remove(
    messages: Sequence[Message], bad: dict[int, set[str]], drop_whole: set[int]
) -> SweepResult:
    """Drops the messages left with nothing, strips the ids from the others; removes
    nothing when only system messages would remain."""
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
