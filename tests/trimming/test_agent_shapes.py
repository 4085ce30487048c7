"""Histories shaped like real coding agents', in every format: the harness preamble and
the first prompt (the anchor) survive a trim untouched, before the breadcrumb."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tests.trimming.test_cut_grid import CRUMB, CRUMB_TEXT, FORMATS, OPTIONS, Item, send
from trimgate.providers.openai_responses import CODEC as RESPONSES
from trimgate.trimming.pipeline import Policy, plan

AGENTS_MD = (
    "# AGENTS.md instructions for /repo\\n\\n<INSTRUCTIONS>\\nRun `make test` before "
    "committing. Use type hints everywhere.\\n</INSTRUCTIONS>"
)
ENVIRONMENT = (
    "<environment_context>\\n  <cwd>/repo</cwd>\\n  <approval_policy>on-request"
    "</approval_policy>\\n  <shell>bash</shell>\\n</environment_context>"
)
REMINDERS = (
    "<system-reminder>\\nAs you answer the user's questions, you can use the following "
    "context:\\n# claudeMd\\nContents of /repo/CLAUDE.md: use pytest.\\n</system-reminder>",
    "<system-reminder>\\nThe todo list is empty.\\n</system-reminder>",
    "fix the failing parser test",
)
SESSION = (
    "<session_context>\\nThis is the Gemini CLI. Today's date is 2026-12-04.\\n"
    "My operating system is: linux\\nI'm currently working in the directory: /repo\\n"
    "</session_context>"
)

PREAMBLES: dict[str, list[Item]] = {
    "codex": [
        Item("system", "You are Codex, a coding agent."),
        Item("user", AGENTS_MD),
        Item("user", ENVIRONMENT),
        Item("user", "fix the failing parser test"),
    ],
    "claude-code": [Item("system", "You are Claude Code."), Item("user", "", parts=REMINDERS)],
    # Gemini CLI opens with its context and a canned reply, then the first prompt
    "gemini-cli": [
        Item("system", "You are an interactive CLI agent."),
        Item("user", SESSION),
    ],
}


def session(agent: str) -> list[Item]:
    items = list(PREAMBLES[agent])
    if agent == "gemini-cli":
        items += [Item("assistant", "Got it. Thanks for the context!")]
        items += [Item("user", "fix the failing parser test")]
    for turn in range(12):
        if turn:
            items.append(Item("user", f"task {turn}: and now the next part " + "p" * 300))
        for r in range(3):
            cid = f"call_{turn}_{r}"
            items.append(Item("call", '{"cmd": "sed -n 1,80p parse.py"}', cid))
            items.append(Item("result", f"line {turn}.{r}: " + "def parse(x): ... " * 60, cid))
        items.append(Item("assistant", f"done with step {turn}"))
    return items


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("agent", list(PREAMBLES))
def test_agent_preambles_are_pinned_in_every_format(agent: str, fmt: str) -> None:
    items = session(agent)
    budget = 6000
    policy = Policy(budget=budget, breadcrumb_tokens=CRUMB, step=1200, anchor_limit=1500)
    sent = send(fmt, items, policy)
    r = sent.plan.report
    assert r.trimmed and r.anchor_tokens > 0 and r.tokens_after <= budget
    first_reply = next(i for i, it in enumerate(items) if it.kind not in ("system", "user"))
    anchor = first_reply - (1 if fmt == "gemini" else 0)  # Gemini's system is not a content
    whole = send(fmt, items, Policy(budget=0))  # untouched: the client's own items
    assert sent.history[:anchor] == whole.history[:anchor]  # the anchor, byte for byte
    assert CRUMB_TEXT in sent.history[anchor].decode()
    assert sent.history[-1] == whole.history[-1]
    # without the anchor the preamble is the first thing to go
    plain = send(fmt, items, Policy(budget=budget, breadcrumb_tokens=CRUMB))
    assert plain.plan.report.anchor_tokens == 0
    assert whole.history[anchor - 1] not in plain.history


def test_codex_responses_anchor_ends_at_the_first_model_item() -> None:
    """In Responses the first model-produced item (here a reasoning item before the first
    call) ends the anchor: the harness items and the prompt are pinned."""
    items: list[Any] = [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "d"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": AGENTS_MD}]},
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": ENVIRONMENT}],
        },
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix it"}]},
    ]
    for t in range(10):
        if t:
            items.append({"role": "user", "content": f"next {t} " + "u" * 200})
        items.append(
            {"type": "reasoning", "id": f"rs_{t}", "summary": [], "encrypted_content": "e"}
        )
        items.append(
            {
                "type": "function_call",
                "call_id": f"c{t}",
                "name": "shell",
                "arguments": '{"cmd":["ls"]}',
            }
        )
        items.append({"type": "function_call_output", "call_id": f"c{t}", "output": "f" * 2000})
        items.append(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "ok"}],
            }
        )
    body = orjson.loads(orjson.dumps({"model": "gpt-5-codex", "input": items}))
    decoded = RESPONSES.decode(body, path="/v1/responses", options=OPTIONS)
    p = plan(decoded.conversation, Policy(budget=2500, breadcrumb_tokens=CRUMB, anchor_limit=625))
    out = RESPONSES.encode(decoded, p, breadcrumb=CRUMB_TEXT)["input"]
    assert p.report.anchor_tokens > 0 and p.report.orphans_removed == 0
    assert out[:4] == body["input"][:4]
    assert out[4] == {"role": "user", "content": CRUMB_TEXT}
    assert out[5]["role"] == "user" and out[-1] == body["input"][-1]
