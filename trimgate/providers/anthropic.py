"""The Anthropic Messages codec: ``POST /v1/messages`` and ``/v1/messages/count_tokens``.

Wire format ``anthropic``. The history is ``messages`` (roles ``user`` and
``assistant``; a ``system`` role item, which newer API versions accept, is a
system message here); the top-level ``system`` (string or text blocks) and
``tools`` are fixed overhead and pass through untouched.

Pairing rules:

* an assistant ``tool_use`` block (``id``) is answered by a ``tool_result``
  block (``tool_use_id``) in the next user message; Anthropic rejects a
  ``tool_use`` without its result, including a trailing one (there are no
  pending calls: ``pending_calls_ok`` is False);
* server-side blocks (``server_tool_use``, ``web_search_tool_result``,
  ``web_fetch_tool_result``, ``code_execution_tool_result``, the ``bash_`` /
  ``text_editor_code_execution_tool_result`` pair, ``tool_search_tool_result``,
  ``mcp_tool_use`` / ``mcp_tool_result``, ``container_upload``) pair inside
  one message, are never orphans, and count as text by their JSON size. So
  does every unknown block type.

A real user message (a turn start) is a ``user`` item with no ``tool_result``
block, even if it also carries text; trimgate's own breadcrumb (a user item
whose whole text is the breadcrumb) is not one.

Sizes: text blocks count their ``text``; ``tool_use`` its name and the JSON
size of its ``input``; ``tool_result`` its text parts (its images and
documents are media); ``thinking`` its thinking text only (the signature is
opaque, and ``redacted_thinking`` counts nothing): the API drops thinking of
earlier turns from the context, so even that is an overestimate. ``image``
and ``document`` blocks are media.

Encode: ``merge`` puts the breadcrumb in front of the first kept real user
message: a string content becomes ``breadcrumb + "\\n\\n" + content``; a list
gets a new text block ``breadcrumb`` in front, so the user's own blocks (and
their ``cache_control``) stay byte-identical. ``strip`` removes ``tool_use`` /
``tool_result`` blocks by id; thinking blocks stay with what remains and go
only when nothing else would (then a short placeholder text keeps the item
valid, as Anthropic rejects empty content; the core drops such items whole,
so this is a guard, not the common path).

Server-side compaction: an assistant ``compaction`` block makes the API ignore every
block before it. Every message up to the one holding the latest such block (and the
user message answering that message's tool calls, if any) is ``pinned`` (and ``exempt``):
the trim keeps it and it is forwarded untouched, the orphan sweep included. The earlier
messages count 0 tokens and the compaction message counts from its compaction block (its
summary text and tool changes; the encrypted content and signature are opaque).
"""

from __future__ import annotations

import re
from typing import Any, Final

import orjson
from orjson import dumps

from trimgate.errors import DecodeError
from trimgate.history import Conversation, Message, Role, text_message
from trimgate.providers.anthropic_items import (
    _MEDIA,
    _cap,
    _compaction_bytes,
    _is_breadcrumb,
    _merge,
    _pin_head,
    _provider_managed,
    _result_content,
    _strip,
    _system_bytes,
)
from trimgate.providers.base import (
    JSON,
    ChatRoute,
    CodecBase,
    Decoded,
    DecodeOptions,
    StreamUsage,
    Usage,
)
from trimgate.providers.common import json_bytes, rebuild, utf8_len
from trimgate.trimming.estimate import (
    bytes_tokens,
    framed_tokens,
    message_tokens,
    nonascii_utf8_len,
)
from trimgate.trimming.pipeline import TrimPlan

__all__ = ["CODEC", "AnthropicCodec"]


# trimgate's own errors: the Anthropic error ``type`` of each status it answers with
_ERROR_TYPES: Final = {
    400: "invalid_request_error",
    404: "not_found_error",
    413: "request_too_large",
    502: "api_error",
    503: "overloaded_error",
    504: "timeout_error",
}
_GUESS_PARTS: Final = ("tool_use", "tool_result", "thinking")  # content parts only it has


