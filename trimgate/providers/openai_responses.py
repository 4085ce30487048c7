"""The OpenAI Responses codec (``POST /v1/responses``, wire format ``openai-responses``).

History: ``input`` when it is a list (a plain string, or no input, is forwarded
untouched with ``Decoded.skip``). System field: ``instructions`` (overhead, with
``tools`` and ``text``); ``system`` / ``developer`` messages are Role.SYSTEM.

Every input item is one ``Message``:

* messages (``{"role", "content"}``, with or without ``"type": "message"``);
  a real user message (a turn start) is any ``role: user`` message, because
  Responses carries tool results in their own items, never in user messages.
  A user message whose whole text is the breadcrumb is trimgate's own marker.
* pairing rules: a client-side call item (``function_call``, ``custom_tool_call``,
  ``computer_call``, ``local_shell_call``, ``shell_call``, ``apply_patch_call``)
  makes the call ``call_id``; an item whose type ends in ``_output`` answers the
  call named by its ``call_id`` (``local_shell_call_output`` names the call by
  ``id``: the call's ``call_id``, or the call item's own ``id``). Every call
  needs its output in the same request (no pending calls) and every output
  needs its call earlier in ``input``.
* other items carrying a ``call_id`` whose type ends in ``_call`` (or
  ``program``) are exempt calls: their output pairs with them, but the sweep
  never removes the call itself, since it may be server-executed.
* server-side tool traffic (``web_search_call``, ``file_search_call``,
  ``code_interpreter_call``, ``image_generation_call``, ``mcp_*``) and
  ``item_reference`` items are exempt, never orphans.
* with ``previous_response_id`` or ``conversation`` set, an output whose call is
  not in ``input`` answers a call stored server-side: it is exempt.
* a ``reasoning`` item directly before client-side calls belongs to them (the API
  rejects a reasoning item without its following item): it is modelled as making
  the same calls with no other content, so an orphan sweep that removes all of
  those calls removes the reasoning item too. It is never a turn start.

Sizes: text parts, refusals, reasoning summaries, call names, arguments and
inputs, tool-output text. Images, files, audio, screenshots and generated
images are media. Unknown items and parts count their compact JSON size.
Encrypted reasoning content is not counted (opaque, like base64 media).

Server-side compaction: the latest ``compaction`` item (from ``/responses/compact`` or
``context_management``) is ``pinned``: kept like a leading system item whatever the
budget. The items before it are superseded by it: the trim drops them first, as one
unit, and counts them until then. A compaction item counts its JSON size.
"""

from __future__ import annotations

import re
from typing import Any, Final

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
from trimgate.providers.common import json_bytes, openai_error_body, rebuild, utf8_len
from trimgate.providers.openai_responses_items import (
    _cap,
    _content_size,
    _is_crumb,
    _kind,
    _merge,
    _parts_size,
    _provider_managed,
    _reasoning,
    _str_bytes,
    _strip,
)
from trimgate.trimming.estimate import (
    bytes_tokens,
    framed_tokens,
    message_tokens,
    nonascii_utf8_len,
)
from trimgate.trimming.pipeline import TrimPlan

__all__ = ["CODEC", "OpenAIResponsesCodec"]

_CLIENT_CALLS: Final = frozenset(
    {
        "function_call",
        "custom_tool_call",
        "computer_call",
        "local_shell_call",
        "shell_call",
        "apply_patch_call",
    }
)
_SERVER_SIDE: Final = frozenset(
    {
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "image_generation_call",
        "mcp_list_tools",
        "mcp_call",
        "mcp_approval_request",
        "mcp_approval_response",
        "item_reference",
    }
)
_SYSTEM_ROLES: Final = frozenset({"system", "developer"})


