"""One Chat Completions message, apart from the decode loop: the sizes of its content
(text bytes, media, the texts a cap may shorten) and the copies ``encode`` makes of it
(breadcrumb merged in, orphan ids stripped, tool results capped). Each returns a copy,
never mutates."""

from __future__ import annotations

from typing import Any

from trimgate.providers.common import json_bytes, utf8_len

# A tuple, not a set: a part's "type" may be any JSON value, and a list is unhashable.
_MEDIA_PARTS = ("image_url", "input_audio", "file")
_FN_PREFIX = "fn:"  # the synthetic call id of a legacy function_call: fn:{index}


def _parts_size(parts: list[Any]) -> tuple[int, int, bool]:
    """(text bytes, media count, has content) of a content-part list."""
    nbytes = 0
    media = 0
    for part in parts:
        if isinstance(part, dict):
            kind = part.get("type")
            if kind == "text":
                text = part.get("text")
                nbytes += utf8_len(text) if isinstance(text, str) else json_bytes(text)
                continue
            if kind == "refusal":
                text = part.get("refusal")
                nbytes += utf8_len(text) if isinstance(text, str) else json_bytes(text)
                continue
            if kind in _MEDIA_PARTS:
                media += 1
                continue
        nbytes += json_bytes(part)  # unknown part: its JSON size, so it is not free
    return nbytes, media, bool(parts)


def _content_size(content: Any) -> tuple[int, int, bool]:
    """(text bytes, media count, has content) of a message's ``content``."""
    if isinstance(content, str):
        return utf8_len(content), 0, bool(content)
    if content is None:
        return 0, 0, False
    if isinstance(content, list):
        return _parts_size(content)
    return json_bytes(content), 0, True


def _is_breadcrumb(content: Any, breadcrumb: str) -> bool:
    if isinstance(content, str):
        return content == breadcrumb
    if isinstance(content, list) and len(content) == 1:
        part = content[0]
        return (
            isinstance(part, dict) and part.get("type") == "text" and part.get("text") == breadcrumb
        )
    return False


def _tool_content(content: Any) -> tuple[int, int, tuple[str, ...]]:
    """(text bytes, media count, cappable texts) of a tool / function message's content."""
    if isinstance(content, str):
        return utf8_len(content), 0, (content,)
    if content is None:
        return 0, 0, ()
    if not isinstance(content, list):
        return json_bytes(content), 0, ()
    nbytes = 0
    media = 0
    texts: list[str] = []
    for part in content:
        if isinstance(part, dict):
            kind = part.get("type")
            if kind == "text":
                text = part.get("text")
                if isinstance(text, str):
                    texts.append(text)
                    nbytes += utf8_len(text)
                    continue
            elif kind in _MEDIA_PARTS:
                media += 1
                continue
        nbytes += json_bytes(part)
    return nbytes, media, tuple(texts)


def _str_bytes(value: Any) -> int:
    if isinstance(value, str):
        return utf8_len(value)
    return 0 if value is None else json_bytes(value)


def _merge(item: Any, breadcrumb: str) -> Any:
    marker = breadcrumb + "\n\n"
    content = item.get("content")
    new = dict(item)
    if isinstance(content, str):
        if content.startswith(marker):
            return item
        new["content"] = marker + content
    elif isinstance(content, list):
        first = content[0] if content else None
        if (
            isinstance(first, dict)
            and first.get("type") == "text"
            and isinstance(first.get("text"), str)
            and first["text"].startswith(breadcrumb)
        ):
            return item
        new["content"] = [{"type": "text", "text": marker}, *content]
    else:
        new["content"] = breadcrumb
    return new


def _strip(item: Any, ids: frozenset[str]) -> Any:
    role = item.get("role")
    if role != "assistant":
        return item  # a tool / function message is dropped whole, never stripped
    new = dict(item)
    tool_calls = item.get("tool_calls")
    if isinstance(tool_calls, list):
        own = {c.get("id") for c in tool_calls if isinstance(c, dict)}
        kept = [c for c in tool_calls if not (isinstance(c, dict) and c.get("id") in ids)]
        if len(kept) != len(tool_calls):
            if kept:
                new["tool_calls"] = kept
            else:
                del new["tool_calls"]  # OpenAI rejects an empty tool_calls array
    else:
        own = set()
    if "function_call" in item and any(i.startswith(_FN_PREFIX) and i not in own for i in ids):
        del new["function_call"]
    return new


def _cap(item: Any, texts: tuple[str | None, ...]) -> Any:
    content = item.get("content")
    new = dict(item)
    if isinstance(content, str):
        if texts and texts[0] is not None:
            new["content"] = texts[0]
        return new
    if isinstance(content, list):
        parts: list[Any] = []
        k = 0
        for part in content:
            if (
                isinstance(part, dict)
                and part.get("type") == "text"
                and isinstance(part.get("text"), str)
            ):
                text = texts[k] if k < len(texts) else None
                k += 1
                if text is not None:
                    part = {**part, "text": text}
            parts.append(part)
        new["content"] = parts
    return new