class AnthropicCodec(CodecBase):
    wire_format = "anthropic"
    provider = "anthropic"
    default_base_url = "https://api.anthropic.com"
    chat_routes: tuple[ChatRoute, ...] = (
        ChatRoute("/v1/messages"),
        ChatRoute("/v1/messages/count_tokens", count_tokens=True),
    )
    provider_paths: re.Pattern[str] | None = re.compile(r"/v1/messages(?:/|\Z)")
    default_path = "/v1/messages"
    # message_delta may state only output_tokens
    stream_usage_markers: tuple[bytes, ...] = (b"input_tokens", b"output_tokens")

    def error_body(self, status: int, message: str, request_id: str) -> dict[str, Any]:
        return {
            "type": "error",
            "error": {"type": _ERROR_TYPES.get(status, "api_error"), "message": message},
        }

    def guess(self, body: dict[str, Any]) -> int:
        if "system" in body or (
            isinstance(body.get("max_tokens"), int)
            and "anthropic" in str(body.get("model", "")).lower()
        ):
            return 1
        messages = body.get("messages")
        if isinstance(messages, list):
            for m in messages:
                if isinstance(m, dict) and isinstance(m.get("content"), list):
                    for part in m["content"]:
                        if isinstance(part, dict) and part.get("type") in _GUESS_PARTS:
                            return 1
        return 0

    # -- requests ---------------------------------------------------------------

    def decode(self, body: JSON, *, path: str, options: DecodeOptions) -> Decoded:
        # One long function on purpose: a single pass over the wire messages builds the
        # neutral Messages (compiled), sizing the common blocks inline; a helper per
        # message or block would add a call per message on every request, and the loop
        # carries state across messages (the latest compaction block).
        if not isinstance(body, dict):
            raise DecodeError("body is not an object")
        items = body.get("messages")
        if not isinstance(items, list):
            raise DecodeError("messages is not a list")

        breadcrumb = options.breadcrumb
        media_tokens = options.media_tokens
        user, assistant = Role.USER, Role.ASSISTANT  # locals: the loop is hot
        messages: list[Message] = []
        append = messages.append
        compaction = -1  # position of the message holding the latest compaction block
        for index, item in enumerate(items):
            if type(item) is not dict:
                raise DecodeError("message is not an object")
            wire_role = item.get("role")
            if wire_role == "user":
                role = user
            elif wire_role == "assistant":
                role = assistant
            elif wire_role == "system":
                role = Role.SYSTEM
            else:
                raise DecodeError("message role is not user or assistant")
            content = item.get("content")

            if type(content) is str:
                nbytes = len(content) if content.isascii() else nonascii_utf8_len(content)
                if role is user:
                    is_crumb = content == breadcrumb
                    append(
                        text_message(
                            index,
                            user,
                            framed_tokens(nbytes),
                            nbytes,
                            not is_crumb,
                            0,
                            is_crumb,
                        )
                    )
                else:
                    append(text_message(index, role, framed_tokens(nbytes), nbytes))
                continue
            if type(content) is not list:
                raise DecodeError("message content is not a string or a list")

            nbytes = media = 0
            calls: list[str] = []
            results: list[str] = []
            texts: list[str] = []
            anonymous = False
            has_result = False
            other = False
            for block in content:
                if type(block) is not dict:
                    raise DecodeError("content block is not an object")
                kind = block.get("type")
                if kind == "text":
                    text = block.get("text")
                    if type(text) is str:
                        nbytes += len(text) if text.isascii() else nonascii_utf8_len(text)
                    else:
                        nbytes += json_bytes(block)
                    other = True
                elif kind == "tool_use":
                    name = block.get("name")
                    if isinstance(name, str):
                        nbytes += len(name) if name.isascii() else utf8_len(name)
                    tool_input = block.get("input")
                    if type(tool_input) is dict:
                        try:
                            nbytes += len(dumps(tool_input))
                        except TypeError:  # not from orjson.loads: json_bytes decides
                            nbytes += json_bytes(tool_input)
                    else:
                        nbytes += json_bytes(tool_input)
                    call_id = block.get("id")
                    if isinstance(call_id, str):
                        calls.append(call_id)
                    else:  # not a call the sweep can pair: plain content
                        other = True
                elif kind == "tool_result":
                    has_result = True
                    result_id = block.get("tool_use_id")
                    if isinstance(result_id, str):
                        results.append(result_id)
                    else:
                        anonymous = True
                    inner = block.get("content")
                    if type(inner) is str:  # the common shape, sized inline
                        texts.append(inner)
                        nbytes += len(inner) if inner.isascii() else nonascii_utf8_len(inner)
                    else:
                        b, m = _result_content(inner, texts)
                        nbytes += b
                        media += m
                elif kind == "thinking":
                    thinking = block.get("thinking")
                    if isinstance(thinking, str):
                        nbytes += utf8_len(thinking)
                elif kind == "redacted_thinking":
                    pass  # opaque, encrypted: not text the model reads back
                elif kind in _MEDIA:
                    media += 1
                    other = True
                elif kind == "compaction" and role is assistant:
                    # The API ignores every block before it: the message counts from here
                    nbytes, media, other = _compaction_bytes(block), 0, True
                    compaction = len(messages)
                else:  # server-side tool blocks, search_result, unknown types
                    nbytes += json_bytes(block)
                    other = True

            is_crumb = (
                role is user
                and not has_result
                and len(content) == 1
                and _is_breadcrumb(content, breadcrumb)
            )
            append(
                Message(
                    index,
                    role,
                    message_tokens(nbytes, media, media_tokens),
                    nbytes,
                    role is user and not has_result and not is_crumb,  # turn_start
                    tuple(calls) if calls else (),
                    tuple(results) if results else (),
                    anonymous,
                    tuple(texts) if texts else (),
                    media,
                    other or not (calls or has_result),  # other_content
                    False,  # exempt
                    is_crumb,  # breadcrumb
                )
            )

        if compaction >= 0:
            _pin_head(messages, compaction)

        overhead = bytes_tokens(_system_bytes(body.get("system")))
        tools = body.get("tools")
        if tools is not None:
            overhead += bytes_tokens(json_bytes(tools))

        count_tokens = path.rstrip("/").endswith("/count_tokens")
        model = body.get("model")
        limit = body.get("max_tokens")
        return Decoded(
            body=body,
            conversation=Conversation(
                tuple(messages),
                overhead=overhead,
                pending_calls_ok=False,
                compacted=compaction >= 0,
            ),
            model=model if isinstance(model, str) else None,
            output_limit=(
                limit
                if isinstance(limit, int) and not isinstance(limit, bool) and not count_tokens
                else None
            ),
            stream=body.get("stream") is True and not count_tokens,
            hoistable=False,
            provider_managed=_provider_managed(body.get("context_management")),
        )

    def encode(self, decoded: Decoded, plan: TrimPlan, *, breadcrumb: str) -> dict[str, Any]:
        body = dict(decoded.body)
        body["messages"] = rebuild(
            decoded.body["messages"],
            plan,
            breadcrumb_item=lambda: {"role": "user", "content": breadcrumb},
            merge=lambda item: _merge(item, breadcrumb),
            strip=lambda item, ids, _index: _strip(item, ids),
            cap=_cap,
        )
        return body

    # -- answers ----------------------------------------------------------------

    def prompt_usage(self, body: JSON) -> Usage | None:
        """``usage`` of a Messages answer (prompt: input + cache read + cache creation;
        cached: cache read), or the ``input_tokens`` of a count_tokens answer."""
        if not isinstance(body, dict):
            return None
        usage = body.get("usage")
        if isinstance(usage, dict):
            return _usage_total(usage)
        if body.get("type") == "message_start":  # an event object given whole
            message = body.get("message")
            if isinstance(message, dict) and isinstance(message.get("usage"), dict):
                return _usage_total(message["usage"])
            return None
        return _usage_total(body)  # count_tokens: {"input_tokens": N}

    def stream_prompt_usage(self, data: str) -> Usage | None:
        """The prompt usage of a ``message_start`` event, or of a ``message_delta`` that
        restates it whole (its usage is cumulative)."""
        return self.stream_usages(data)[0]

    def output_usage(self, body: JSON) -> int | None:
        """``usage.output_tokens`` of a Messages answer (or of a message_start event)."""
        if not isinstance(body, dict):
            return None
        usage = body.get("usage")
        if not isinstance(usage, dict) and body.get("type") == "message_start":
            message = body.get("message")
            usage = message.get("usage") if isinstance(message, dict) else None
        return _output(usage)

    def stream_usages(self, data: str) -> StreamUsage:
        """``message_start`` states both; a ``message_delta`` states the final output
        tokens and, when it restates all three prompt counts, the prompt usage."""
        if "input_tokens" not in data and "output_tokens" not in data:
            return None, None
        if "message_start" not in data and "message_delta" not in data:
            return None, None
        try:
            event = orjson.loads(data)
        except orjson.JSONDecodeError:
            return None, None
        if not isinstance(event, dict):
            return None, None
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message")
            usage = message.get("usage") if isinstance(message, dict) else None
            if not isinstance(usage, dict):
                return None, None
            return _usage_total(usage), _output(usage)
        if kind == "message_delta":
            # Each count it states replaces message_start's (the SDKs merge them so): a
            # delta that states all three replaces the usage, a partial one is ignored.
            usage = event.get("usage")
            if not isinstance(usage, dict):
                return None, None
            whole = all(_is_count(usage.get(key)) for key in _PROMPT_KEYS)
            return (_usage_total(usage) if whole else None), _output(usage)
        return None, None


_PROMPT_KEYS = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _output(usage: Any) -> int | None:
    if not isinstance(usage, dict):
        return None
    tokens = usage.get("output_tokens")
    return tokens if _is_count(tokens) else None


def _usage_total(usage: dict[str, Any]) -> Usage | None:
    if not isinstance(usage.get("input_tokens"), int):
        return None
    read = _int(usage.get("cache_read_input_tokens"))
    total = _int(usage.get("input_tokens")) + read + _int(usage.get("cache_creation_input_tokens"))
    return total, read


CODEC = AnthropicCodec()
