"""Helpers every codec shares: sizes, the rebuild loop, and the OpenAI error envelope
(the error shape of every OpenAI-compatible format)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import orjson

from trimgate.trimming.estimate import utf8_len
from trimgate.trimming.pipeline import TrimPlan

__all__ = ["RawItems", "json_bytes", "openai_error_body", "rebuild", "utf8_len"]


class RawItems:
    """A history array left as bytes: ``rows[i]`` starts with item i's (start, end) in
    ``raw``, ``self[i]`` parses that item and ``unchanged(i)`` is what goes upstream for
    it when the plan does not change it: its bytes as they came, or, for an item in
    ``reencode``, the parsed item (see ``_chatscan.c``'s REENCODE). A codec that sized
    (and validated) the items from the bytes puts this in ``Decoded.body``: ``rebuild``
    then copies the kept items' bytes into the new body and parses only the others."""

    __slots__ = ("raw", "reencode", "rows")

    def __init__(
        self,
        raw: bytes,
        rows: Sequence[tuple[Any, ...]],
        reencode: frozenset[int] = frozenset(),
    ) -> None:
        self.raw = raw
        self.rows = rows
        self.reencode = reencode

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> Any:
        row = self.rows[index]
        return orjson.loads(memoryview(self.raw)[row[0] : row[1]])

    def unchanged(self, index: int) -> Any:
        if index in self.reencode:
            return self[index]
        row = self.rows[index]
        return orjson.Fragment(self.raw[row[0] : row[1]])


def json_bytes(value: Any) -> int:
    """UTF-8 size of ``value`` as compact JSON (tool arguments, schemas)."""
    if isinstance(value, str):
        return utf8_len(value)
    try:
        return len(orjson.dumps(value))
    except TypeError:  # nested deeper than orjson encodes (over 254 levels)
        return _walked_size(value)


def _walked_size(value: Any) -> int:
    """About the compact JSON size of ``value``, without recursion (any depth)."""
    size = 0
    stack: list[Any] = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            size += utf8_len(node) + 2
        elif isinstance(node, dict):
            size += 1 + 2 * len(node)  # braces, colons and commas
            for key, item in node.items():
                size += utf8_len(str(key)) + 2
                stack.append(item)
        elif isinstance(node, list):
            size += 1 + len(node)
            stack.extend(node)
        else:
            size += len(str(node))
    return size


def rebuild(
    items: Sequence[Any] | RawItems,
    plan: TrimPlan,
    *,
    breadcrumb_item: Callable[[], Any],
    merge: Callable[[Any], Any],
    strip: Callable[[Any, frozenset[str], int], Any],
    cap: Callable[[Any, tuple[str | None, ...]], Any],
) -> list[Any]:
    """The wire array for ``plan``, built from the original ``items``.

    Items the plan does not touch are the original objects (from ``RawItems``: what its
    ``unchanged`` gives, mostly the original bytes as ``orjson.Fragment``). ``cap``
    replaces an item's tool-result texts (None keeps one) and returns a copy; ``strip``
    returns a copy without the given tool-call ids (it is also told the item's wire
    index, for codecs that keep per-item facts); ``merge`` returns a copy of a user item
    with the breadcrumb text in front. None of them mutates.
    """
    raw = items if isinstance(items, RawItems) else None
    out: list[Any] = []
    for pos, message in enumerate(plan.kept):
        index = message.index
        texts = plan.capped.get(index)
        ids = plan.strip.get(index)
        merging = pos == plan.breadcrumb_at and plan.placement == "merge"
        if pos == plan.breadcrumb_at and not merging:
            out.append(breadcrumb_item())
        if raw is not None and texts is None and not ids and not merging:
            out.append(raw.unchanged(index))
            continue
        item = items[index]
        if texts is not None:  # before strip: texts follow the decoded order
            item = cap(item, texts)
        if ids:
            item = strip(item, ids, index)
        if merging:
            item = merge(item)
        out.append(item)
    return out


def openai_error_body(status: int, message: str, request_id: str) -> dict[str, Any]:
    """trimgate's own error in OpenAI's envelope (every OpenAI-compatible format's)."""
    return {
        "error": {
            "message": message,
            "type": "trimgate_error",
            "param": None,
            "code": {
                502: "upstream_unreachable",
                503: "trimgate_busy",
                504: "upstream_timeout",
            }.get(status),
        }
    }
