"""The Responses WebSocket chain trimgate keeps to rebuild a history, and event types."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from trimgate.proxy.websocket import _Chain, _items, _Node, event_type

ITEM = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant"]), "content": st.text(max_size=20)}
)
# each response: (continues the one before it?, its own input, its output)
RESPONSES = st.lists(
    st.tuples(st.booleans(), st.lists(ITEM, max_size=3), st.lists(ITEM, max_size=2)),
    min_size=1,
    max_size=12,
)


@given(RESPONSES, st.integers(0, 4000))
def test_a_chain_rebuilds_the_whole_history_within_its_cap(
    responses: list[tuple[bool, list[Any], list[Any]]], limit: int
) -> None:
    chain = _Chain(limit)
    expected: list[Any] = []
    previous: str | None = None
    for n, (continues, given_items, output) in enumerate(responses):
        parent = previous if continues else None
        if parent is None:
            expected = []
        node = _Node(parent, _items(given_items) or b"")
        node.output, node.completed = _items(output) or b"", True
        rid = f"resp_{n}"
        chain.add(rid, node)
        expected = [*expected, *given_items, *output]
        previous = rid
        assert chain.size <= limit or chain.gave_up
        parts = chain.history(rid)
        if chain.gave_up:
            assert parts is None and not chain.nodes
        else:
            assert parts is not None
            assert orjson.loads(b"[" + b",".join(parts) + b"]") == expected


def test_a_chain_with_a_link_not_seen_is_not_rebuilt() -> None:
    chain = _Chain(1 << 20)
    chain.add("resp_2", _Node("resp_1", b'{"role":"user","content":"x"}', b"", completed=True))
    assert chain.history("resp_2") is None  # resp_1 was not created on this connection
    chain.add("resp_1", _Node(None, b"", b"", completed=False))
    assert chain.history("resp_2") is None  # nor did it complete


@given(st.sampled_from(["error", "response.created", "response.output_text.delta"]), ITEM)
def test_the_event_type_is_the_first_type_key(kind: str, item: dict[str, Any]) -> None:
    frame = orjson.dumps({"type": kind, "item": {**item, "type": "message"}})
    assert event_type(frame) == kind
    assert event_type(orjson.dumps(item)) == ""
