"""One Responses input item, apart from the decode loop: the sizes of its content (text
bytes, media, the texts a cap may shorten), the dispatch field, the request-level test
for a context OpenAI manages, and the copies ``encode`` makes of an item (breadcrumb
merged in, tool outputs capped). Each returns a copy, never mutates."""

from __future__ import annotations

from typing import Any, Final

from trimgate.history import Message, Role
from trimgate.providers.common import json_bytes, utf8_len
from trimgate.trimming.estimate import framed_tokens

_TEXT_PARTS: Final = frozenset(
    {"input_text", "output_text", "text", "summary_text", "reasoning_text"}
)


_MEDIA_PARTS: Final = frozenset({"input_image", "input_file", "input_audio", "computer_screenshot"})


def _parts_size(parts: list[Any], texts: list[str] | None = None) -> tuple[int, int]:
    """(text bytes, media) of a content-part list; tool-output texts go to ``texts``."""
    nbytes = media = 0
    for part in parts:
        if type(part) is dict:
            kind = _kind(part)
            if kind in _TEXT_PARTS:
                text = part.get("text")
                if type(text) is str:
                    nbytes += utf8_len(text)
                    if texts is not None:
                        texts.append(text)
                    continue
            elif kind in _MEDIA_PARTS:
                media += 1
                continue
            elif kind == "refusal":
                refusal = part.get("refusal")
                if type(refusal) is str:
                    nbytes += utf8_len(refusal)
                    continue
            elif kind == "" and texts is not None and ("stdout" in part or "stderr" in part):
                # shell_call_output chunk: {"stdout", "stderr", "outcome"}
                for key in ("stdout", "stderr"):
                    stream = part.get(key)
                    if type(stream) is str:
                        nbytes += utf8_len(stream)
                        texts.append(stream)
                continue
        nbytes += json_bytes(part)
    return nbytes, media


def _content_size(content: Any, texts: list[str] | None = None) -> tuple[int, int]:
    if type(content) is str:
        if texts is not None:
            texts.append(content)
        return utf8_len(content), 0
    if type(content) is list:
        return _parts_size(content, texts)
    if content is None:
        return 0, 0
    if type(content) is dict and _kind(content) in _MEDIA_PARTS:
        return 0, 1  # computer_call_output: one screenshot
    return json_bytes(content), 0


def _str_bytes(item: dict[str, Any], key: str) -> int:
    value = item.get(key)
    if value is None:
        return 0
    return utf8_len(value) if type(value) is str else json_bytes(value)


def _is_crumb(content: Any, crumb: str) -> bool:
    if type(content) is str:
        return content == crumb
    if type(content) is list and len(content) == 1:
        part = content[0]
        return type(part) is dict and _kind(part) in _TEXT_PARTS and part.get("text") == crumb
    return False


def _kind(obj: dict[str, Any], key: str = "type") -> str:
    """A string field used for dispatch; "" when absent or not a string."""
    value = obj.get(key)
    return value if type(value) is str else ""


def _provider_managed(body: dict[str, Any]) -> bool:
    """The request asks OpenAI to manage its context: ``truncation: "auto"`` or a
    ``context_management`` entry (server-side compaction)."""
    if body.get("truncation") == "auto":
        return True
    managed = body.get("context_management")
    return type(managed) is list and len(managed) > 0


def _reasoning(index: int, nbytes: int, calls: list[str]) -> Message:
    """A reasoning item; it belongs to the client calls that directly follow it."""
    return Message(
        index=index,
        role=Role.ASSISTANT,
        tokens=framed_tokens(nbytes),
        text_bytes=nbytes,
        calls=tuple(calls),
        other_content=not calls,
    )


def _merge(item: dict[str, Any], breadcrumb: str) -> dict[str, Any]:
    """The breadcrumb in front of a user message: string content stays a string,
    list content gets a new ``input_text`` part in front (the user's own parts,
    with their cache breakpoints, stay as they are)."""
    out = dict(item)
    content = item.get("content")
    if type(content) is str:
        out["content"] = breadcrumb + "\n\n" + content
    elif type(content) is list:
        out["content"] = [{"type": "input_text", "text": breadcrumb + "\n\n"}, *content]
    else:
        out["content"] = breadcrumb
    return out


def _strip(item: dict[str, Any], ids: frozenset[str]) -> dict[str, Any]:
    """Every Responses tool item carries exactly one call or output, so the sweep
    removes such items whole; a partial strip only reaches a reasoning item that
    keeps some of its calls, and the reasoning item stays as it is."""
    return item


def _cap(item: dict[str, Any], texts: tuple[str | None, ...]) -> dict[str, Any]:
    """Replace the output texts in decode order: a string output, then the text
    parts of a list output (``shell_call_output`` chunks: stdout, then stderr)."""
    output = item.get("output")
    out = dict(item)
    if type(output) is str:
        if texts and texts[0] is not None:
            out["output"] = texts[0]
        return out
    if type(output) is not list:
        return out
    pos = 0
    parts: list[Any] = []
    for part in output:
        if type(part) is dict:
            kind = _kind(part)
            if kind in _TEXT_PARTS and type(part.get("text")) is str:
                new = texts[pos] if pos < len(texts) else None
                pos += 1
                if new is not None:
                    part = {**part, "text": new}
            elif kind == "" and ("stdout" in part or "stderr" in part):
                changed: dict[str, Any] | None = None
                for key in ("stdout", "stderr"):
                    if type(part.get(key)) is str:
                        new = texts[pos] if pos < len(texts) else None
                        pos += 1
                        if new is not None:
                            changed = changed if changed is not None else dict(part)
                            changed[key] = new
                if changed is not None:
                    part = changed
        parts.append(part)
    out["output"] = parts
    return out
