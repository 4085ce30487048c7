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
