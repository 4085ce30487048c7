"""The neutral conversation model shared by the codecs and the trimming core.

A codec turns a provider's history array into a ``Conversation`` of ``Message``
values. Each message points back at its original wire item by ``index`` and
carries only what the trimming rules need: its role, whether it starts a turn,
the tool-call ids it produces and consumes, its estimated size, and its media
count. The core never sees provider JSON; the codec rebuilds the wire array
from the untouched original items and the plan.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any


class Role(enum.Enum):
    SYSTEM = "system"  # system / developer messages (never a turn start)
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"  # a message whose role exists only to carry tool results


_FIELDS = (
    "index",
    "role",
    "tokens",
    "text_bytes",
    "turn_start",
    "calls",
    "results",
    "anonymous_results",
    "tool_texts",
    "media",
    "other_content",
    "exempt",
    "breadcrumb",
    "pinned",
)


class Message:
    """One wire item as the trimming rules see it. Treated as immutable: derive
    changed values with ``replace``.

    A plain class with an explicit ``__init__`` rather than a dataclass: compiled
    (setup.py), its construction runs natively, about five times faster than a
    dataclass ``__init__``, and a codec builds thousands per request.
    """

    __slots__ = _FIELDS

    def __init__(
        self,
        index: int,  # position of the original item in the wire array
        role: Role,
        tokens: int,  # estimated tokens of this message (text, tool calls/results, media)
        text_bytes: int = 0,  # UTF-8 bytes of the text-bearing content behind ``tokens``
        turn_start: bool = False,  # a real user message: user role, no tool results
        calls: tuple[str, ...] = (),  # ids of the tool calls this message makes
        results: tuple[str, ...] = (),  # ids of the tool calls this message answers
        # Carries tool results that have no id at all: it pairs with the nearest
        # earlier message that makes calls, as long as only tool traffic stands between.
        anonymous_results: bool = False,
        tool_texts: tuple[str, ...] = (),  # the text of each cappable tool result, in order
        media: int = 0,  # images, audio, documents: each costs a fixed token price
        # False when the message holds nothing but tool calls / tool results, so that
        # stripping all of them leaves nothing worth sending.
        other_content: bool = True,
        exempt: bool = False,  # the orphan sweep never touches this message
        breadcrumb: bool = False,  # trimgate's own marker, found in an incoming history
        # A provider compaction's pinned head (Anthropic: every message up to the latest
        # compaction block; Responses: the latest compaction item): kept whatever the
        # budget, forwarded untouched, the breadcrumb after it. A codec marks such
        # messages ``exempt`` as well, so that the orphan sweep leaves them alone too.
        pinned: bool = False,
    ) -> None:
        self.index = index
        self.role = role
        self.tokens = tokens
        self.text_bytes = text_bytes
        self.turn_start = turn_start
        self.calls = calls
        self.results = results
        self.anonymous_results = anonymous_results
        self.tool_texts = tool_texts
        self.media = media
        self.other_content = other_content
        self.exempt = exempt
        self.breadcrumb = breadcrumb
        self.pinned = pinned

    @property
    def carries_results(self) -> bool:
        return bool(self.results) or self.anonymous_results

    def _values(self) -> tuple[object, ...]:
        return (
            self.index,
            self.role,
            self.tokens,
            self.text_bytes,
            self.turn_start,
            self.calls,
            self.results,
            self.anonymous_results,
            self.tool_texts,
            self.media,
            self.other_content,
            self.exempt,
            self.breadcrumb,
            self.pinned,
        )

    def replace(self, **changes: Any) -> Message:
        """A copy with the given fields changed (a TypeError names an unknown one)."""
        values: dict[str, Any] = dict(zip(_FIELDS, self._values(), strict=True))
        values.update(changes)
        return Message(**values)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Message):
            return NotImplemented
        return self._values() == other._values()

    __hash__ = None  # type: ignore[assignment]  # equal by value, mutable: unhashable

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in zip(_FIELDS, self._values(), strict=True))
        return f"Message({fields})"


# Shorthands for the shapes a codec builds by the thousand. They call
# ``Message`` positionally (interpreted, a keyword call costs about three times
# more), so they rely on the parameter order above: keep it in step.


def text_message(
    index: int,
    role: Role,
    tokens: int,
    text_bytes: int,
    turn_start: bool = False,
    media: int = 0,
    breadcrumb: bool = False,
) -> Message:
    """A message without tool calls or results."""
    return Message(
        index,
        role,
        tokens,
        text_bytes,
        turn_start,
        (),
        (),
        False,
        (),
        media,
        True,
        False,
        breadcrumb,
    )


def call_message(
    index: int,
    tokens: int,
    text_bytes: int,
    calls: tuple[str, ...],
    other_content: bool = False,
    media: int = 0,
    exempt: bool = False,
    role: Role = Role.ASSISTANT,
) -> Message:
    """A message that makes tool calls (and carries no results)."""
    return Message(
        index, role, tokens, text_bytes, False, calls, (), False, (), media, other_content, exempt
    )


def result_message(
    index: int,
    tokens: int,
    text_bytes: int,
    results: tuple[str, ...],
    tool_texts: tuple[str, ...] = (),
    media: int = 0,
    anonymous_results: bool = False,
    exempt: bool = False,
    role: Role = Role.TOOL,
) -> Message:
    """A message that only carries tool results (``other_content`` False)."""
    return Message(
        index,
        role,
        tokens,
        text_bytes,
        False,
        (),
        results,
        anonymous_results,
        tool_texts,
        media,
        False,
        exempt,
    )


@dataclass(frozen=True, slots=True)
class Conversation:
    messages: tuple[Message, ...]
    overhead: int = 0  # tokens counted once: the system field and the tool definitions
    # The API accepts calls of the newest turn that have no result yet (the
    # client is about to run them); the sweep must not strip those.
    pending_calls_ok: bool = False
    # Some message is ``pinned`` (the codec found a provider compaction): the trim
    # looks for the pinned head only then.
    compacted: bool = False

    @property
    def tokens(self) -> int:
        return self.overhead + sum(m.tokens for m in self.messages)