class OpenAIResponsesCodec(CodecBase):
    wire_format = "openai-responses"
    provider = "openai"
    default_base_url = "https://api.openai.com"
    chat_routes: tuple[ChatRoute, ...] = (ChatRoute("/v1/responses"), ChatRoute("/responses"))
    provider_paths: re.Pattern[str] | None = None  # OpenAI's: the registry's first line serves them
    default_path = "/v1/responses"
    stream_usage_markers: tuple[bytes, ...] = (b'"input_tokens"',)

    def error_body(self, status: int, message: str, request_id: str) -> dict[str, Any]:
        return openai_error_body(status, message, request_id)

    def guess(self, body: dict[str, Any]) -> int:
        return 2 if "input" in body and "messages" not in body else 0

    def decode(self, body: JSON, *, path: str, options: DecodeOptions) -> Decoded:
        # One long function on purpose: a single pass over the input items builds the
        # neutral Messages (compiled), sizing the common items inline; a helper per item
        # would add a call per message on every request, and the loop carries state
        # across items (the open reasoning item, the calls seen, the latest compaction).
        if type(body) is not dict:
            raise DecodeError("body is not an object")
        model = body.get("model")
        limit = body.get("max_output_tokens")
        output_limit = limit if type(limit) is int else None
        stream = body.get("stream") is True
        items = body.get("input")

        overhead = 0
        instructions = body.get("instructions")
        if instructions is not None:
            overhead += bytes_tokens(
                utf8_len(instructions) if type(instructions) is str else json_bytes(instructions)
            )
        tools = body.get("tools")
        if tools:
            overhead += bytes_tokens(json_bytes(tools))
        text_config = body.get("text")
        if type(text_config) is dict and text_config.get("format") is not None:
            overhead += bytes_tokens(json_bytes(text_config["format"]))

        model_name = model if type(model) is str else None
        if items is None or type(items) is str:
            reason = "input is not a list" if items is not None else "no input"
            return Decoded(
                body,
                Conversation((), overhead),
                model_name,
                output_limit,
                stream,
                hoistable=True,
                skip=reason,
            )
        if type(items) is not list:
            raise DecodeError("input is not a list")

        crumb = options.breadcrumb
        media_tokens = options.media_tokens
        stored = bool(body.get("previous_response_id") or body.get("conversation"))
        messages: list[Message] = []
        append = messages.append
        user = Role.USER  # locals: the loop is hot
        seen_calls: set[str] = set()
        shell_ids: dict[str, str] = {}  # local_shell_call id -> call_id
        # A reasoning item still followed only by client calls: its position in
        # ``messages`` (a placeholder until it closes), wire index and size.
        reasoning_at = reasoning_index = reasoning_bytes = -1
        reasoning_calls: list[str] = []
        compaction = -1  # the latest compaction item (messages are one per item)

        for index, item in enumerate(items):
            if type(item) is not dict:
                raise DecodeError("input item is not an object")
            kind = item.get("type")
            if type(kind) is not str:
                kind = ""
            message: Message

            if kind in _CLIENT_CALLS:
                call_id = item.get("call_id")
                if kind == "custom_tool_call":
                    nbytes = _str_bytes(item, "name") + _str_bytes(item, "input")
                elif kind == "function_call":
                    name = item.get("name")
                    arguments = item.get("arguments")
                    if type(name) is str and type(arguments) is str:  # sized inline
                        nbytes = (len(name) if name.isascii() else utf8_len(name)) + (
                            len(arguments) if arguments.isascii() else nonascii_utf8_len(arguments)
                        )
                    else:
                        nbytes = _str_bytes(item, "name") + _str_bytes(item, "arguments")
                elif kind == "apply_patch_call":
                    nbytes = _str_bytes(item, "operation")
                else:
                    nbytes = _str_bytes(item, "action")
                if type(call_id) is str:
                    seen_calls.add(call_id)
                    if kind == "local_shell_call":
                        own = item.get("id")
                        if type(own) is str:
                            shell_ids[own] = call_id
                    append(call_message(index, framed_tokens(nbytes), nbytes, (call_id,)))
                    if reasoning_at >= 0:
                        reasoning_calls.append(call_id)
                    continue
                message = Message(  # no id to pair by: exempt, left to the provider
                    index, Role.ASSISTANT, framed_tokens(nbytes), nbytes, exempt=True
                )

            elif kind.endswith("_output"):
                call_id = item.get("call_id")
                if type(call_id) is not str and kind == "local_shell_call_output":
                    own = item.get("id")
                    if type(own) is str:
                        call_id = shell_ids.get(own, own)
                output = item.get("output")
                if type(output) is str:  # the common shape, sized inline
                    nbytes = len(output) if output.isascii() else nonascii_utf8_len(output)
                    media = 0
                    texts: list[str] | tuple[str, ...] = (output,)
                else:
                    texts = []
                    nbytes, media = _content_size(output, texts)
                if kind == "tool_search_output":
                    nbytes += _str_bytes(item, "tools")
                elif kind == "program_output":
                    nbytes += _str_bytes(item, "result")
                tokens = message_tokens(nbytes, media, media_tokens)
                if type(call_id) is str:
                    message = result_message(
                        index,
                        tokens,
                        nbytes,
                        (call_id,),
                        tuple(texts),
                        media,
                        False,
                        stored and call_id not in seen_calls,  # exempt
                    )
                else:
                    message = Message(index, Role.TOOL, tokens, nbytes, media=media, exempt=True)

            elif kind in ("", "message"):
                role = _kind(item, "role")
                if not role and not kind:  # an item_reference without its type
                    nbytes = json_bytes(item)
                    message = Message(
                        index, Role.ASSISTANT, framed_tokens(nbytes), nbytes, exempt=True
                    )
                else:
                    content = item.get("content")
                    if type(content) is str:  # the common shape, sized inline
                        nbytes = len(content) if content.isascii() else nonascii_utf8_len(content)
                        media = 0
                        ours = content == crumb
                    else:
                        nbytes, media = _content_size(content)
                        ours = role == "user" and _is_crumb(content, crumb)
                    tokens = message_tokens(nbytes, media, media_tokens)
                    if role == "user":
                        message = text_message(index, user, tokens, nbytes, not ours, media, ours)
                    else:
                        message = text_message(
                            index,
                            Role.SYSTEM if role in _SYSTEM_ROLES else Role.ASSISTANT,
                            tokens,
                            nbytes,
                            False,
                            media,
                        )

            elif kind == "reasoning":
                if reasoning_at >= 0:
                    messages[reasoning_at] = _reasoning(
                        reasoning_index, reasoning_bytes, reasoning_calls
                    )
                summary = item.get("summary")
                nbytes = _parts_size(summary)[0] if type(summary) is list else 0
                content = item.get("content")
                if type(content) is list:
                    nbytes += _parts_size(content)[0]
                reasoning_at, reasoning_index, reasoning_bytes = len(messages), index, nbytes
                reasoning_calls = []
                messages.append(_PLACEHOLDER)
                continue

            elif kind == "compaction":  # sized by its JSON: the summary is opaque
                nbytes = json_bytes(item)
                message = text_message(index, Role.ASSISTANT, framed_tokens(nbytes), nbytes)
                compaction = index

            else:
                call_id = item.get("call_id")
                media = 0
                if kind == "image_generation_call":
                    nbytes = _str_bytes(item, "revised_prompt")
                    media = 1
                elif kind == "mcp_call":
                    nbytes = (
                        _str_bytes(item, "name")
                        + _str_bytes(item, "arguments")
                        + _str_bytes(item, "output")
                    )
                else:
                    nbytes = json_bytes(item)
                server = kind in _SERVER_SIDE
                calls: tuple[str, ...] = ()
                if type(call_id) is str and (kind == "program" or kind.endswith("_call")):
                    calls = (call_id,)  # pairs with its output, never swept itself
                    seen_calls.add(call_id)
                exempt_call = bool(calls)
                message = Message(
                    index,
                    Role.SYSTEM if _kind(item, "role") in _SYSTEM_ROLES else Role.ASSISTANT,
                    message_tokens(nbytes, media, media_tokens),
                    nbytes,
                    calls=calls,
                    media=media,
                    other_content=not (server or exempt_call),
                    exempt=server or exempt_call,
                )

            if reasoning_at >= 0:
                messages[reasoning_at] = _reasoning(
                    reasoning_index, reasoning_bytes, reasoning_calls
                )
                reasoning_at = -1
            append(message)

        if reasoning_at >= 0:
            messages[reasoning_at] = _reasoning(reasoning_index, reasoning_bytes, reasoning_calls)
        if compaction >= 0:  # kept like a leading system item; the items before it go first
            messages[compaction] = messages[compaction].replace(pinned=True, exempt=True)
        conversation = Conversation(
            tuple(messages), overhead, pending_calls_ok=False, compacted=compaction >= 0
        )
        return Decoded(
            body,
            conversation,
            model_name,
            output_limit,
            stream,
            hoistable=True,
            provider_managed=_provider_managed(body),
            uncapped=limit is None,
        )

    def encode(self, decoded: Decoded, plan: TrimPlan, *, breadcrumb: str) -> dict[str, Any]:
        out = dict(decoded.body)
        if decoded.skip is not None:
            return out

        def crumb_item() -> dict[str, Any]:
            return {"role": "user", "content": breadcrumb}

        def merge(item: dict[str, Any]) -> dict[str, Any]:
            return _merge(item, breadcrumb)

        out["input"] = rebuild(
            decoded.body["input"],
            plan,
            breadcrumb_item=crumb_item,
            merge=merge,
            strip=lambda item, ids, _index: _strip(item, ids),
            cap=_cap,
        )
        return out

    def prompt_usage(self, body: JSON) -> Usage | None:
        """``usage.input_tokens`` and ``usage.input_tokens_details.cached_tokens``."""
        if type(body) is not dict:
            return None
        return _input_tokens(body.get("usage"))

    def stream_prompt_usage(self, data: str) -> Usage | None:
        return self.stream_usages(data)[0]

    def output_usage(self, body: JSON) -> int | None:
        """``usage.output_tokens`` (reasoning tokens included)."""
        if type(body) is not dict:
            return None
        return _output_tokens(body.get("usage"))

    def stream_usages(self, data: str) -> StreamUsage:
        # response.completed (and response.incomplete) carry the final usage.
        if '"input_tokens"' not in data or '"response.' not in data:
            return None, None
        try:
            event = orjson.loads(data)
        except orjson.JSONDecodeError:
            return None, None
        if type(event) is not dict or event.get("type") not in _USAGE_EVENTS:
            return None, None
        response = event.get("response")
        if type(response) is not dict:
            return None, None
        usage = response.get("usage")
        return _input_tokens(usage), _output_tokens(usage)


# A tuple, not a set: an event's "type" may be any JSON value, and a list is unhashable.
_USAGE_EVENTS: Final = ("response.completed", "response.incomplete")


def _input_tokens(usage: Any) -> Usage | None:
    if type(usage) is not dict:
        return None
    tokens = usage.get("input_tokens")
    if type(tokens) is not int:
        return None
    details = usage.get("input_tokens_details")
    cached = details.get("cached_tokens") if type(details) is dict else None
    return tokens, cached if type(cached) is int else 0


def _output_tokens(usage: Any) -> int | None:
    if type(usage) is not dict:
        return None
    tokens = usage.get("output_tokens")
    return tokens if type(tokens) is int else None


_PLACEHOLDER: Final = Message(index=-1, role=Role.ASSISTANT, tokens=0)


CODEC = OpenAIResponsesCodec()
