"""The SSE decoder: bytes split anywhere give the events of the whole stream."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from trimgate.sse import (
    SSEDecoder,
    SSEEvent,
    SSEMarkedEvents,
    encode_comment,
    encode_event,
    encode_retry,
    event_fields,
)


def reference(stream: bytes) -> list[SSEEvent]:
    """The WHATWG rules, read off the whole stream at once (complete lines only)."""
    stream = stream.removeprefix(b"\xef\xbb\xbf")
    text = stream.replace(b"\r\n", b"\n").replace(b"\r", b"\n").decode("utf-8", "replace")
    events: list[SSEEvent] = []
    data: list[str] = []
    event, last_id = "", None
    for line in text.split("\n")[:-1]:
        if not line:
            if data:
                events.append(SSEEvent("\n".join(data), event, last_id))
            data, event = [], ""
            continue
        if line.startswith(":"):
            continue
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
        elif name == "id" and "\0" not in value:
            last_id = value
    return events


def decode_split(stream: bytes, cuts: list[int]) -> list[SSEEvent]:
    decoder = SSEDecoder()
    events: list[SSEEvent] = []
    start = 0
    for cut in sorted(set(cuts)):
        events += decoder.decode(stream[start:cut])
        start = cut
    events += decoder.decode(stream[start:])
    return events


LINE_ENDS = st.sampled_from([b"\n", b"\r\n", b"\r"])
FIELD = st.sampled_from([b"data", b"event", b"id", b"retry", b""])
# a fixed alphabet (no Unicode table to build on a fresh machine): separators, NUL, and
# two-, three- and four-byte characters
VALUE = st.text(alphabet="ab :\0é€😀", max_size=12)


@st.composite
def streams(draw: st.DrawFn) -> bytes:
    out = b""
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.integers(0, 3))
        end = draw(LINE_ENDS)
        if kind == 0:
            out += end  # a blank line: dispatch
        elif kind == 1:
            out += b":" + draw(VALUE).encode() + end
        else:
            sep = draw(st.sampled_from([b": ", b":", b""]))
            out += draw(FIELD) + sep + draw(VALUE).encode() + end
    return out


@given(streams(), st.lists(st.integers(0, 400), max_size=8))
def test_any_split_gives_the_events_of_the_whole_stream(stream: bytes, cuts: list[int]) -> None:
    expected = reference(stream)
    assert decode_split(stream, [c % (len(stream) + 1) for c in cuts]) == expected


def test_line_ends_of_every_kind_and_a_crlf_split_across_chunks() -> None:
    stream = b"data: a\r\n\r\nevent: e\rdata: b\r\rdata: c\n\n"
    expected = [SSEEvent("a"), SSEEvent("b", "e"), SSEEvent("c")]
    assert reference(stream) == expected
    for cut in range(len(stream) + 1):
        assert decode_split(stream, [cut]) == expected, cut


def test_multiline_data_ids_and_comments() -> None:
    stream = b": keep-alive\n\nid: 7\ndata: one\ndata: two\n\ndata: three\n\n"
    expected = [SSEEvent("one\ntwo", "", "7"), SSEEvent("three", "", "7")]
    assert SSEDecoder().decode(stream) == expected


def test_flush_returns_an_event_left_without_a_blank_line() -> None:
    decoder = SSEDecoder()
    assert decoder.decode(b"data: done") == []
    assert decoder.flush() == [SSEEvent("done")]


def test_an_overlong_line_is_dropped_not_buffered() -> None:
    decoder = SSEDecoder(max_line=16)
    assert decoder.decode(b"data: " + b"x" * 40) == []
    assert decoder.decode(b"\n\ndata: ok\n\n") == [SSEEvent("ok")]


def test_encoded_events_decode_back() -> None:
    raw = encode_event("a\nb", event="x", id="3") + encode_comment("ping") + encode_event("c")
    assert SSEDecoder().decode(raw) == [SSEEvent("a\nb", "x", "3"), SSEEvent("c", "", "3")]


def test_an_empty_chunk_keeps_a_pending_cr() -> None:
    d = SSEDecoder()
    events = d.decode(b"data: a\r") + d.decode(b"") + d.decode(b"\ndata: b\r\n\r\n")
    assert events == [SSEEvent("a\nb")]


def test_a_leading_bom_is_skipped_even_split() -> None:
    assert SSEDecoder().decode(b"\xef\xbb\xbfdata: x\n\n") == [SSEEvent("x")]
    d = SSEDecoder()
    events = d.decode(b"\xef") + d.decode(b"\xbb") + d.decode(b"\xbfdata: y\n\n")
    assert events == [SSEEvent("y")]
    assert SSEDecoder().decode(b"\xef\xbb\xbf\xef\xbb\xbfdata: z\n\n") == []  # only one


def test_the_tail_of_an_overlong_line_is_not_a_line() -> None:
    d = SSEDecoder(max_line=16)
    assert d.decode(b"data: " + b"x" * 40) == []
    assert d.decode(b"xx\ndata: evil\n\n") == [SSEEvent("evil")]  # a whole line after it counts
    d = SSEDecoder(max_line=16)
    assert d.decode(b"data: " + b"x" * 40) + d.decode(b"data: evil\n\n") == []
    d = SSEDecoder(max_line=16)
    events = d.decode(b"data: a\n") + d.decode(b"data: " + b"x" * 40) + d.decode(b"\ndata: b\n\n")
    assert events == [SSEEvent("a\nb")]  # the dropped line's end dispatches nothing


def test_an_event_without_data_is_not_dispatched() -> None:
    assert SSEDecoder().decode(b"event: ping\n\n") == []


# Texts a str can be encoded from: lone surrogates have no UTF-8 (event data is JSON
# that orjson wrote, always valid UTF-8).
_TEXT = st.text(
    alphabet=st.characters(blacklist_characters="\r", blacklist_categories=["Cs"]), max_size=40
)


@given(_TEXT, st.integers(0, 9))
def test_bytes_data_frames_as_its_text_does(text: str, event_id: int) -> None:
    framed = encode_event(text.encode(), id=event_id, event="e")
    assert framed == encode_event(text, id=str(event_id), event="e")


def test_json_bytes_frame_as_the_event_stream_sends_them() -> None:
    assert encode_event(b'{"a":1}', id=7) == b'id: 7\ndata: {"a":1}\n\n'
    assert encode_retry(3000) == b"retry: 3000\n\n"


MARKED = (
    b'data: {"x":1}\n\n: ping\n\ndata: {"usage":2}\n\n'
    b'event: e\ndata: {"usage":3}\ndata: more\n\ndata: {"y":4}\n\n'
)


def marked_split(stream: bytes, cuts: list[int], max_event: int = 1 << 20) -> list[SSEEvent]:
    reader = SSEMarkedEvents((b'"usage"',), max_event)
    events: list[SSEEvent] = []
    start = 0
    for cut in sorted(cuts):
        events += reader.decode(stream[start:cut])
        start = cut
    return events + reader.decode(stream[start:])


@given(st.lists(st.integers(0, len(MARKED)), max_size=6))
def test_marked_events_are_found_wherever_the_stream_is_cut(cuts: list[int]) -> None:
    every = reference(MARKED)
    expected = [e for e in every if '"usage"' in e.data]
    for got in (marked_split(MARKED, cuts), marked_split(MARKED, list(range(len(MARKED))))):
        # every marked event, once, in order; others only where they share a chunk
        assert [e for e in got if '"usage"' in e.data] == expected
        assert all(e in every for e in got)


def test_marked_events_of_a_cr_stream_are_every_event() -> None:
    stream = MARKED.replace(b"\n", b"\r\n")
    assert marked_split(stream, [5, 40]) == reference(stream)


def test_an_event_longer_than_the_limit_is_skipped() -> None:
    long = b'data: {"usage":0,"pad":"' + b"x" * 100 + b'"}\n\n'
    events = marked_split(long + MARKED, [30, 60, 90], max_event=64)
    marked = [e.data for e in events if '"usage"' in e.data]
    assert marked == ['{"usage":2}', '{"usage":3}\nmore']
    reader = SSEMarkedEvents((b'"usage"',), 64)
    reader.decode(long[:80])
    assert reader.decode(b"\r\n") == [] and reader.closed  # CR stream: its end is not found


def test_event_fields_keep_what_the_decoder_leaves_out() -> None:
    head = b': hi\r\n\r\nevent: ping\r\n\r\nerror: {"x":1}\ndata:  two\n\nid: 4\n\npartial'
    assert event_fields(head, 8) == [
        [],
        [(b"event", b"ping")],
        [(b"error", b'{"x":1}'), (b"data", b" two")],
        [(b"id", b"4")],
        [(b"partial", b"")],
    ]
    assert len(event_fields(head, 2)) == 2  # the rest is not scanned
