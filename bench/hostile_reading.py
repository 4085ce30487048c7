"""What a hostile error message costs the overflow readers: each reader word followed by a
long run of one filler (blanks, digits, commas, letters...), in a 400 error body, through
``detect_overflow``, ``detect_unfixable`` and ``detect_suspect``; the slowest cases first.
Then what splitting a held stream into events costs the relay: 1 MiB of the smallest
events (keep-alive comments, empty data lines), one read's worth at once; what reading
a stream's one reply chunk of 60,000 non-ASCII characters costs (its JSON cut at the
readers' 64 KiB, it is read as a text event); and a whole reply of 60,000 blanks finished
"length", as the one-line reply readers see it.

    python -m bench.hostile_reading [--chars 4000] [--top 12]

Readers that try every split of a run cost its square or cube: at 4 KiB (what the readers
scan of one answer's messages) that was seconds to minutes of the event loop. Run it on the
build in use (compiled), or with ``TRIMGATE_PURE=1`` in a tree without the ``.so`` files.
"""

from __future__ import annotations

import argparse
import itertools
import time

import orjson

from trimgate.providers import overflow
from trimgate.proxy import relay

WORDS = (
    "context length", "context window", "max_tokens", "prompt length", "input length",
    "prompt tokens", "max_seq_len", "maximum context length is", "tokens", "prompt", "input",
    "exceeds", "limit", "<=", ">", "+", "(", "prompt (", "max model length", "context_size=",
    "prompt_tokens (", "you requested", "in the messages", "requested", "total", "maximum",
    "at most", "up to", "n_ctx", "kv cache", "context size per request", "max_new_tokens",
    "output reserves", "prompt has", "error code: 400 - {", "超过", "上下文", "contexto",
    "превышает", "excede el límite de", "context length exceeded", "too long",
    "sequence length", "context length max tokens to", "prompt (9000) exceeds max_length",
    "len of prompt tokens 9 exceeds max_total_tokens", "错误: API请求失败 (",
    "prompt exceeds limit:", "unable to compact the conversation", "(status code: 4",
    "token limit exceeded: 9 > 8 (prompt: 9 + max:", "messages token length must be in (0,",
    "prompt is about 9 tokens (", "your request contains **",
    "requested prompt_tokens 9 plus max_tokens", "this server's total token limit of", "&gt;",
    "&#x", "request exceeds the loaded model or kv limit",
    "condensed history exceeds maximum length",
)  # fmt: skip
FILLERS = (" ", "a", "1", "1 ", "a ", ", ", "(", "-", ".", "1,", "\t", "tokens ", "1 + ", "a1", "é")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chars", type=int, default=4000)
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    print(f"overflow module: {overflow.__file__}")
    results = []
    for word, filler in itertools.product(WORDS, FILLERS):
        message = (word + " " + filler * (args.chars // len(filler)))[: args.chars] + " x"
        body = orjson.dumps({"error": {"message": message}})
        started = time.perf_counter()
        overflow.detect_overflow(400, body, wire_format="openai")
        overflow.detect_unfixable(400, body)
        overflow.detect_suspect(400, body, plain=True)
        results.append((time.perf_counter() - started, word, filler))
    results.sort(reverse=True)
    for seconds, word, filler in results[: args.top]:
        print(f"{1000 * seconds:8.1f} ms  {word!r} + {filler!r} x {args.chars}")
    for event in (b":\n\n", b"data:\n\n", b":\r\n\r\n"):
        held = bytearray(event * (1024 * 1024 // len(event)))
        started = time.perf_counter()
        start = count = 0
        while (end := relay._event_end(held, start)) is not None:
            start, count = end[1], count + 1
        seconds = time.perf_counter() - started
        print(f"{1000 * seconds:8.1f} ms  {count} events of {event!r} split (1 MiB)")
    for fragment in ("\u26a0\ufe0f **Context window exceeded** ", "\u4e0a\u4e0b\u6587 exceeds "):
        text = (fragment * (60_000 // len(fragment) + 1))[:60_000]
        chunk = b'data: {"choices":[{"delta":{"content":"' + text.encode() + b'"}}]}\n\n'
        started = time.perf_counter()
        overflow.detect_stream_overflow(chunk, wire_format="openai")
        seconds = time.perf_counter() - started
        print(f"{1000 * seconds:8.1f} ms  one reply chunk of 60,000 x {fragment[:8]!r}")
    # a whole reply finished "length", 60,000 blanks after "error", that counted nothing:
    # the one-line readers' shape (quadratic on blanks when unbounded)
    reply = {"message": {"content": "error " + " " * 60_000 + "x"}, "finish_reason": "length"}
    for usage in ({"prompt_tokens": 0, "completion_tokens": 0}, None):
        whole = orjson.dumps({"choices": [reply], **({"usage": usage} if usage else {})})
        started = time.perf_counter()
        overflow.detect_overflow(200, whole, wire_format="openai")
        seconds = time.perf_counter() - started
        print(f"{1000 * seconds:8.1f} ms  a 60,000-blank reply finished length, usage {usage}")


if __name__ == "__main__":
    main()
