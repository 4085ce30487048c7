"""The sans-IO HTTP/1.1 readers and writers, without sockets.

Every fixture is fed whole, cut at every split point, and one byte at a time: the
events must be the same each way (consecutive ``Data`` joined, the bytes a ``Delegate``
hands to aiohttp counted with those that would follow it), and equal to what the
fixture expects.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st
from multidict import CIMultiDict

from trimgate.proxy import http11
from trimgate.proxy.http11 import (
    END,
    NEED_DATA,
    AnswerReader,
    Closed,
    Data,
    Delegate,
    Request,
    RequestReader,
)

pytestmark = pytest.mark.shell

MAX_BODY = 1024
DELEGATED = frozenset({"/healthz", "/metrics"})

# --- drivers --------------------------------------------------------------------------------

# an event as compared: ("request", method, target, headers, length, keep, body),
# ("delegate", bytes aiohttp gets), ("answer", status, reason, version, headers),
# ("data", bytes), ("end",), ("closed", started), ("error", message), ("reusable", bool)
Seen = tuple[object, ...]


def cut_points(raw: bytes) -> list[int]:
    """Every point of a fixture up to 4 KiB. In a longer one (the limits' fixtures: a
    16 or 64 KiB head), every point within 8 bytes of a line break, of its start, end and
    of each multiple of 1 KiB, and every 61st point between: quadratic copying of every
    cut of 64 KiB would take minutes for nothing more."""
    if len(raw) <= 4096:
        return list(range(1, len(raw)))
    marks = {0, len(raw), *range(1024, len(raw), 1024)}
    marks |= {i for i, byte in enumerate(raw) if byte in b"\r\n"}
    near = {p for mark in marks for p in range(mark - 8, mark + 9)}
    return sorted(p for p in near | set(range(1, len(raw), 61)) if 0 < p < len(raw))


def splits(raw: bytes) -> Iterator[list[bytes]]:
    """The bytes whole, cut in two at each point (see cut_points), one byte at a time."""
    yield [raw]
    for cut in cut_points(raw):
        yield [raw[:cut], raw[cut:]]
    yield [raw[i : i + 1] for i in range(len(raw))]


def read_requests(pieces: list[bytes]) -> list[Seen]:
    reader = RequestReader(max_body=MAX_BODY, delegated=DELEGATED)
    seen: list[Seen] = []
    for i, piece in enumerate(pieces):
        reader.receive_data(piece)
        while True:
            event = reader.next_event()
            if event is NEED_DATA:
                break
            if isinstance(event, Delegate):  # aiohttp gets these and every later byte
                seen.append(("delegate", event.data + b"".join(pieces[i + 1 :])))
                return seen
            assert isinstance(event, Request)
            headers = tuple(event.headers.items())
            fields = (event.method, event.target, headers, event.length, event.keep)
            seen.append(("request", *fields, event.body))
            reader.start_next()  # answered: the next (pipelined) request
    seen.append(("buffered", reader.buffered, reader.state))
    return seen


def read_answers(pieces: list[bytes], *, eof: bool, no_body: bool = False) -> list[Seen]:
    reader = AnswerReader()
    reader.expect(no_body)
    seen: list[Seen] = []

    def pump() -> bool:
        while True:
            try:
                event = reader.next_event()
            except http11.ProtocolError as exc:
                seen.append(("error", str(exc)))
                return False
            if event is NEED_DATA:
                return True
            if isinstance(event, Data):
                if seen and seen[-1][0] == "data":
                    before = seen[-1][1]
                    assert isinstance(before, bytes)
                    seen[-1] = ("data", before + event.data)
                else:
                    seen.append(("data", event.data))
            elif event is END:
                seen.append(("end",))
            elif isinstance(event, Closed):
                seen.append(("closed", event.started))
            else:
                assert isinstance(event, http11.Answer)
                headers = tuple(event.headers.items())
                seen.append(("answer", event.status, event.reason, event.version, headers))

    for piece in pieces:
        if not piece:
            continue  # b"" would say the connection ended
        reader.receive_data(piece)
        if not pump():
            break
    else:
        if eof:
            reader.receive_data(b"")
            pump()
    seen.append(("reusable", reader.reusable))
    return seen


# --- requests -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fixture:
    name: str
    raw: bytes
    expected: list[Seen]


def post(body: bytes, extra: bytes = b"", path: bytes = b"/v1/chat/completions") -> bytes:
    return (
        b"POST "
        + path
        + b" HTTP/1.1\r\nHost: proxy\r\nContent-Type: application/json\r\n"
        + extra
        + b"Content-Length: %d\r\n\r\n" % len(body)
        + body
    )


def served(body: bytes, keep: bool = True, extra: tuple[tuple[str, str], ...] = ()) -> Seen:
    """What a post() the front serves reads as."""
    headers = (("Host", "proxy"), ("Content-Type", "application/json"), *extra)
    headers += (("Content-Length", str(len(body))),)
    return ("request", "POST", "/v1/chat/completions", headers, len(body), keep, body)


BODY = b'{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}'
GET = b"GET /v1/models?limit=2 HTTP/1.1\r\nHost: proxy\r\n\r\n"
GOT = ("request", "GET", "/v1/models?limit=2", (("Host", "proxy"),), 0, True, b"")
CHUNKED_REQUEST = (
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: proxy\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"5;ext=1\r\nhello\r\n0\r\nX-Trailer: t\r\n\r\n"
)


def _request_fixtures() -> list[Fixture]:
    idle = ("buffered", 0, http11.IDLE)
    close = post(BODY, b"Connection: keep-alive, close\r\n")
    refused = {
        "bare-lf-line": b"GET / HTTP/1.1\r\nHost: proxy\nX-A: 1\r\n\r\n",
        "bare-lf-blank-line": b"GET / HTTP/1.1\nHost: proxy\n\n",
        "obs-fold": b"GET / HTTP/1.1\r\nHost: proxy\r\nX-A: 1\r\n  2\r\n\r\n",
        "space-before-colon": b"GET / HTTP/1.1\r\nHost : proxy\r\n\r\n",
        "control-character": b"GET / HTTP/1.1\r\nHost: proxy\r\nX-A: a\x01b\r\n\r\n",
        "nul": b"GET / HTTP/1.1\r\nHost: proxy\r\nX-A: a\0b\r\n\r\n",
        "non-token-name": b"GET / HTTP/1.1\r\nHost: proxy\r\nX\xffA: 1\r\n\r\n",
        "two-content-lengths": post(b"ab", b"Content-Length: 2\r\n"),
        "conflicting-content-lengths": post(b"ab", b"Content-Length: 3\r\n"),
        "content-length-list": post(b"", b"").replace(b"Length: 0", b"Length: 0, 0"),
        "signed-content-length": post(b"").replace(b"Length: 0", b"Length: +0"),
        "too-long-content-length": post(b"").replace(b"Length: 0", b"Length: " + b"0" * 19),
        "over-max-body": post(b"x" * (MAX_BODY + 1)),
        "chunked": CHUNKED_REQUEST,
        "transfer-encoding-and-length": post(b"ab", b"Transfer-Encoding: chunked\r\n"),
        "expect": post(b"ab", b"Expect: 100-continue\r\n"),
        "upgrade": b"GET /events HTTP/1.1\r\nHost: proxy\r\nConnection: Upgrade\r\n"
        b"Upgrade: websocket\r\n\r\n",
        "connection-upgrade": b"GET / HTTP/1.1\r\nHost: proxy\r\nConnection: upgrade\r\n\r\n",
        "no-host": b"GET / HTTP/1.1\r\nX-A: 1\r\n\r\n",
        "two-hosts": b"GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n",
        "http-1.0": b"GET / HTTP/1.0\r\nHost: proxy\r\n\r\n",
        "head-method": b"HEAD / HTTP/1.1\r\nHost: proxy\r\n\r\n",
        "escaped-path": b"GET /v1/%63hat HTTP/1.1\r\nHost: proxy\r\n\r\n",
        "absolute-target": b"GET http://a/ HTTP/1.1\r\nHost: proxy\r\n\r\n",
        "admin-path": b"GET /metrics HTTP/1.1\r\nHost: proxy\r\n\r\n",
        "long-line": b"GET / HTTP/1.1\r\nHost: proxy\r\nX-A: " + b"a" * 8000 + b"\r\n\r\n",
        "too-many-fields": b"GET / HTTP/1.1\r\nHost: proxy\r\n"
        + b"".join(b"X-%d: v\r\n" % i for i in range(128))
        + b"\r\n",
        "too-long-head": b"GET / HTTP/1.1\r\nHost: proxy\r\n"
        + b"".join(b"X-%d: %s\r\n" % (i, b"v" * 200) for i in range(80))
        + b"\r\n",
        "head-without-end": b"GET / HTTP/1.1\r\nHost: proxy\r\nX-A: " + b"v" * 16400,
    }
    fixtures = [
        Fixture("content-length", post(BODY), [served(BODY), idle]),
        Fixture("get", GET, [GOT, idle]),
        Fixture("empty-body-post", post(b""), [served(b""), idle]),
        Fixture(
            "connection-close",
            close,
            [served(BODY, False, (("Connection", "keep-alive, close"),)), idle],
        ),
        Fixture("blank-lines-first", b"\r\n\r\n" + GET, [GOT, idle]),
        Fixture("blank-lines-only", b"\r\n\r\n\r\n", [idle]),
        Fixture(
            "pipelined",
            post(BODY) + GET + post(b"second"),
            [served(BODY), GOT, served(b"second"), idle],
        ),
        Fixture(
            "pipelined-then-delegated",
            GET + CHUNKED_REQUEST,
            [GOT, ("delegate", CHUNKED_REQUEST)],
        ),
        Fixture(
            "partial-body",
            post(BODY)[:-5],
            [("buffered", 0, http11.BODY)],
        ),
        Fixture(
            "partial-head",
            GET[:-2],
            [("buffered", len(GET) - 2, http11.HEAD)],
        ),
    ]
    fixtures += [Fixture(name, raw, [("delegate", raw)]) for name, raw in refused.items()]
    return fixtures


REQUESTS = _request_fixtures()


@pytest.mark.parametrize("fixture", REQUESTS, ids=[f.name for f in REQUESTS])
def test_requests_read_alike_however_they_are_cut(fixture: Fixture) -> None:
    whole = read_requests([fixture.raw])
    assert whole == fixture.expected
    for pieces in splits(fixture.raw):
        assert read_requests(pieces) == whole, [len(p) for p in pieces]


def test_a_head_at_the_limit_is_read_and_one_past_it_delegated() -> None:
    filler = b"X-Pad: " + b"v" * 150 + b"\r\n"
    base = b"GET / HTTP/1.1\r\nHost: proxy\r\n"
    room = http11.MAX_REQUEST_HEAD - len(base)
    lines = base + filler * (room // len(filler) - 1)
    lines += b"X-End: " + b"e" * (http11.MAX_REQUEST_HEAD - len(lines) - 7)
    assert len(lines) == http11.MAX_REQUEST_HEAD  # where the blank line starts
    at_limit = lines + b"\r\n\r\n"
    past = lines + b"e\r\n\r\n"
    for pieces in splits(at_limit):
        assert read_requests(pieces)[0][0] == "request"
    for pieces in splits(past):
        assert read_requests(pieces) == [("delegate", past)]


def test_a_body_arriving_after_its_head_is_joined() -> None:
    reader = RequestReader(max_body=MAX_BODY, delegated=DELEGATED)
    reader.receive_data(post(BODY)[: -len(BODY)])
    assert reader.next_event() is NEED_DATA and reader.state == http11.BODY
    for i in range(len(BODY)):
        reader.receive_data(BODY[i : i + 1])
        event = reader.next_event()
    assert isinstance(event, Request) and event.body == BODY
    assert reader.state == http11.DONE
    reader.receive_data(GET)  # pipelined: waits until the answer is out
    assert reader.next_event() is NEED_DATA and reader.buffered == len(GET)
    reader.start_next()
    event = reader.next_event()
    assert isinstance(event, Request) and event.target == "/v1/models?limit=2"


# --- answers --------------------------------------------------------------------------------


@dataclass(frozen=True)
class AnswerFixture:
    name: str
    raw: bytes
    expected: list[Seen]
    eof: bool = False
    no_body: bool = False


OK = b"HTTP/1.1 200 OK\r\n"
JSON = (("Content-Type", "application/json"),)
KEPT: Seen = ("reusable", True)
DROPPED: Seen = ("reusable", False)
DONE = (("end",), KEPT)
FOLDED = (("data", b"x"), ("end",), DROPPED)


def ok(*fields: tuple[str, str]) -> Seen:
    return ("answer", 200, "OK", 1, fields)


def _answer_fixtures() -> list[AnswerFixture]:
    ctype = b"Content-Type: application/json\r\n"
    chunked = OK + b"Transfer-Encoding: chunked\r\n\r\n"
    te = (("Transfer-Encoding", "chunked"),)
    payload = b'{"id":"x","usage":{"prompt_tokens":3}}'
    bad_chunks = {
        "bad-chunk-size": b"5\r\nhello\r\nzz\r\n",
        "signed-chunk-size": b"5\r\nhello\r\n-1\r\n",
        "chunk-size-too-long": b"5\r\nhello\r\n" + b"0" * 17 + b"1\r\n",
        "chunk-overrun": b"5\r\nhelloX\r\n0\r\n\r\n",
        "chunk-line-too-long": b"5;" + b"e" * 8200 + b"\r\nhello\r\n0\r\n\r\n",
        "trailers-too-large": b"0\r\n"
        + b"".join(b"X-%d: %s\r\n" % (i, b"t" * 1000) for i in range(70))
        + b"\r\n",
    }
    why = {
        "bad-chunk-size": "a chunk size is invalid",
        "signed-chunk-size": "a chunk size is invalid",
        "chunk-size-too-long": "a chunk size is invalid",
        "chunk-overrun": "a chunk does not end where its size says",
        "chunk-line-too-long": "a chunk line is too long",
        "trailers-too-large": "the answer's trailers are too large",
    }
    fixtures = [
        AnswerFixture(
            "content-length",
            OK + ctype + b"Content-Length: %d\r\n\r\n" % len(payload) + payload,
            [ok(*JSON, ("Content-Length", str(len(payload)))), ("data", payload), ("end",), KEPT],
        ),
        AnswerFixture(
            "chunked-extensions-trailers",
            chunked + b"5;name=value\r\nhello\r\n1 ; x\r\n!\r\n0\r\nX-Trailer: t\r\n\r\n",
            [ok(*te), ("data", b"hello!"), ("end",), ("reusable", True)],
        ),
        AnswerFixture(
            "chunk-line-at-the-limit",
            chunked + b"5;" + b"e" * (http11.MAX_CHUNK_LINE - 2) + b"\r\nhello\r\n0\r\n\r\n",
            [ok(*te), ("data", b"hello"), *DONE],
        ),
        AnswerFixture(
            "chunked-lf-only",
            chunked + b"3\nabc\n0\n\n",
            [ok(*te), ("data", b"abc"), ("end",), ("reusable", True)],
        ),
        AnswerFixture(
            "close-delimited",
            OK + ctype + b"\r\n" + payload,
            [ok(*JSON), ("data", payload), ("end",), ("reusable", False)],
            eof=True,
        ),
        AnswerFixture(
            "close-delimited-coding",
            OK + b"Transfer-Encoding: gzip\r\n\r\nzz",
            [ok(("Transfer-Encoding", "gzip")), ("data", b"zz"), ("end",), ("reusable", False)],
            eof=True,
        ),
        AnswerFixture(
            "interim-answers-skipped",
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
            + OK
            + b"Content-Length: 2\r\n\r\nok",
            [ok(("Content-Length", "2")), ("data", b"ok"), ("end",), ("reusable", True)],
        ),
        AnswerFixture(
            "no-content",
            b"HTTP/1.1 204 No Content\r\nX-A: 1\r\n\r\n",
            [("answer", 204, "No Content", 1, (("X-A", "1"),)), ("end",), ("reusable", True)],
        ),
        AnswerFixture(
            "head-request",
            OK + b"Content-Length: 10\r\n\r\n",
            [ok(("Content-Length", "10")), ("end",), ("reusable", True)],
            no_body=True,
        ),
        AnswerFixture(
            "http-1.0-and-folded",
            b"HTTP/1.0 200 OK\r\nX-Fold: one\r\n two\r\nContent-Length: 1\r\n\r\nx",
            [("answer", 200, "OK", 0, (("X-Fold", "one two"), ("Content-Length", "1"))), *FOLDED],
        ),
        AnswerFixture(
            "pipelined-bytes-after-the-answer",
            OK + b"Content-Length: 2\r\n\r\nok" + OK + b"Content-Length: 0\r\n\r\n",
            [ok(("Content-Length", "2")), ("data", b"ok"), ("end",), ("reusable", False)],
        ),
        AnswerFixture(
            "bytes-after-a-chunked-answer",
            chunked + b"2\r\nok\r\n0\r\n\r\nextra",
            [ok(*te), ("data", b"ok"), ("end",), ("reusable", False)],
        ),
        AnswerFixture(
            "length-and-chunked",
            OK + b"Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
            [ok(*te), ("data", b"ok"), ("end",), ("reusable", False)],
        ),
        AnswerFixture(
            "equal-content-lengths",
            OK + b"Content-Length: 2\r\nContent-Length: 2, 2\r\n\r\nok",
            [ok(("Content-Length", "2"), ("Content-Length", "2, 2")), ("data", b"ok"), *DONE],
        ),
        AnswerFixture(
            "closed-mid-body",
            OK + b"Content-Length: 10\r\n\r\nshort",
            [ok(("Content-Length", "10")), ("data", b"short"), ("closed", True), DROPPED],
            eof=True,
        ),
        AnswerFixture(
            "closed-mid-head",
            OK + b"Content-",
            [("closed", True), ("reusable", False)],
            eof=True,
        ),
        AnswerFixture("closed-before-answer", b"", [("closed", False), ("reusable", False)], True),
    ]
    refused = {
        "conflicting-content-lengths": (
            OK + b"Content-Length: 2\r\nContent-Length: 3\r\n\r\nok",
            "the answer's Content-Length is invalid",
        ),
        "signed-content-length": (
            OK + b"Content-Length: -1\r\n\r\n",
            "the answer's Content-Length is invalid",
        ),
        "switching-protocols": (
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n",
            "the upstream switched protocols",
        ),
        "http-2-status-line": (b"HTTP/2 200 OK\r\n\r\n", "not an HTTP/1.x status line"),
        "status-of-two-digits": (b"HTTP/1.1 20 OK\r\n\r\n", "the status code is invalid"),
        "status-not-digits": (b"HTTP/1.1 2x0 OK\r\n\r\n", "the status code is invalid"),
        "control-character": (
            OK + b"X-A: a\x01b\r\n\r\n",
            "a control character in the answer's head",
        ),
        "bare-cr": (OK + b"X-A: a\rb\r\n\r\n", "a bare CR in the answer's head"),
        "fold-first": (OK + b" X-A: 1\r\n\r\n", "a header line continues nothing"),
        "space-before-colon": (OK + b"X-A : 1\r\n\r\n", "a header line is invalid"),
        "head-too-large": (
            OK + b"X-Big: " + b"a" * http11.MAX_ANSWER_HEAD + b"\r\n\r\n",
            "the answer's headers are too large",
        ),
    }
    for name, (raw, message) in refused.items():
        fixtures.append(AnswerFixture(name, raw, [("error", message), ("reusable", False)]))
    for name, body in bad_chunks.items():
        data = [("data", b"hello")] if body.startswith(b"5\r\nhello") else []
        expected = [ok(*te), *data, ("error", why[name]), ("reusable", False)]
        fixtures.append(AnswerFixture(name, chunked + body, expected))
    return fixtures


ANSWERS = _answer_fixtures()


@pytest.mark.parametrize("fixture", ANSWERS, ids=[f.name for f in ANSWERS])
def test_answers_read_alike_however_they_are_cut(fixture: AnswerFixture) -> None:
    def read(pieces: list[bytes]) -> list[Seen]:
        return read_answers(pieces, eof=fixture.eof, no_body=fixture.no_body)

    whole = read([fixture.raw])
    assert whole == fixture.expected
    for pieces in splits(fixture.raw):
        assert read(pieces) == whole, [len(p) for p in pieces]


def test_an_answer_head_ending_at_the_limit_is_read() -> None:
    pad = http11.MAX_ANSWER_HEAD - len(OK) - len(b"X-Big: ")
    raw = OK + b"X-Big: " + b"a" * pad + b"\r\n\r\n"
    assert raw.index(b"\r\n\r\n") == http11.MAX_ANSWER_HEAD
    for cut in (len(raw) - 4, len(raw) - 3, len(raw) - 2, len(raw) - 1, len(raw)):
        seen = read_answers([raw[:cut], raw[cut:]], eof=False)
        assert seen[0][:2] == ("answer", 200) and seen[-1] == ("reusable", False)


# --- writers ---------------------------------------------------------------------------------


@given(
    body=st.binary(max_size=2000),
    sizes=st.lists(st.integers(min_value=1, max_value=300), max_size=20),
    cut=st.integers(min_value=0, max_value=3000),
)
def test_chunks_written_read_back_as_the_body(body: bytes, sizes: list[int], cut: int) -> None:
    wire = bytearray(OK + b"Transfer-Encoding: chunked\r\n\r\n")
    pos = 0
    for size in sizes:
        if pos < len(body):
            wire += b"".join(http11.chunk(body[pos : pos + size]))
            pos += size
    if pos < len(body):
        wire += b"".join(http11.chunk(body[pos:]))
    wire += http11.LAST_CHUNK
    raw = bytes(wire)
    cut = min(cut, len(raw))
    seen = read_answers([raw[:cut], raw[cut:]], eof=False)
    data = [event[1] for event in seen if event[0] == "data"]
    assert data == ([body] if body else []) and seen[-2:] == [("end",), ("reusable", True)]


def test_an_answer_head_written_reads_back() -> None:
    head, chunked = http11.answer_head(
        200, "OK", [("X-A", "1")], date="Fri, 04 Dec 2026 00:00:00 GMT", length=None, keep=False
    )
    assert chunked
    assert http11.parse_answer_head(head[:-4]) == http11.Answer(
        200,
        "OK",
        1,
        CIMultiDict(
            [
                ("X-A", "1"),
                ("Date", "Fri, 04 Dec 2026 00:00:00 GMT"),
                ("Transfer-Encoding", "chunked"),
                ("Connection", "close"),
            ]
        ),
    )
    head, chunked = http11.answer_head(304, None, [], date="d", length=5, keep=True)
    assert head == b"HTTP/1.1 304 \r\nDate: d\r\n\r\n" and not chunked
    with pytest.raises(ValueError):
        http11.answer_head(200, "OK", [("X-A", "1\r\nX-B: 2")], date="d", length=0, keep=True)


def test_a_request_head_written_reads_back() -> None:
    raw = http11.request_head("POST", "/v1/chat?x=1", "api:8080", [("X-A", "1")], 2) + b"ok"
    (event, _) = read_requests([raw])
    assert event == (
        "request",
        "POST",
        "/v1/chat?x=1",
        (("Host", "api:8080"), ("X-A", "1"), ("Content-Length", "2")),
        2,
        True,
        b"ok",
    )
    assert http11.request_head("GET", "/", "h", [], 0) == b"GET / HTTP/1.1\r\nHost: h\r\n\r\n"
    for bad in ("a\nb", "a\rb", "a\0b"):
        with pytest.raises(ValueError):
            http11.request_head("GET", "/", "h", [("X-A", bad)], 0)
    with pytest.raises(ValueError):
        http11.request_head("GET", "/a b", "h", [], 0)
