"""The neutral model's value semantics: Message lists its fields in three places."""

from __future__ import annotations

import pytest

from trimgate.history import _FIELDS, Message, Role, call_message, result_message, text_message

VALUES: dict[str, object] = {
    "index": 3,
    "role": Role.TOOL,
    "tokens": 17,
    "text_bytes": 50,
    "turn_start": True,
    "calls": ("c1",),
    "results": ("r1",),
    "anonymous_results": True,
    "tool_texts": ("out",),
    "media": 2,
    "other_content": False,
    "exempt": True,
    "breadcrumb": True,
    "pinned": True,
}


def test_every_field_is_set_read_compared_and_replaced_by_name() -> None:
    assert list(VALUES) == list(_FIELDS)
    m = Message(**VALUES)  # type: ignore[arg-type]
    assert {f: getattr(m, f) for f in _FIELDS} == VALUES
    assert m == Message(**VALUES)  # type: ignore[arg-type]
    base = Message(index=0, role=Role.USER, tokens=0)
    for field, value in VALUES.items():  # every value above differs from the default
        changed = base.replace(**{field: value})
        assert getattr(changed, field) == value
        assert changed != base
        assert all(getattr(changed, f) == getattr(base, f) for f in _FIELDS if f != field)
    assert repr(m).startswith("Message(index=3, role=<Role.TOOL: 'tool'>, tokens=17")


def test_replace_refuses_an_unknown_field_and_messages_are_unhashable() -> None:
    m = text_message(0, Role.USER, 5, 4, True)
    with pytest.raises(TypeError):
        m.replace(colour="red")
    with pytest.raises(TypeError):
        hash(m)


def test_the_shorthands_fill_the_fields_they_name() -> None:
    assert text_message(1, Role.USER, 9, 20, True, 1, True) == Message(
        1, Role.USER, 9, 20, turn_start=True, media=1, breadcrumb=True
    )
    assert call_message(2, 8, 16, ("a", "b"), True) == Message(
        2, Role.ASSISTANT, 8, 16, calls=("a", "b"), other_content=True
    )
    assert result_message(3, 7, 12, ("a",), ("x",)) == Message(
        3, Role.TOOL, 7, 12, results=("a",), tool_texts=("x",), other_content=False
    )
