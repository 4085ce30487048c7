from __future__ import annotations

from tests.builders import conv, msg, tool
from trimgate.history import Message, Role
from trimgate.trimming.orphans import sweep_orphans


def idx(ms: tuple[object, ...]) -> list[int]:
    return [m.index for m in ms]  # type: ignore[attr-defined]


def call(cid: str, *more: str, text: bool = False) -> list[Message]:
    return [msg("acall", Role.ASSISTANT, calls=(cid, *more), other_content=text)]


def result(cid: str) -> list[Message]:
    return [msg("tres", Role.TOOL, results=(cid,), anonymous_results=False, other_content=False)]


def test_valid_pairs_untouched() -> None:
    c = conv("sys", tool("u1", "c", "r", parallel=3), "u2")
    r = sweep_orphans(c.messages)
    assert r.removed == 0 and r.kept == c.messages and not r.strip


def test_orphan_result_at_start_is_removed() -> None:
    c = conv("sys", result("x"), "u1", "a1")
    r = sweep_orphans(c.messages)
    assert idx(r.kept) == [0, 2, 3] and r.removed == 1


def test_mismatched_id_is_removed() -> None:
    c = conv("u1", call("a"), result("b"), "u2")
    r = sweep_orphans(c.messages)
    # result b has no call; call a has no result: both go
    assert idx(r.kept) == [0, 3] and r.removed == 2


def test_result_before_its_call_is_an_orphan() -> None:
    c = conv("u1", result("a"), call("a"), "u2")
    assert idx(sweep_orphans(c.messages).kept) == [0, 3]


def test_partial_call_is_stripped_not_dropped() -> None:
    c = conv("u1", call("a", "b"), result("a"), "u2")
    r = sweep_orphans(c.messages)
    assert idx(r.kept) == [0, 1, 2, 3]
    assert r.strip == {1: frozenset({"b"})} and r.removed == 1


def test_call_with_text_keeps_its_text() -> None:
    c = conv("u1", call("a", text=True), "u2")
    r = sweep_orphans(c.messages)
    assert idx(r.kept) == [0, 1, 2] and r.strip == {1: frozenset({"a"})}


def test_pending_calls_of_newest_turn_when_allowed() -> None:
    c = conv("u1", "a1", "u2", call("a"), pending_calls_ok=True)
    assert sweep_orphans(c.messages, pending_calls_ok=True).removed == 0
    assert sweep_orphans(c.messages, pending_calls_ok=False).removed == 1


def test_pending_ok_does_not_cover_older_turns() -> None:
    c = conv("u1", call("a"), "u2", "a2")
    assert sweep_orphans(c.messages, pending_calls_ok=True).removed == 1


def test_exempt_messages_are_never_touched() -> None:
    exempt_result = [result("srv")[0].replace(exempt=True)]
    c = conv("u1", exempt_result, "u2")
    assert sweep_orphans(c.messages).removed == 0


def test_anonymous_result_kept_after_a_dispatch() -> None:
    c = conv("u1", call("a"), "t no id", result("a"), "u2")
    assert sweep_orphans(c.messages).removed == 0


def test_anonymous_result_without_dispatch_is_removed() -> None:
    c = conv("u1", "a plain", "t no id", "u2")
    r = sweep_orphans(c.messages)
    assert idx(r.kept) == [0, 1, 3] and r.removed == 1


def test_ids_in_free_text_never_count() -> None:
    # a plain assistant text that mentions an id makes no call
    c = conv("u1", "a see call_7", result("call_7"), "u2")
    assert sweep_orphans(c.messages).removed == 1


def test_never_empties_the_conversation() -> None:
    c = conv("sys", result("gone"))
    r = sweep_orphans(c.messages)
    assert r.kept == c.messages and r.removed == 0
