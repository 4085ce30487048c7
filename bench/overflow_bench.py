"""What recognising an overflow costs per answer: the stream-head check a streamed answer
pays (its role-only opener and its first output chunk), an error body's judgement, and the
suspect check an error answer no reader recognised pays on top (``detect_suspect``).

    python -m bench.overflow_bench

Prints which build it measured (the .py modules, or the compiled .so) and the best of five
runs of 20,000 calls each, in microseconds per call.
"""

from __future__ import annotations

import timeit
from collections.abc import Callable

import orjson

import trimgate.providers.overflow as overflow
from trimgate.providers.overflow import detect_overflow, detect_suspect, stream_event_has_output
from trimgate.providers.registry import CODECS

CHUNK = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o"}
OPENER = b"data: " + orjson.dumps(
    {**CHUNK, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
)
FIRST = b"data: " + orjson.dumps(
    {**CHUNK, "choices": [{"index": 0, "delta": {"content": "Hello"}, "finish_reason": None}]}
)
OVERFLOW = orjson.dumps(
    {
        "error": {
            "message": "This model's maximum context length is 128000 tokens. However, your "
            "messages resulted in 130000 tokens.",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
    }
)
RATE_LIMIT = orjson.dumps(
    {
        "error": {
            "message": "Rate limit reached for gpt-4o in organization org-x on tokens per min "
            "(TPM): Limit 30000, Used 29000, Requested 2000.",
            "type": "tokens",
            "code": "rate_limit_exceeded",
        }
    }
)

# an output limit every reader examines and none recognises (TGI)
OUTPUT_LIMIT = orjson.dumps({"error": "`max_new_tokens` must be <= 4096. Given: 8192"})
# a wording no reader lists, with counts: a suspect
SUSPECT = orjson.dumps(
    {"error": {"message": "Sequence holds 9000 units, which is over the limit of 8000 units"}}
)


def stream_head() -> None:
    codec = CODECS["openai"]
    for event in (OPENER, FIRST):
        codec.detect_stream_event_overflow(event, output_started=False, patterns=())
        stream_event_has_output(event)


def main() -> None:
    print("overflow module:", overflow.__file__)
    cases: list[tuple[str, Callable[[], object]]] = [
        ("stream head (opener + first chunk)", stream_head),
        ("overflow body, 400", lambda: detect_overflow(400, OVERFLOW, wire_format="openai")),
        ("rate-limit body, 400", lambda: detect_overflow(400, RATE_LIMIT, wire_format="openai")),
        ("suspect check, output-limit 400", lambda: detect_suspect(400, OUTPUT_LIMIT)),
        ("suspect check, suspect 400", lambda: detect_suspect(400, SUSPECT)),
    ]
    for name, call in cases:
        best = min(timeit.repeat(call, number=20_000, repeat=5)) / 20_000 * 1e6
        print(f"{name}: {best:.1f} us")


if __name__ == "__main__":
    main()
