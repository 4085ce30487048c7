"""The codec table: one line per wire format."""

from __future__ import annotations

from collections.abc import Mapping

from trimgate.providers import anthropic, gemini, openai_chat, openai_responses
from trimgate.providers.base import Codec

CODECS: Mapping[str, Codec] = {
    "openai": openai_chat.CODEC,
    "openai-responses": openai_responses.CODEC,
    "anthropic": anthropic.CODEC,
    "gemini": gemini.CODEC,
}
