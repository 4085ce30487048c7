from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.builders import conv, tool
from trimgate.trimming.cap import cap_messages, cap_text


def idx(ms: tuple[object, ...]) -> list[int]:
    return [m.index for m in ms]  # type: ignore[attr-defined]


def test_under_cap_untouched() -> None:
    c = conv("sys", "u1", "a1", "u2", "a2")
    r = cap_messages(c.messages, 4)
    assert r.removed == 0 and r.kept == c.messages


def test_keeps_anchor_and_tail() -> None:
    c = conv("sys", "u1", "a1", "u2", "a2", "u3", "a3")
    r = cap_messages(c.messages, 3)
    assert idx(r.kept) == [0, 1, 5, 6] and r.removed == 3


def test_systems_are_not_counted_and_always_kept() -> None:
    c = conv("u1", "a1", "s late", "u2", "a2")
    r = cap_messages(c.messages, 2)
    assert idx(r.kept) == [0, 2, 4]


def test_dangling_tool_results_at_tail_head_are_dropped() -> None:
    c = conv("sys", "u1", tool("u2", "call", "r", parallel=3))
    # body: u1, u2, call, r, r, r, done -> limit 4 keeps u1 + [r, r, done] -> r's dangle
    r = cap_messages(c.messages, 4)
    kept = r.kept
    assert idx(kept) == [0, 1, 7]
    assert not any(m.results for m in kept)


def test_limit_one_keeps_newest_message() -> None:
    c = conv("sys", "u1", "a1", "u2", "a recent")
    assert idx(cap_messages(c.messages, 1).kept) == [0, 4]


def test_never_empties() -> None:
    c = conv("sys", tool("u1", "call", "r"))
    # limit 1 would keep only "a done"... make the newest message a tool result
    c2 = conv("sys", "u1", "acall", "t result")
    r = cap_messages(c2.messages, 1)
    assert idx(r.kept) == [0, 1]  # the newest real user message
    assert cap_messages(c.messages, 1).kept[-1].index == 4


def test_anchor_inside_tail_uses_plain_tail() -> None:
    c = conv("a stray", "a stray2", "u1", "a1")
    r = cap_messages(c.messages, 2)
    assert idx(r.kept) == [2, 3]


def test_cap_text_short_and_exact() -> None:
    assert cap_text("abc", 0) is None
    assert cap_text("x" * 100, 100) is None


def test_cap_text_marker_and_ratio() -> None:
    out = cap_text("a" * 500 + "b" * 500, 300)
    assert out is not None
    head, _, rest = out.partition("\n\n[... 700 characters truncated ...]\n\n")
    assert head == "a" * 200 and rest == "b" * 100


def test_cap_text_very_small() -> None:
    text = "abcdefghijklmnopqrstuvwxyz" * 4
    out = cap_text(text, 5)
    assert out is not None and out.startswith("abc") and out.endswith("yz")
    assert cap_text("abcdefghijklmnopqrstuvwxyz", 5) is None  # the marker is longer than the cut


@given(st.text(min_size=0, max_size=300), st.integers(min_value=1, max_value=200))
def test_cap_text_never_splits_a_character(text: str, limit: int) -> None:
    out = cap_text(text, limit)
    if out is None:
        assert len(text) <= limit + len(f"\n\n[... {len(text)} characters truncated ...]\n\n")
        return
    assert len(out) < len(text)
    out.encode("utf-8", "surrogatepass")  # whole code points only
    marker = f"\n\n[... {len(text) - limit} characters truncated ...]\n\n"
    head, _, tail = out.partition(marker)
    assert text.startswith(head) and text.endswith(tail)
    assert len(head) + len(tail) == limit
