"""One-line scenario builders for the trimming core.

    conv("sys", "u1", "a1", tool("u2", "lookup", "result"), "u3")

Strings are text messages whose role is read from their first letter: ``s``
system, ``u`` user (a turn start), ``a`` assistant, ``t`` a tool result without
id. ``tool(...)`` expands to a user message, an assistant call and its result.
Sizes: a message costs ``message_tokens`` of its text, so ``"u1" + "x" * 400``
is a big turn.
"""

from __future__ import annotations

import itertools

from trimgate.history import Conversation, Message, Role
from trimgate.trimming.estimate import message_tokens, utf8_len

_ids = itertools.count()

Spec = str | list[Message]


def msg(text: str, role: Role | None = None, **fields: object) -> Message:
    if role is None:
        role = {"s": Role.SYSTEM, "u": Role.USER, "a": Role.ASSISTANT, "t": Role.TOOL}[text[0]]
    size = utf8_len(text)
    base = Message(
        index=-1,
        role=role,
        tokens=message_tokens(size),
        text_bytes=size,
        turn_start=role is Role.USER,
    )
    if role is Role.TOOL:
        base = base.replace(anonymous_results=True, other_content=False, tool_texts=(text,))
    return base.replace(**fields)


def tool(user: str, call: str, result: str, *, parallel: int = 1) -> list[Message]:
    """A turn: user message, one assistant message with ``parallel`` calls, results."""
    ids = tuple(f"call_{next(_ids)}" for _ in range(parallel))
    out = [msg(user)]
    out.append(msg("a" + call, Role.ASSISTANT, calls=ids, other_content=False))
    for cid in ids:
        out.append(
            msg(
                "t" + result,
                Role.TOOL,
                results=(cid,),
                anonymous_results=False,
                other_content=False,
                tool_texts=(result,),
            )
        )
    out.append(msg("a done"))
    return out


def conv(*specs: Spec, overhead: int = 0, pending_calls_ok: bool = False) -> Conversation:
    flat: list[Message] = []
    for spec in specs:
        flat.extend([msg(spec)] if isinstance(spec, str) else spec)
    messages = tuple(m.replace(index=i) for i, m in enumerate(flat))
    return Conversation(messages, overhead=overhead, pending_calls_ok=pending_calls_ok)
