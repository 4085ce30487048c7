"""The relay's usage sniffer: prompt tokens read from streams cut anywhere."""

from __future__ import annotations

import gzip
import zlib

import pytest

from trimgate.providers.registry import CODECS
from trimgate.proxy.usage import USAGE_JSON_LIMIT, UsageSniffer

OPENAI_STREAM = (
    b'data: {"choices":[{"delta":{"role":"assistant","content":""}}],"usage":null}\n\n'
    b": keep-alive\n\n"
    b'data: {"choices":[{"delta":{"content":"hi"}}],"usage":null}\n\n'
    b'data: {"choices":[],"usage":{"prompt_tokens":1234,"completion_tokens":5}}\n\n'
    b"data: [DONE]\n\n"
)
ANTHROPIC_STREAM = (
    b"event: message_start\n"
    b'data: {"type":"message_start","message":{"usage":{"input_tokens":321,'
    b'"cache_read_input_tokens":9,"output_tokens":1}}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta"}\n\n'
    b'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":8}}\n\n'
)


def sniffer(wire: str, headers: dict[str, str]) -> UsageSniffer:
    return UsageSniffer(
        CODECS[wire], headers.get("Content-Type", ""), headers.get("Content-Encoding", "")
    )


def feed_split(wire: str, stream: bytes, cuts: list[int], **headers: str) -> int | None:
    s = sniffer(wire, {"Content-Type": "text/event-stream", **headers})
    start = 0
    for cut in cuts:
        s.feed(stream[start:cut])
        start = cut
    s.feed(stream[start:])
    return s.prompt_tokens


@pytest.mark.parametrize(
    ("wire", "stream", "tokens"),
    [("openai", OPENAI_STREAM, 1234), ("anthropic", ANTHROPIC_STREAM, 330)],
)
def test_usage_is_found_wherever_the_stream_is_cut(wire: str, stream: bytes, tokens: int) -> None:
    assert feed_split(wire, stream, []) == tokens
    for cut in range(len(stream) + 1):
        assert feed_split(wire, stream, [cut]) == tokens, cut
    byte_by_byte = list(range(1, len(stream)))
    assert feed_split(wire, stream, byte_by_byte) == tokens


def test_crlf_streams_fall_back_to_the_full_decoder() -> None:
    stream = OPENAI_STREAM.replace(b"\n", b"\r\n")
    for cut in range(0, len(stream) + 1, 7):
        assert feed_split("openai", stream, [cut]) == 1234, cut


def test_a_stream_without_usage_teaches_nothing() -> None:
    stream = OPENAI_STREAM.replace(b'"prompt_tokens"', b'"other_tokens"')
    assert feed_split("openai", stream, [40, 90]) is None


def test_gzip_streams_are_inflated_on_the_side() -> None:
    packed = gzip.compress(OPENAI_STREAM)
    cuts = list(range(5, len(packed), 11))
    assert feed_split("openai", packed, cuts, **{"Content-Encoding": "gzip"}) == 1234


def test_json_answers_are_parsed_once_at_the_end() -> None:
    s = sniffer("openai", {"Content-Type": "application/json"})
    body = b'{"choices":[],"usage":{"prompt_tokens":77}}'
    s.feed(body[:10])
    s.feed(body[10:])
    assert s.prompt_tokens == 77


USAGE = b'data: {"choices":[],"usage":{"prompt_tokens":1234}}\n\n'


def test_an_oversized_event_does_not_blind_the_rest_of_the_stream() -> None:
    big = b'data: {"choices":[{"delta":{"content":"' + b"x" * (USAGE_JSON_LIMIT + 300_000)
    big += b'"}}]}\n\n'
    stream = big + USAGE
    step = 64 * 1024
    cuts = list(range(step, len(stream), step))
    assert feed_split("openai", stream, cuts) == 1234
    # the skipped event ending on a blank line split between two reads
    end = len(big) - 1
    assert feed_split("openai", stream, [*range(step, end, step), end]) == 1234
    # and with the usage event in the same read as the skipped event's end
    assert feed_split("openai", stream, [*range(step, end - 10, step)]) == 1234


