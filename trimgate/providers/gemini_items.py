"""One Gemini Content, apart from the decode loop: the part-kind table every pass
dispatches on, the sizes of a system instruction, the cappable text of a
functionResponse, where a countTokens request wraps its contents, the call / response
ids of the parts, and the copy ``encode`` makes of a content whose tool results are
capped (a copy: it never mutates)."""

from __future__ import annotations

from typing import Any, Final

from trimgate.history import Message
from trimgate.providers.common import json_bytes, utf8_len

_INNER_KEYS: Final = ("generateContentRequest", "generate_content_request")

# Part kinds, by field name (camelCase and snake_case).
_TEXT: Final = 0  # Final: compiled, each is a constant rather than a module lookup
_CALL: Final = 1
_RESPONSE: Final = 2
_MEDIA: Final = 3
_CODE: Final = 4
_CODE_RESULT: Final = 5
_META: Final = 6
_KINDS: Final[dict[str, int]] = {
    "text": _TEXT,
    "functionCall": _CALL,
    "function_call": _CALL,
    "functionResponse": _RESPONSE,
    "function_response": _RESPONSE,
    "inlineData": _MEDIA,
    "inline_data": _MEDIA,
    "fileData": _MEDIA,
    "file_data": _MEDIA,
    "executableCode": _CODE,
    "executable_code": _CODE,
    "codeExecutionResult": _CODE_RESULT,
    "code_execution_result": _CODE_RESULT,
    # metadata that rides on a part: kept, never counted
    "thought": _META,
    "thoughtSignature": _META,
    "thought_signature": _META,
    "videoMetadata": _META,
    "video_metadata": _META,
    "partMetadata": _META,
    "part_metadata": _META,
    "mediaResolution": _META,
    "media_resolution": _META,
}
_UNKNOWN: Final = -1


def _str(value: object) -> str:
    return value if type(value) is str else ""


def _response_text(value: object) -> tuple[str, str] | None:
    """(field, text) of a cappable ``functionResponse``: one string field in ``response``."""
    if type(value) is not dict:
        return None
    response = value.get("response")
    if type(response) is not dict or len(response) != 1:
        return None
    ((key, text),) = response.items()
    if type(text) is not str:
        return None
    return key, text


def _inner_key(body: dict[str, Any]) -> str | None:
    for key in _INNER_KEYS:
        if type(body.get(key)) is dict:
            return key
    return None


def _system_size(value: object) -> tuple[int, int]:
    """(text bytes, media) of ``systemInstruction``: a Content, or a bare string."""
    if value is None:
        return 0, 0
    if type(value) is str:
        return utf8_len(value), 0
    parts = value.get("parts") if type(value) is dict else None
    if type(parts) is not list:
        return json_bytes(value), 0
    nbytes = media = 0
    for part in parts:
        if type(part) is dict:
            text = part.get("text")
            if type(text) is str:
                nbytes += utf8_len(text)
                continue
            if any(_KINDS.get(k) == _MEDIA for k in part):
                media += 1
                continue
        nbytes += json_bytes(part)
    return nbytes, media


def _part_ids(parts: list[Any], message: Message) -> list[tuple[int, str]]:
    """(part position, id) of each call / response field of the content behind ``message``.

    ``_scan`` gives each such field whose value is an object an id, in part order, and
    lists them in ``calls`` / ``results``: walking the parts the same way pairs them up
    again, so that decode does not have to keep the pairs for the rare ``strip``.
    """
    found: list[tuple[int, str]] = []
    n_calls = n_results = 0
    for pos, part in enumerate(parts):
        if type(part) is not dict:
            continue
        for key, value in part.items():
            if type(value) is not dict:
                continue
            kind = _KINDS.get(key)
            if kind == _CALL:
                found.append((pos, message.calls[n_calls]))
                n_calls += 1
            elif kind == _RESPONSE:
                found.append((pos, message.results[n_results]))
                n_results += 1
    return found


def _cap(item: Any, texts: tuple[str | None, ...]) -> Any:
    """A copy of ``item`` with each cappable response text replaced (None keeps it)."""
    parts = item.get("parts") or []
    new_parts = list(parts)
    j = 0
    for pos, part in enumerate(parts):
        if type(part) is not dict:
            continue
        new_part: dict[str, Any] | None = None
        for key, value in part.items():
            if _KINDS.get(key) != _RESPONSE:
                continue
            found = _response_text(value)
            if found is None:
                continue
            text = texts[j] if j < len(texts) else None
            j += 1
            if text is None:
                continue
            response = dict(value["response"])
            response[found[0]] = text
            call = dict(value)
            call["response"] = response
            if new_part is None:
                new_part = dict(part)
            new_part[key] = call
        if new_part is not None:
            new_parts[pos] = new_part
    new = dict(item)
    new["parts"] = new_parts
    return new
