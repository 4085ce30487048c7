"""One Messages API message, apart from the decode loop: the sizes of its blocks (tool
results, the system prompt, compaction blocks), the breadcrumb test, the pinning of a
compaction's head, the request-level test for a context Anthropic manages, and the
copies ``encode`` makes of a message (breadcrumb merged in, orphan ids stripped, tool
results capped): each of those returns a copy, never mutates."""

from __future__ import annotations

from typing import Any

from trimgate.errors import DecodeError
from trimgate.history import Message
from trimgate.providers.common import json_bytes, utf8_len

# Tuples, not sets: a block's "type" may be any JSON value, and a list is unhashable.
_MEDIA = ("image", "document")
_THINKING = ("thinking", "redacted_thinking")
_STRIPPED_PLACEHOLDER = {
    "user": "[tool result removed]",
    "assistant": "[tool call removed]",
}


def _result_content(content: Any, texts: list[str]) -> tuple[int, int]:
    """(text bytes, media) of a ``tool_result`` content; appends its texts to ``texts``."""
    if content is None:
        return 0, 0
    if isinstance(content, str):
        texts.append(content)
        return utf8_len(content), 0
    if not isinstance(content, list):
        return json_bytes(content), 0
    nbytes = media = 0
    for part in content:
        if not isinstance(part, dict):
            nbytes += json_bytes(part)
            continue
        kind = part.get("type")
        if kind == "text":
            text = part.get("text")
            if isinstance(text, str):
                texts.append(text)
                nbytes += utf8_len(text)
            else:
                nbytes += json_bytes(part)
        elif kind in _MEDIA:
            media += 1
        else:  # search_result, tool_reference, unknown parts: their JSON size
            nbytes += json_bytes(part)
    return nbytes, media


def _is_breadcrumb(content: Any, breadcrumb: str) -> bool:
    if isinstance(content, str):
        return content == breadcrumb
    if isinstance(content, list) and len(content) == 1:
        block = content[0]
        return (
            isinstance(block, dict)
            and block.get("type") == "text"
            and block.get("text") == breadcrumb
        )
    return False


def _system_bytes(system: Any) -> int:
    if system is None:
        return 0
    if isinstance(system, str):
        return utf8_len(system)
    if isinstance(system, list):
        total = 0
        for block in system:
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                total += utf8_len(block["text"])
            else:
                total += json_bytes(block)
        return total
    raise DecodeError("system is not a string or a list")


def _provider_managed(config: Any) -> bool:
    """``context_management`` with at least one edit (clearing tool uses or thinking,
    server-side compaction): Anthropic manages the context of this request."""
    if not isinstance(config, dict):
        return False
    edits = config.get("edits")
    return isinstance(edits, list) and len(edits) > 0


def _compaction_bytes(block: dict[str, Any]) -> int:
    """A compaction block's size: its summary text and tool changes (the encrypted
    content and the signature are opaque)."""
    content = block.get("content")
    nbytes = utf8_len(content) if isinstance(content, str) else 0
    changes = block.get("tool_changes")
    return nbytes + (json_bytes(changes) if changes is not None else 0)


def _pin_head(messages: list[Message], compaction: int) -> None:
    """Pin every message up to the one holding the latest compaction block (and the
    results answering its calls), sizing the earlier ones 0: the API ignores them."""
    end = compaction + 1
    if messages[compaction].calls and end < len(messages) and messages[end].carries_results:
        end += 1
    for i in range(end):
        m = messages[i]
        tokens = m.tokens if i >= compaction else 0
        messages[i] = m.replace(tokens=tokens, pinned=True, exempt=True)  # the sweep too


# -- encode helpers: each returns a copy, never mutates ---------------------------


def _merge(item: dict[str, Any], breadcrumb: str) -> dict[str, Any]:
    content = item.get("content")
    out = dict(item)
    if isinstance(content, str):
        out["content"] = breadcrumb + "\n\n" + content
    elif isinstance(content, list):
        out["content"] = [{"type": "text", "text": breadcrumb}, *content]
    else:  # cannot happen after decode; keep the item valid anyway
        out["content"] = breadcrumb
    return out


def _strip(item: dict[str, Any], ids: frozenset[str]) -> dict[str, Any]:
    content = item.get("content")
    if not isinstance(content, list):
        return item
    kept = []
    removed = False
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if (kind == "tool_use" and block.get("id") in ids) or (
            kind == "tool_result" and block.get("tool_use_id") in ids
        ):
            removed = True
            continue
        kept.append(block)
    if not removed:
        return item
    if all(isinstance(b, dict) and b.get("type") in _THINKING for b in kept):
        # Thinking alone is not worth sending, and empty content is rejected.
        role = item.get("role")
        text = _STRIPPED_PLACEHOLDER.get(role if isinstance(role, str) else "", "[removed]")
        kept = [{"type": "text", "text": text}]
    out = dict(item)
    out["content"] = kept
    return out


def _cap(item: dict[str, Any], texts: tuple[str | None, ...]) -> dict[str, Any]:
    """Put capped tool-result texts back, in decode order (result by result,
    then the text parts of each), keeping every block's other fields."""
    content = item.get("content")
    if not isinstance(content, list):
        return item
    pos = 0
    new_content: list[Any] | None = None
    for bi, block in enumerate(content):
        if not isinstance(block, dict) or block.get("type") != "tool_result":
            continue
        inner = block.get("content")
        if isinstance(inner, str):
            new = texts[pos] if pos < len(texts) else None
            pos += 1
            if new is not None:
                if new_content is None:
                    new_content = list(content)
                new_content[bi] = {**block, "content": new}
        elif isinstance(inner, list):
            new_inner: list[Any] | None = None
            for pi, part in enumerate(inner):
                if (
                    not isinstance(part, dict)
                    or part.get("type") != "text"
                    or not isinstance(part.get("text"), str)
                ):
                    continue
                new = texts[pos] if pos < len(texts) else None
                pos += 1
                if new is not None:
                    if new_inner is None:
                        new_inner = list(inner)
                    new_inner[pi] = {**part, "text": new}
            if new_inner is not None:
                if new_content is None:
                    new_content = list(content)
                new_content[bi] = {**block, "content": new_inner}
    if new_content is None:
        return item
    out = dict(item)
    out["content"] = new_content
    return out
