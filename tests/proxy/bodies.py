"""Request bodies for proxy tests: long agent conversations with tool calls."""

from __future__ import annotations

from typing import Any


def openai_chat(
    turns: int, *, size: int = 400, model: str = "small-1", **extra: Any
) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a careful agent."}]
    for t in range(turns):
        messages.append({"role": "user", "content": f"task {t}: " + "u" * size})
        if t < turns - 1:
            cid = f"call_{t}"
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": cid,
                            "type": "function",
                            "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
                        }
                    ],
                }
            )
            messages.append({"role": "tool", "tool_call_id": cid, "content": "r" * size})
            messages.append({"role": "assistant", "content": f"done {t}"})
    return {"model": model, "messages": messages, **extra}


def anthropic_messages(
    turns: int, *, size: int = 400, model: str = "small-1", **extra: Any
) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    for t in range(turns):
        messages.append({"role": "user", "content": f"task {t}: " + "u" * size})
        if t < turns - 1:
            tid = f"toolu_{t}"
            messages.append(
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "reading"},
                        {"type": "tool_use", "id": tid, "name": "read", "input": {"p": "a"}},
                    ],
                }
            )
            messages.append(
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": tid, "content": "r" * size}],
                }
            )
            messages.append({"role": "assistant", "content": f"done {t}"})
    return {
        "model": model,
        "max_tokens": 64,
        "system": "Be careful.",
        "messages": messages,
        **extra,
    }


def gemini_contents(turns: int, *, size: int = 400) -> dict[str, Any]:
    contents: list[dict[str, Any]] = []
    for t in range(turns):
        contents.append({"role": "user", "parts": [{"text": f"task {t}: " + "u" * size}]})
        if t < turns - 1:
            contents.append(
                {"role": "model", "parts": [{"functionCall": {"name": "read", "args": {"p": t}}}]}
            )
            contents.append(
                {
                    "role": "user",
                    "parts": [
                        {"functionResponse": {"name": "read", "response": {"result": "r" * size}}}
                    ],
                }
            )
            contents.append({"role": "model", "parts": [{"text": f"done {t}"}]})
    return {"systemInstruction": {"parts": [{"text": "Be careful."}]}, "contents": contents}


def responses_input(turns: int, *, size: int = 400, model: str = "small-1") -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    for t in range(turns):
        items.append({"role": "user", "content": f"task {t}: " + "u" * size})
        if t < turns - 1:
            cid = f"call_{t}"
            items.append(
                {"type": "function_call", "call_id": cid, "name": "read", "arguments": "{}"}
            )
            items.append({"type": "function_call_output", "call_id": cid, "output": "r" * size})
            items.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": f"done {t}"}],
                }
            )
    return {"model": model, "instructions": "Be careful.", "input": items}
