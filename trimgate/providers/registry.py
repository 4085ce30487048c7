"""The codec table: one line per wire format, and what the rest of trimgate reads from it.

Routing (which paths are chat endpoints of which format, which provider serves a
path), trimgate's error answers, the config's list of providers and the CLI's
list of formats all come from the codecs listed here; nothing else names a format.
The first line is the default: its provider serves every path no codec claims, and
its format is the guess for a body no codec recognises.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import orjson

from trimgate.providers import anthropic, gemini, openai_chat, openai_responses
from trimgate.providers.base import Codec

__all__ = ["CODECS", "FORMATS", "PROVIDERS", "REGISTRY", "Registry", "error_body"]


class Registry:
    """Codecs by wire format, in the order given, and the tables read from them."""

    def __init__(self, codecs: Iterable[Codec]) -> None:
        self.codecs: dict[str, Codec] = {}
        for codec in codecs:
            if codec.wire_format in self.codecs:
                raise ValueError(f"two codecs for wire format {codec.wire_format!r}")
            self.codecs[codec.wire_format] = codec
        if not self.codecs:
            raise ValueError("no codecs")
        self.formats: tuple[str, ...] = tuple(self.codecs)
        # a provider's first codec answers for it (base URL, error envelope)
        self._by_provider: dict[str, Codec] = {}
        for codec in self.codecs.values():
            self._by_provider.setdefault(codec.provider, codec)
        self.providers: tuple[str, ...] = tuple(self._by_provider)
        self.default: Codec = next(iter(self.codecs.values()))
        self._exact: dict[tuple[str, str], tuple[str, bool]] = {}
        self._patterns: list[tuple[str, re.Pattern[str], str, bool]] = []
        self._owned: list[tuple[re.Pattern[str], str]] = []
        for codec in self.codecs.values():
            for route in codec.chat_routes:
                found = (codec.wire_format, route.count_tokens)
                if isinstance(route.path, str):
                    key = (route.method, route.path)
                    if key in self._exact:
                        raise ValueError(f"two codecs for {route.method} {route.path}")
                    self._exact[key] = found
                else:
                    self._patterns.append((route.method, route.path, *found))
            if codec.provider_paths is not None:
                self._owned.append((codec.provider_paths, codec.provider))

    def with_codec(self, codec: Codec) -> Registry:
        """A copy with one more line."""
        return Registry([*self.codecs.values(), codec])

    def chat_format(self, method: str, path: str) -> tuple[str | None, bool]:
        """(wire format, count_tokens) of a chat endpoint; (None, False) for any other."""
        found = self._exact.get((method, path))
        if found is not None:
            return found
        for route_method, pattern, wire_format, count_tokens in self._patterns:
            if method == route_method and pattern.match(path):
                return wire_format, count_tokens
        return None, False

    def provider_of(self, path: str) -> str:
        """The provider whose default upstream serves ``path`` when no prefix matches."""
        for pattern, provider in self._owned:
            if pattern.match(path):
                return provider
        return self.default.provider

    def base_urls(self) -> dict[str, str]:
        """Each provider's API URL: the built-in upstreams."""
        return {p: codec.default_base_url for p, codec in self._by_provider.items()}

    def error_body(self, provider: str, status: int, message: str, request_id: str) -> bytes:
        """trimgate's error answer in ``provider``'s envelope (an unknown one: the first line's)."""
        codec = self._by_provider.get(provider, self.default)
        return orjson.dumps(codec.error_body(status, message, request_id))

    def guess_format(self, body: dict[str, Any]) -> str:
        """The format a request body looks like (``trimgate trim`` without ``--format``)."""
        best, score = self.default.wire_format, 0
        for codec in self.codecs.values():
            found = codec.guess(body)
            if found > score:
                best, score = codec.wire_format, found
        return best


REGISTRY = Registry(
    [
        openai_chat.CODEC,
        openai_responses.CODEC,
        anthropic.CODEC,
        gemini.CODEC,
    ]
)
CODECS = REGISTRY.codecs  # wire format -> codec
FORMATS = REGISTRY.formats
PROVIDERS = REGISTRY.providers


def error_body(provider: str, status: int, message: str, request_id: str) -> bytes:
    """The JSON body of trimgate's error answer in ``provider``'s envelope."""
    return REGISTRY.error_body(provider, status, message, request_id)
