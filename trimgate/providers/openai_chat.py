"""The OpenAI Chat Completions codec (``POST /v1/chat/completions``, wire format "openai").

Pairing rules:

* an assistant message's ``tool_calls[].id`` (function and custom tools) is answered by a
  ``role: "tool"`` message with that ``tool_call_id``; OpenAI rejects an assistant
  ``tool_calls`` message whose calls are not all answered by the tool messages after it, so
  pending calls are never allowed (``pending_calls_ok`` False);
* a ``role: "tool"`` message without ``tool_call_id`` carries an anonymous result;
* legacy ``function_call`` on an assistant message at index ``i`` gets the synthetic call id
  ``fn:{i}``; the next ``role: "function"`` message with the same ``name`` answers it (one
  without a matching call is an anonymous result).

A real user message (a turn start) is any ``role: "user"`` message: in this format tool
results travel in their own ``tool`` / ``function`` messages, never in user messages.
trimgate's own breadcrumb (a user message whose whole text is the breadcrumb) is not one.

``system`` and ``developer`` messages are Role.SYSTEM wherever they stand (the leading run
is the system prompt); ``tools``, legacy ``functions`` and a ``json_schema`` response format
are the fixed overhead.

Merge placement: a string ``content`` becomes ``breadcrumb + "\\n\\n" + content``; a list
``content`` gets a new text part ``breadcrumb + "\\n\\n"`` in front, leaving the original
parts (and their ``prompt_cache_breakpoint`` marks) as they were. A user message that
already starts with the breadcrumb is not marked twice.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import orjson

from trimgate.errors import DecodeError
from trimgate.history import (
    Conversation,
    Message,
    Role,
    call_message,
    result_message,
    text_message,
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
from trimgate.providers.common import RawItems, json_bytes, openai_error_body, rebuild, utf8_len
from trimgate.providers.openai_chat_items import (
    _FN_PREFIX,
    _cap,
    _content_size,
    _is_breadcrumb,
    _merge,
    _str_bytes,
    _strip,
    _tool_content,
)
from trimgate.trimming.estimate import (
    bytes_tokens,
    framed_tokens,
    message_tokens,
    nonascii_utf8_len,
)
from trimgate.trimming.pipeline import TrimPlan

if TYPE_CHECKING:
    from trimgate.providers._chatscan import Row

__all__ = ["CODEC", "OpenAIChatCodec", "openai_error_body"]

_scan: Callable[[bytes], tuple[int, int, list[Row]] | None] | None
try:
    from trimgate.providers._chatscan import scan as _scan
except ImportError:  # not built: a pure-Python install parses every body
    _scan = None

# _chatscan's row values
_USER, _ASSISTANT, _TOOL, _PARSE = 0, 1, 2, 4  # 3: system / developer
_HAS_CONTENT, _STRING_CONTENT, _REENCODE = 1, 2, 4
_PLACEHOLDER = text_message(-1, Role.USER, 0, 0)  # where an item of another shape goes

# A tuple, not a set: a message's "role" may be any JSON value, and a list is unhashable.
_SYSTEM_ROLES = ("system", "developer")
_MISSING: Any = object()  # a dict.get default no JSON value can be


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# Output limits by every name OpenAI-compatible servers honour: set to anything (a number,
# a string, a float), the request is not ``uncapped``
_OUTPUT_LIMIT_KEYS: Final = (
    "max_tokens",
    "max_completion_tokens",
    "max_output_tokens",
    "max_new_tokens",
    "n_predict",
    "max_length",
)


class OpenAIChatCodec(CodecBase):
    wire_format = "openai"
    provider = "openai"
    default_base_url = "https://api.openai.com"
    chat_routes: tuple[ChatRoute, ...] = (
        ChatRoute("/v1/chat/completions"),
        ChatRoute("/chat/completions"),
    )
    provider_paths: re.Pattern[str] | None = (
        None  # the registry's first line: every path nobody claims
    )
    default_path = "/v1/chat/completions"
    stream_usage_markers: tuple[bytes, ...] = (b'"prompt_tokens"',)

    def error_body(self, status: int, message: str, request_id: str) -> dict[str, Any]:
        return openai_error_body(status, message, request_id)

    def guess(self, body: dict[str, Any]) -> int:
        return 0  # the default format: what a body nobody recognises is taken for

    # -- requests -----------------------------------------------------------------------

    def decode(self, body: JSON, *, path: str, options: DecodeOptions) -> Decoded:
        # One long function on purpose: a single pass over the wire messages builds the
        # neutral Messages (compiled), sizing the common shapes inline; a helper per
        # message would add a call per message on every request, and the loop carries
        # state across messages (legacy function calls waiting for their answer).
        if not isinstance(body, dict):
            raise DecodeError("body is not an object")
        items = body.get("messages")
        if not isinstance(items, list):
            raise DecodeError("messages is not a list")

        breadcrumb = options.breadcrumb
        media_tokens = options.media_tokens
        user, system = Role.USER, Role.SYSTEM  # locals: the loop is hot
        pending_fn: dict[str, str] = {}  # legacy function name -> synthetic call id
        messages: list[Message] = []
        append = messages.append

        # The common shapes (string content, plain tool calls) are sized inline:
        # ``len(s) if s.isascii() else nonascii_utf8_len(s)`` is utf8_len without the call.
        for index, item in enumerate(items):
            if not isinstance(item, dict):
                raise DecodeError("message is not an object")
            role = item.get("role")

            if role == "user":
                content = item.get("content")
                if type(content) is str:
                    nbytes = len(content) if content.isascii() else nonascii_utf8_len(content)
                    crumb = content == breadcrumb
                    append(
                        text_message(
                            index, user, framed_tokens(nbytes), nbytes, not crumb, 0, crumb
                        )
                    )
                    continue
                nbytes, media, _ = _content_size(content)
                crumb = _is_breadcrumb(content, breadcrumb)
                tokens = message_tokens(nbytes, media, media_tokens)
                append(text_message(index, user, tokens, nbytes, not crumb, media, crumb))

            elif role == "assistant":
                content = item.get("content")
                media = 0
                if type(content) is str:
                    nbytes = len(content) if content.isascii() else nonascii_utf8_len(content)
                    has_content = bool(content)
                elif content is None:
                    nbytes = 0
                    has_content = False
                else:
                    nbytes, media, has_content = _content_size(content)
                tool_calls = item.get("tool_calls")
                # Fields beyond role / content / tool_calls are rare: look them up only
                # when the item has some.
                extra = len(item) > 1 + ("content" in item) + ("tool_calls" in item)
                if extra:
                    refusal = item.get("refusal")
                    if refusal:
                        nbytes += _str_bytes(refusal)
                        has_content = True
                    # Reasoning text that OpenAI-compatible backends echo back (DeepSeek,
                    # OpenRouter, vLLM): it is sent, so it is counted.
                    for key in ("reasoning_content", "reasoning"):
                        reasoning = item.get(key)
                        if reasoning:
                            nbytes += _str_bytes(reasoning)
                    if item.get("audio") is not None:  # a previous audio answer, by id
                        media += 1
                        has_content = True
                if tool_calls is None and not extra:
                    tokens = message_tokens(nbytes, media, media_tokens)
                    append(text_message(index, Role.ASSISTANT, tokens, nbytes, False, media))
                    continue
                calls: list[str] = []
                if tool_calls is not None:
                    if not isinstance(tool_calls, list):
                        raise DecodeError("tool_calls is not a list")
                    for call in tool_calls:
                        if not isinstance(call, dict):
                            raise DecodeError("tool call is not an object")
                        call_id = call.get("id")
                        if not isinstance(call_id, str):
                            raise DecodeError("tool call id is not a string")
                        calls.append(call_id)
                        fn = call.get("function")
                        if fn is None:
                            fn = call.get("custom")
                        if isinstance(fn, dict):
                            name = fn.get("name")
                            if type(name) is str:
                                nbytes += len(name) if name.isascii() else nonascii_utf8_len(name)
                            else:
                                nbytes += _str_bytes(name)
                            args = fn.get("arguments", _MISSING)
                            if args is _MISSING:
                                args = fn.get("input")
                            if type(args) is str:
                                nbytes += len(args) if args.isascii() else nonascii_utf8_len(args)
                            else:
                                nbytes += _str_bytes(args)
                        else:
                            nbytes += json_bytes(call)
                if extra:
                    function_call = item.get("function_call")
                    if isinstance(function_call, dict):
                        call_id = f"{_FN_PREFIX}{index}"
                        calls.append(call_id)
                        name = function_call.get("name")
                        nbytes += _str_bytes(name) + _str_bytes(function_call.get("arguments"))
                        if isinstance(name, str):
                            pending_fn[name] = call_id
                    elif function_call is not None:
                        raise DecodeError("function_call is not an object")
                tokens = message_tokens(nbytes, media, media_tokens)
                if calls:
                    append(call_message(index, tokens, nbytes, tuple(calls), has_content, media))
                else:
                    append(text_message(index, Role.ASSISTANT, tokens, nbytes, False, media))

            elif role == "tool":
                content = item.get("content")
                if type(content) is str:
                    nbytes = len(content) if content.isascii() else nonascii_utf8_len(content)
                    media = 0
                    texts: tuple[str, ...] = (content,)
                else:
                    nbytes, media, texts = _tool_content(content)
                call_id = item.get("tool_call_id")
                tokens = message_tokens(nbytes, media, media_tokens)
                if type(call_id) is str:
                    append(result_message(index, tokens, nbytes, (call_id,), texts, media))
                elif call_id is None:
                    append(result_message(index, tokens, nbytes, (), texts, media, True))
                elif isinstance(call_id, str):
                    append(result_message(index, tokens, nbytes, (call_id,), texts, media))
                else:
                    raise DecodeError("tool_call_id is not a string")

            elif role == "function":
                nbytes, media, texts = _tool_content(item.get("content"))
                name = item.get("name")
                fn_id = pending_fn.pop(name, None) if isinstance(name, str) else None
                tokens = message_tokens(nbytes, media, media_tokens)
                append(
                    result_message(
                        index,
                        tokens,
                        nbytes,
                        (fn_id,) if fn_id is not None else (),
                        texts,
                        media,
                        fn_id is None,
                    )
                )

            elif role in _SYSTEM_ROLES:
                nbytes, media, _ = _content_size(item.get("content"))
                tokens = message_tokens(nbytes, media, media_tokens)
                append(text_message(index, system, tokens, nbytes, False, media))

            else:
                raise DecodeError("unknown message role")
        return self._decoded(body, messages)

    def decode_raw(
        self, raw: bytes, *, path: str, options: DecodeOptions, tool_texts: bool
    ) -> Decoded | None:
        """``decode(orjson.loads(raw))`` without building the parsed history
        (``trimgate/providers/_chatscan.c``): the common shapes are sized from the bytes,
        an item of another shape is parsed and decoded alone. None: parse the body and
        ``decode`` it (not valid JSON, legacy function calls, a top-level oddity).

        The body's ``messages`` is a ``RawItems``: ``encode`` sends the kept items' bytes
        and parses only those it changes. ``tool_texts``: fill the tool results' texts
        (capping needs them; parsing them costs time).
        """
        # One long function on purpose: a single pass over the scanner's rows builds the
        # neutral Messages (compiled); a helper per row would add a call per message on
        # every request, and the loop collects the rows left to ``decode`` as it goes.
        found = _scan(raw) if _scan is not None else None
        if found is None:
            return None
        start, end, rows = found
        try:  # everything but the messages, parsed (and validated) by orjson
            body = orjson.loads(raw[:start] + b"[]" + raw[end:])
        except orjson.JSONDecodeError:
            return None
        if not isinstance(body, dict) or body.get("messages") != []:
            return None
        items = RawItems(raw, rows)
        breadcrumb = options.breadcrumb
        crumb_bytes = utf8_len(breadcrumb)
        messages: list[Message] = []
        append = messages.append
        odd: list[int] = []  # the items of other shapes
        reencode: list[int] = []  # of those, the ones that may give a key twice
        for index, (_, _, role, nbytes, flags, ids) in enumerate(rows):
            tokens = framed_tokens(nbytes)
            if role == _USER:
                crumb = (
                    flags & _STRING_CONTENT != 0
                    and nbytes == crumb_bytes
                    and items[index].get("content") == breadcrumb
                )
                append(text_message(index, Role.USER, tokens, nbytes, not crumb, 0, crumb))
            elif role == _ASSISTANT:
                if ids:
                    has_content = flags & _HAS_CONTENT != 0
                    append(call_message(index, tokens, nbytes, ids, has_content))
                else:
                    append(text_message(index, Role.ASSISTANT, tokens, nbytes))
            elif role == _TOOL:
                texts: tuple[str, ...] = ()
                if tool_texts and flags & _STRING_CONTENT:
                    texts = (items[index]["content"],)
                if ids is None:
                    append(result_message(index, tokens, nbytes, (), texts, 0, True))
                else:
                    append(result_message(index, tokens, nbytes, ids, texts))
            elif role == _PARSE:  # a shape the scanner leaves to decode: below
                odd.append(index)
                append(_PLACEHOLDER)
                if flags & _REENCODE:
                    reencode.append(index)
            else:
                append(text_message(index, Role.SYSTEM, tokens, nbytes))
        if odd:  # parsed, and decoded in one go
            parsed = [items[index] for index in odd]
            for item in parsed:
                wire_role = item.get("role")
                if wire_role == "function" or (
                    wire_role == "assistant" and item.get("function_call") is not None
                ):
                    return None  # legacy function calls pair across items: parse them all
            try:
                alone = self.decode({"messages": parsed}, path=path, options=options)
            except DecodeError:
                return None  # the parse of the whole body says why
            for index, message in zip(odd, alone.conversation.messages, strict=True):
                message.index = index  # made just now, seen by nobody else
                messages[index] = message
            items.reencode = frozenset(reencode)
        body["messages"] = items
        return self._decoded(body, messages)

    def _decoded(self, body: dict[str, Any], messages: list[Message]) -> Decoded:
        overhead = 0
        for key in ("tools", "functions"):
            value = body.get(key)
            if value:
                overhead += bytes_tokens(json_bytes(value))
        response_format = body.get("response_format")
        if isinstance(response_format, dict) and "json_schema" in response_format:
            overhead += bytes_tokens(json_bytes(response_format["json_schema"]))

        max_completion = body.get("max_completion_tokens")
        if not _is_int(max_completion):
            max_completion = body.get("max_tokens")
        model = body.get("model")
        return Decoded(
            body=body,
            conversation=Conversation(
                messages=tuple(messages), overhead=overhead, pending_calls_ok=False
            ),
            model=model if isinstance(model, str) else None,
            output_limit=max_completion if _is_int(max_completion) else None,
            stream=body.get("stream") is True,
            hoistable=True,
            uncapped=all(body.get(key) is None for key in _OUTPUT_LIMIT_KEYS),
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

    # -- answers ------------------------------------------------------------------------

    def prompt_usage(self, body: JSON) -> Usage | None:
        """``usage.prompt_tokens`` and ``usage.prompt_tokens_details.cached_tokens``."""
        if not isinstance(body, dict):
            return None
        usage = body.get("usage")
        if not isinstance(usage, dict):
            return None
        tokens = usage.get("prompt_tokens")
        if type(tokens) is not int:
            return None
        details = usage.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if type(details) is dict else None
        return tokens, cached if type(cached) is int else 0

    def stream_prompt_usage(self, data: str) -> Usage | None:
        return self.stream_usages(data)[0]

    def output_usage(self, body: JSON) -> int | None:
        """``usage.completion_tokens`` (reasoning tokens included)."""
        if not isinstance(body, dict):
            return None
        usage = body.get("usage")
        if not isinstance(usage, dict):
            return None
        tokens = usage.get("completion_tokens")
        return tokens if type(tokens) is int else None

    def stream_usages(self, data: str) -> StreamUsage:
        # Every chunk carries ``"usage": null`` when include_usage is on; only the final
        # one (``"choices": []``) has the counts.
        if '"prompt_tokens"' not in data:
            return None, None
        try:
            event = orjson.loads(data)
        except orjson.JSONDecodeError:
            return None, None
        return self.prompt_usage(event), self.output_usage(event)


CODEC = OpenAIChatCodec()