def test_a_gzip_read_inflating_past_a_step_keeps_its_tail() -> None:
    small = b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n'
    packed = gzip.compress(small * (USAGE_JSON_LIMIT // len(small) + 100) + USAGE)
    assert len(packed) < 200_000  # one ordinary read
    assert feed_split("openai", packed, [], **{"Content-Encoding": "gzip"}) == 1234


def test_a_crlf_gzip_stream_with_an_empty_inflated_read() -> None:
    c = zlib.compressobj(wbits=31)
    p1 = c.compress(b'data: {"choices":[],\r') + c.flush(zlib.Z_SYNC_FLUSH)
    p2 = c.compress(b'\ndata: "usage":{"prompt_tokens":7}}\r\n\r\n') + c.flush()
    assert zlib.decompressobj(31).decompress(p1 + p2[:1])[-1:] == b"\r"
    stream = p1 + p2
    assert feed_split("openai", stream, [len(p1), len(p1) + 1], **{"Content-Encoding": "gzip"}) == 7


# --- output tokens: read from the same events as the prompt usage ---------------------

RESPONSES_STREAM = (
    b'event: response.created\ndata: {"type":"response.created","response":{"usage":null}}\n\n'
    b'event: response.completed\ndata: {"type":"response.completed","response":'
    b'{"usage":{"input_tokens":40,"output_tokens":17,"output_tokens_details":'
    b'{"reasoning_tokens":9}}}}\n\n'
)
GEMINI_STREAM = (
    b'data: {"candidates":[],"usageMetadata":{"promptTokenCount":70}}\n\n'
    b'data: {"candidates":[],"usageMetadata":{"promptTokenCount":70,'
    b'"candidatesTokenCount":6,"thoughtsTokenCount":20}}\n\n'
)
# A newer Anthropic stream: message_delta restates the prompt counts with the output
ANTHROPIC_RESTATED = ANTHROPIC_STREAM.replace(
    b'{"output_tokens":8}',
    b'{"input_tokens":300,"cache_read_input_tokens":0,"cache_creation_input_tokens":0,'
    b'"output_tokens":11}',
)


@pytest.mark.parametrize(
    ("wire", "stream", "prompt", "output"),
    [
        ("openai", OPENAI_STREAM, 1234, 5),
        ("anthropic", ANTHROPIC_STREAM, 330, 8),  # message_delta's count is the final one
        ("anthropic", ANTHROPIC_RESTATED, 300, 11),
        ("openai-responses", RESPONSES_STREAM, 40, 17),
        ("gemini", GEMINI_STREAM, 70, 26),  # thinking tokens are output too
    ],
)
def test_output_tokens_are_read_wherever_the_stream_is_cut(
    wire: str, stream: bytes, prompt: int, output: int
) -> None:
    for cut in range(len(stream) + 1):
        s = sniffer(wire, {"Content-Type": "text/event-stream"})
        s.feed(stream[:cut])
        s.feed(stream[cut:])
        assert (s.prompt_tokens, s.output_tokens) == (prompt, output), cut


@pytest.mark.parametrize(
    ("wire", "body", "output"),
    [
        ("openai", b'{"usage":{"prompt_tokens":3,"completion_tokens":4}}', 4),
        ("openai-responses", b'{"usage":{"input_tokens":3,"output_tokens":5}}', 5),
        ("anthropic", b'{"usage":{"input_tokens":3,"output_tokens":6}}', 6),
        ("gemini", b'{"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":7}}', 7),
        ("gemini", b'[{"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":8}}]', 8),
        ("openai", b'{"usage":{"prompt_tokens":3,"completion_tokens":true}}', None),
        ("anthropic", b'{"input_tokens":3}', None),  # a count_tokens answer
    ],
)
def test_output_tokens_of_json_answers(wire: str, body: bytes, output: int | None) -> None:
    s = sniffer(wire, {"Content-Type": "application/json"})
    for i in range(0, len(body), 5):
        s.feed(body[i : i + 5])
    assert s.output_tokens == output
    assert s.prompt_tokens == 3
    assert s.output_tokens == output  # parsed once, read twice


def test_a_broken_json_answer_states_no_output() -> None:
    s = sniffer("openai", {"Content-Type": "application/json"})
    s.feed(b'{"usage":{"prompt_tokens":3,"completion_tokens":4}')
    assert s.output_tokens is None and s.usage is None
