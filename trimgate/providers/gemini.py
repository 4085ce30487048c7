"""Codec for Gemini ``generateContent`` / ``streamGenerateContent`` / ``countTokens``.

Wire shape: the history is ``contents``, a list of ``{"role": "user"|"model", "parts": [...]}``
(a missing role means ``user``; the older ``function`` role carries function responses).
``systemInstruction`` and ``tools`` are fixed overhead. camelCase and snake_case field
names are both accepted, as the REST API does. A ``countTokens`` body may wrap the request
in ``generateContentRequest``; it is decoded there and encoded back into the same place.

Pairing rules: a ``functionCall`` part is answered by a ``functionResponse`` part with the
same ``id`` when the response has one; otherwise by name and order: every content that
makes calls opens them (synthetic ids per call index, name and occurrence for calls without
an id), and each response without an id answers the first still-open call of that name.
A response that answers no open call gets an id of its own that no call carries, so the
orphan sweep removes it. Calls may not stay pending (``pending_calls_ok`` is False).
``executableCode`` / ``codeExecutionResult`` are server-side: plain text, never orphans.

A real user message (turn start) is a ``user`` content without any ``functionResponse``
part that is not trimgate's own breadcrumb (a user content whose text parts join to
exactly the breadcrumb text).

Cappable tool results: a ``functionResponse`` whose ``response`` object has exactly one
field and that field is a string (``{"result": "..."}``, ``{"output": "..."}``, ...): that
string is capped. Any other response shape is counted by its JSON size but never capped.

Merge placement: the breadcrumb goes in a new text part ``breadcrumb + "\\n\\n"`` in front of
the first kept real user content's parts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

import orjson
from orjson import dumps

from trimgate.errors import DecodeError
from trimgate.history import Conversation, Message, Role
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
from trimgate.providers.gemini_items import (
    _CALL,
    _CODE,
    _CODE_RESULT,
    _KINDS,
    _MEDIA,
    _META,
    _RESPONSE,
    _TEXT,
    _UNKNOWN,
    _cap,
    _inner_key,
    _part_ids,
    _str,
    _system_size,
)
from trimgate.trimming.estimate import bytes_tokens, message_tokens, nonascii_utf8_len
from trimgate.trimming.pipeline import TrimPlan

__all__ = ["CODEC", "GeminiCodec", "GeminiDecoded"]

_PATH: Final = re.compile(r"(?:^|/)(?:models|tunedModels)/([^/:]+):([A-Za-z]+)$")
_STREAM_METHOD: Final = "streamGenerateContent"
_SYNTHETIC: Final = "\x1egemini:"  # prefix of ids trimgate makes up; never on the wire


@dataclass(frozen=True, slots=True)
class GeminiDecoded(Decoded):
    # Where ``contents`` lives: None (the body itself) or the countTokens wrapper key.
    inner_key: str | None = None


def _get(mapping: dict[str, Any], camel: str, snake: str) -> Any:
    value = mapping.get(camel)
    return mapping.get(snake) if value is None else value


def _scan(contents: list[Any], options: DecodeOptions) -> list[Message]:
    """One pass over ``contents``: one neutral message per content.

    The hot loop of a large request: call ids, result ids and capped texts are collected
    in lists made once and emptied after each content that used them (most contents have
    no call or response part), and a part that is nothing but one text skips the field
    dispatch. Each call / response field whose value is an object gets an id, in part
    order (``_part_ids`` relies on that order).
    """
    # One long function on purpose: a single pass over the contents builds the neutral
    # Messages (compiled); a helper per content or part would add a call per message on
    # every request, and the loop carries state across contents (the calls awaiting
    # their responses, the id lists reused from one content to the next).
    messages: list[Message] = []
    crumb = options.breadcrumb
    crumb_len = utf8_len(crumb)
    media_tokens = options.media_tokens
    user, assistant, tool_role = Role.USER, Role.ASSISTANT, Role.TOOL  # locals: the loop is hot
    # Calls of the latest content that made calls, by name, not yet answered.
    open_calls: dict[str, list[str]] = {}
    orphans = 0
    # One content's calls, results, capped texts, and occurrences of call names
    # without an id; emptied after each content.
    calls: list[str] = []
    results: list[str] = []
    texts: list[str] = []
    occurrences: dict[str, int] = {}

    for index, item in enumerate(contents):
        if type(item) is not dict:
            raise DecodeError("content is not an object")
        raw_parts = item.get("parts")
        if type(raw_parts) is list:
            parts: list[Any] = raw_parts
        elif raw_parts is None:
            parts = []
        else:
            raise DecodeError("parts is not a list")

        nbytes = 0
        media = 0
        other = False
        only_text = True
        made: dict[str, list[str]] | None = None

        for part in parts:
            if type(part) is not dict:
                raise DecodeError("part is not an object")
            if len(part) == 1:  # fast path: a plain text part
                text = part.get("text")
                if type(text) is str:
                    if text:
                        nbytes += len(text) if text.isascii() else nonascii_utf8_len(text)
                        other = True
                    continue
            for key, value in part.items():
                kind = _KINDS.get(key, _UNKNOWN)
                if kind == _TEXT:
                    if type(value) is str:
                        if value:
                            nbytes += utf8_len(value)
                            other = True
                    elif value is not None:
                        nbytes += json_bytes(value)
                        other = True
                elif kind == _META:
                    continue
                elif kind == _CALL:
                    only_text = False
                    if type(value) is not dict:
                        nbytes += json_bytes(value)
                        other = True
                        continue
                    name = value.get("name")
                    args = value.get("args")
                    # Most calls hold a name and args only: then there is no id to look up.
                    more = len(value) > 2 or name is None or args is None
                    if type(name) is not str:
                        name = ""
                    nbytes += len(name) if name.isascii() else utf8_len(name)
                    if type(args) is dict:
                        try:
                            nbytes += len(dumps(args))
                        except TypeError:  # not from orjson.loads: json_bytes decides
                            nbytes += json_bytes(args)
                    elif args is not None:
                        nbytes += json_bytes(args)
                    call_id = value.get("id") if more else None
                    if type(call_id) is not str or not call_id:
                        n = occurrences[name] = occurrences.get(name, 0) + 1
                        call_id = f"{_SYNTHETIC}{index}:{name}:{n}"
                    if made is None:
                        made = {name: [call_id]}
                    else:
                        named = made.get(name)
                        if named is None:
                            made[name] = [call_id]
                        else:
                            named.append(call_id)
                    calls.append(call_id)
                elif kind == _RESPONSE:
                    only_text = False
                    if type(value) is not dict:
                        nbytes += json_bytes(value)
                        other = True
                        continue
                    name = value.get("name")
                    response = value.get("response")
                    # Most responses hold a name and the response only: no parts, no id.
                    more = len(value) > 2 or name is None or response is None
                    if type(name) is not str:
                        name = ""
                    nbytes += len(name) if name.isascii() else utf8_len(name)
                    capped = False  # cappable (as in _response_text): one string field
                    if type(response) is dict and len(response) == 1:
                        for field_name, text in response.items():
                            if type(text) is str:
                                nbytes += utf8_len(field_name) + (
                                    len(text) if text.isascii() else nonascii_utf8_len(text)
                                )
                                texts.append(text)
                                capped = True
                    if not capped and response is not None:
                        nbytes += json_bytes(response)
                    extra = value.get("parts") if more else None  # multimodal response
                    if type(extra) is list:
                        for sub in extra:
                            if type(sub) is dict and any(_KINDS.get(k) == _MEDIA for k in sub):
                                media += 1
                            else:
                                nbytes += json_bytes(sub)
                    result_id = value.get("id") if more else None
                    pending = open_calls.get(name)
                    if type(result_id) is str and result_id:
                        if pending and result_id in pending:
                            pending.remove(result_id)
                    elif pending:
                        result_id = pending.pop(0)
                    else:
                        orphans += 1
                        result_id = f"{_SYNTHETIC}orphan:{index}:{orphans}"
                    results.append(result_id)
                elif kind == _MEDIA:
                    only_text = False
                    media += 1
                    other = True
                elif kind in (_CODE, _CODE_RESULT):
                    only_text = False
                    other = True
                    inner = "code" if kind == _CODE else "output"
                    if type(value) is dict and type(value.get(inner)) is str:
                        nbytes += utf8_len(value[inner])
                    else:
                        nbytes += json_bytes(value)
                else:  # unknown part field: its JSON size, so that it is not free
                    only_text = False
                    other = True
                    nbytes += utf8_len(key) + json_bytes(value)

        if made is not None:  # a content that makes calls opens exactly these
            open_calls = made

        role_name = item.get("role")
        if role_name is None:
            role = user
        elif isinstance(role_name, str):
            if role_name == "user" or role_name == "":
                role = user
            elif role_name == "function" or role_name == "tool":
                role = tool_role
            else:  # "model", or not a role the API knows: never a turn start
                role = assistant
        else:
            role = assistant

        breadcrumb = (
            role is user
            and only_text
            and nbytes == crumb_len
            and "".join(_str(p.get("text")) for p in parts) == crumb
        )
        tool = bool(calls or results)
        if tool:
            call_ids, result_ids, result_texts = tuple(calls), tuple(results), tuple(texts)
            calls.clear()
            results.clear()
            texts.clear()
            occurrences.clear()
        else:
            call_ids = result_ids = result_texts = ()
        messages.append(
            Message(
                index,
                role,
                message_tokens(nbytes, media, media_tokens),
                nbytes,
                role is user and not result_ids and not breadcrumb,  # turn_start
                call_ids,
                result_ids,
                False,  # anonymous_results: a response always gets an id
                result_texts,
                media,
                other or not tool,  # other_content
                False,  # exempt
                breadcrumb,
            )
        )
    return messages


# The model methods it examines: /v1beta/models/{m}:generateContent, /v1/models/{m}:...,
# tuned models, alpha and numbered versions.
_METHOD: Final = r"^/v1(?:beta|alpha)?\d*/(?:models|tunedModels)/[^/:]+:"
# Paths of the Gemini API (uploads included) when no upstream prefix decides
_ANY_PATH: Final = re.compile(
    r"^/(?:upload/)?v1(?:beta|alpha)\d*/|^/upload/v1/|^/v1/(?:models|tunedModels)/[^/:]+:"
)
# trimgate's own errors: the google.rpc status of each HTTP status it answers with
_ERROR_STATUS: Final = {
    400: "INVALID_ARGUMENT",
    404: "NOT_FOUND",
    413: "INVALID_ARGUMENT",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


class GeminiCodec(CodecBase):
    wire_format = "gemini"
    provider = "gemini"
    default_base_url = "https://generativelanguage.googleapis.com"
    chat_routes: tuple[ChatRoute, ...] = (
        ChatRoute(re.compile(_METHOD + r"(?:generateContent|streamGenerateContent)$")),
        ChatRoute(re.compile(_METHOD + r"countTokens$"), count_tokens=True),
    )
    provider_paths: re.Pattern[str] | None = _ANY_PATH
    default_path = "/v1beta/models/{model}:generateContent"
    stream_usage_markers: tuple[bytes, ...] = (b"promptTokenCount", b"prompt_token_count")

    def error_body(self, status: int, message: str, request_id: str) -> dict[str, Any]:
        return {
            "error": {
                "code": status,
                "message": message,
                "status": _ERROR_STATUS.get(status, "INTERNAL"),
            }
        }

    def guess(self, body: dict[str, Any]) -> int:
        return 3 if "contents" in body or "generateContentRequest" in body else 0

    def decode(self, body: JSON, *, path: str, options: DecodeOptions) -> GeminiDecoded:
        if type(body) is not dict:
            raise DecodeError("body is not an object")
        match = _PATH.search(path)
        model = match.group(1) if match else None
        stream = match is not None and match.group(2) == _STREAM_METHOD

        inner_key = None if "contents" in body else _inner_key(body)
        request: dict[str, Any] = body[inner_key] if inner_key else body
        contents = request.get("contents")
        if contents is None:
            raise DecodeError("contents is missing")
        if type(contents) is not list:
            raise DecodeError("contents is not a list")

        messages = _scan(contents, options)

        sys_bytes, sys_media = _system_size(
            _get(request, "systemInstruction", "system_instruction")
        )
        overhead = bytes_tokens(sys_bytes) + sys_media * options.media_tokens
        tools = request.get("tools")
        if tools is not None:
            overhead += bytes_tokens(json_bytes(tools))

        output_limit: int | None = None
        config = _get(request, "generationConfig", "generation_config")
        if type(config) is dict:
            limit = _get(config, "maxOutputTokens", "max_output_tokens")
            if type(limit) is int:
                output_limit = limit

        return GeminiDecoded(
            body=body,
            conversation=Conversation(tuple(messages), overhead=overhead, pending_calls_ok=False),
            model=model,
            output_limit=output_limit,
            stream=stream,
            hoistable=False,
            inner_key=inner_key,
        )

    def encode(self, decoded: Decoded, plan: TrimPlan, *, breadcrumb: str) -> dict[str, Any]:
        body = decoded.body
        if isinstance(decoded, GeminiDecoded):
            inner_key = decoded.inner_key
        else:  # a plain Decoded: find the wrapper again (same rule, same result)
            inner_key = None if "contents" in body else _inner_key(body)
        request: dict[str, Any] = body[inner_key] if inner_key else body
        contents: list[Any] = request["contents"]
        # The message of each wire index, for the ids of its parts (only when stripping).
        by_index = {m.index: m for m in decoded.conversation.messages} if plan.strip else {}

        def strip(item: Any, ids: frozenset[str], index: int) -> Any:
            parts = item.get("parts") or []
            drop = {pos for pos, pid in _part_ids(parts, by_index[index]) if pid in ids}
            new = dict(item)
            new["parts"] = [p for pos, p in enumerate(parts) if pos not in drop]
            return new

        def merge(item: Any) -> Any:
            new = dict(item)
            new["parts"] = [{"text": breadcrumb + "\n\n"}, *(item.get("parts") or ())]
            return new

        def breadcrumb_item() -> Any:
            return {"role": "user", "parts": [{"text": breadcrumb}]}

        out_contents = rebuild(
            contents, plan, breadcrumb_item=breadcrumb_item, merge=merge, strip=strip, cap=_cap
        )
        new_request = dict(request)
        new_request["contents"] = out_contents
        if inner_key is None:
            return new_request
        out = dict(body)
        out[inner_key] = new_request
        return out

    def prompt_usage(self, body: JSON) -> Usage | None:
        """``usageMetadata.promptTokenCount`` (cached content included) and
        ``cachedContentTokenCount``; or a countTokens answer's ``totalTokens``."""
        if type(body) is list:  # streamGenerateContent without alt=sse: a JSON array
            for chunk in reversed(body):
                found = self.prompt_usage(chunk)
                if found is not None:
                    return found
            return None
        if type(body) is not dict:
            return None
        meta = _get(body, "usageMetadata", "usage_metadata")
        if type(meta) is dict:
            prompt = _get(meta, "promptTokenCount", "prompt_token_count")
            if type(prompt) is int:
                cached = _get(meta, "cachedContentTokenCount", "cached_content_token_count")
                return prompt, cached if type(cached) is int else 0
        total = _get(body, "totalTokens", "total_tokens")  # countTokens answer
        if type(total) is int:
            cached = _get(body, "cachedContentTokenCount", "cached_content_token_count")
            return total, cached if type(cached) is int else 0
        return None

    def stream_prompt_usage(self, data: str) -> Usage | None:
        return self.stream_usages(data)[0]

    def output_usage(self, body: JSON) -> int | None:
        """``usageMetadata.candidatesTokenCount`` plus ``thoughtsTokenCount`` (the
        thinking tokens, which the other providers count as output too)."""
        if type(body) is list:  # streamGenerateContent without alt=sse: a JSON array
            for chunk in reversed(body):
                found = self.output_usage(chunk)
                if found is not None:
                    return found
            return None
        if type(body) is not dict:
            return None
        meta = _get(body, "usageMetadata", "usage_metadata")
        if type(meta) is not dict:
            return None
        candidates = _get(meta, "candidatesTokenCount", "candidates_token_count")
        if type(candidates) is not int:
            return None
        thoughts = _get(meta, "thoughtsTokenCount", "thoughts_token_count")
        return candidates + (thoughts if type(thoughts) is int else 0)

    def stream_usages(self, data: str) -> StreamUsage:
        if "promptTokenCount" not in data and "prompt_token_count" not in data:
            return None, None
        try:
            parsed = orjson.loads(data)
        except orjson.JSONDecodeError:
            return None, None
        return self.prompt_usage(parsed), self.output_usage(parsed)


CODEC: Final = GeminiCodec()
