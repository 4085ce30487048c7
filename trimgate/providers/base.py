"""The codec protocol: one pure module per wire format implements it.

A codec is all trimgate knows of a wire format: its name and provider, the chat
endpoints it examines, which paths belong to its provider, the error envelope
trimgate answers in, how a bare body looks (``trimgate trim`` without
``--format``), and the markers of the streamed events that carry usage.
``registry.py`` lists the codecs; routing, the error answers, the config and the
CLI read them from there.

A codec decodes a request body (already parsed JSON) into the neutral
``Conversation`` and encodes a ``TrimPlan`` back into a body built from the
original items: untouched items come out as the very same objects, unknown
fields survive, and only the breadcrumb, stripped tool ids and capped tool
results are new. It also reads the provider's answers: overflow errors and
the prompt-token usage that calibration learns from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Protocol

from trimgate.history import Conversation
from trimgate.providers.overflow import (
    Overflow,
    Patterns,
    detect_bare_stream_overflow,
    detect_overflow,
    detect_stream_event_overflow,
    detect_stream_overflow,
)
from trimgate.trimming.pipeline import TrimPlan

JSON = Any  # parsed JSON (orjson.loads): dict / list / str / int / float / bool / None
# A provider's usage of one answer: (prompt tokens in all, of them read from its prompt cache)
Usage = tuple[int, int]
# What one streamed event states: its prompt usage and its output tokens, each None if none
StreamUsage = tuple[Usage | None, int | None]


@dataclass(frozen=True, slots=True)
class ChatRoute:
    """A chat endpoint a codec examines: ``method`` requests whose path (after an
    upstream's prefix) equals ``path``, or, for a compiled pattern, that it ``match``es
    (a pattern anchors its own end)."""

    path: str | re.Pattern[str]
    count_tokens: bool = False  # a token-count endpoint: it answers a count, generates nothing
    method: str = "POST"


@dataclass(frozen=True, slots=True)
class DecodeOptions:
    breadcrumb: str  # the breadcrumb text: a user message of exactly this text is ours
    media_tokens: int = 1600  # the fixed price of an image, audio clip or document


@dataclass(frozen=True, slots=True)
class Decoded:
    # The parsed request body; the plan refers to its items. From ``decode_raw``, its
    # history array is a ``common.RawItems``, which parses an item when it is read.
    body: dict[str, Any]
    conversation: Conversation
    model: str | None  # the request's model (Gemini: from the path)
    output_limit: int | None  # max_tokens / max_completion_tokens / max_output_tokens / ...
    stream: bool  # the request asks for a streamed answer
    hoistable: bool = False  # system hoisting applies (OpenAI formats)
    # Set when the request must be forwarded untouched although it parsed,
    # e.g. Responses ``input`` given as a plain string (nothing to trim).
    skip: str | None = None
    # The request asks the provider to manage its own context (Anthropic or Responses
    # ``context_management``, Responses ``truncation: "auto"``)
    provider_managed: bool = False
    # A Chat Completions request that sets no output limit under any name a server honours,
    # or a Responses request with no ``max_output_tokens`` (``detect_unspent_stop``); the
    # other formats' codecs leave it False
    uncapped: bool = False


class Codec(Protocol):
    wire_format: str  # the format's name: a ``trimgate trim --format`` choice, a log field
    provider: str  # the ``provider`` an upstream names in the config (formats may share one)
    default_base_url: str  # the provider's API, the built-in upstream of that name
    chat_routes: tuple[ChatRoute, ...]  # the endpoints whose bodies are decoded and trimmed
    # Paths the provider's default upstream serves when no upstream prefix matches,
    # matched at the path's start; None: claims none (the registry's first line takes
    # every path that no codec claims).
    provider_paths: re.Pattern[str] | None
    default_path: str  # the endpoint ``trimgate trim`` decodes a body as; ``{model}`` filled in
    # ``stream_usage`` finds a count only in an event holding one of these byte
    # strings: the relay skips every other event without decoding it.
    stream_usage_markers: tuple[bytes, ...]

    def error_body(self, status: int, message: str, request_id: str) -> dict[str, Any]:
        """trimgate's own error answer in the provider's envelope, so SDKs raise their usual
        exceptions (the request id travels in a header, not in the body)."""
        ...

    def guess(self, body: dict[str, Any]) -> int:
        """How distinctly ``body`` has this format's shape: 0 not at all. The format with
        the highest score is the guess; on a tie, the earlier registry line."""
        ...

    def decode(self, body: JSON, *, path: str, options: DecodeOptions) -> Decoded:
        """Raise ``DecodeError`` when the body is not the shape this endpoint expects."""
        ...

    def decode_raw(
        self, raw: bytes, *, path: str, options: DecodeOptions, tool_texts: bool
    ) -> Decoded | None:
        """What ``decode(orjson.loads(raw))`` returns, got without parsing the whole body,
        or None: parse it and call ``decode`` (the body has a shape this does not handle,
        or is not valid JSON, or the codec has no such decoder). ``tool_texts`` False: the
        messages may leave ``tool_texts`` empty (no result capping)."""
        ...

    def encode(self, decoded: Decoded, plan: TrimPlan, *, breadcrumb: str) -> dict[str, Any]:
        """The body to forward: the original items that the plan keeps, in its order."""
        ...

    def detect_overflow(self, status: int, body: bytes, patterns: Patterns = ()) -> Overflow | None:
        """A context-window-exceeded answer (any status, 200 included). ``patterns``:
        the upstream's ``overflow_patterns``, compiled."""
        ...

    def detect_stream_overflow(self, head: bytes, patterns: Patterns = ()) -> Overflow | None:
        """The first bytes of a 200 SSE stream that carry an overflow error."""
        ...

    def detect_stream_event_overflow(
        self, event: bytes, *, output_started: bool, patterns: Patterns = ()
    ) -> Overflow | None:
        """One SSE event past the head: an overflow while no output has been relayed."""
        ...

    def detect_bare_stream_overflow(self, data: bytes, patterns: Patterns = ()) -> Overflow | None:
        """A whole 200 stream that ended holding only text, no SSE line: an overflow
        error written raw into it."""
        ...

    def usage(self, body: JSON) -> int | None:
        """Prompt tokens the provider reports in a non-streamed JSON answer."""
        ...

    def stream_usage(self, data: str) -> int | None:
        """Prompt tokens reported by one streamed event's ``data``, if it has them."""
        ...

    def prompt_usage(self, body: JSON) -> Usage | None:
        """``usage``'s prompt tokens and, of them, those read from the prompt cache."""
        ...

    def stream_prompt_usage(self, data: str) -> Usage | None:
        """``stream_usage``'s prompt tokens and, of them, those read from the cache."""
        ...

    def output_usage(self, body: JSON) -> int | None:
        """The output tokens (reasoning included) a non-streamed JSON answer reports."""
        ...

    def stream_usages(self, data: str) -> StreamUsage:
        """One streamed event's prompt usage and output tokens, decoded once; the event
        holds one of ``stream_usage_markers`` (else it states neither)."""
        ...


class CodecBase:
    """What the codecs share: overflow recognition (the shared detector, told the wire
    format), no ``decode_raw`` unless a codec has one, and ``usage`` / ``stream_usage``
    read from the codec's ``prompt_usage`` / ``stream_prompt_usage``."""

    wire_format: str
    provider: str
    default_base_url: str
    chat_routes: tuple[ChatRoute, ...]
    provider_paths: re.Pattern[str] | None
    default_path: str

    def decode_raw(
        self, raw: bytes, *, path: str, options: DecodeOptions, tool_texts: bool
    ) -> Decoded | None:
        return None

    def prompt_usage(self, body: JSON) -> Usage | None:
        return None

    def stream_prompt_usage(self, data: str) -> Usage | None:
        return None

    def output_usage(self, body: JSON) -> int | None:
        return None

    def stream_usages(self, data: str) -> StreamUsage:
        return self.stream_prompt_usage(data), None

    def usage(self, body: JSON) -> int | None:
        found = self.prompt_usage(body)
        return found[0] if found is not None else None

    def stream_usage(self, data: str) -> int | None:
        found = self.stream_prompt_usage(data)
        return found[0] if found is not None else None

    def detect_overflow(self, status: int, body: bytes, patterns: Patterns = ()) -> Overflow | None:
        return detect_overflow(status, body, wire_format=self.wire_format, patterns=patterns)

    def detect_stream_overflow(self, head: bytes, patterns: Patterns = ()) -> Overflow | None:
        return detect_stream_overflow(head, wire_format=self.wire_format, patterns=patterns)

    def detect_stream_event_overflow(
        self, event: bytes, *, output_started: bool, patterns: Patterns = ()
    ) -> Overflow | None:
        return detect_stream_event_overflow(
            event, output_started=output_started, wire_format=self.wire_format, patterns=patterns
        )

    def detect_bare_stream_overflow(self, data: bytes, patterns: Patterns = ()) -> Overflow | None:
        return detect_bare_stream_overflow(data, wire_format=self.wire_format, patterns=patterns)
