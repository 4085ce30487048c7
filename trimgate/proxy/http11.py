"""HTTP/1.1 framing without I/O: bytes in, events out; events in, bytes out.

Two readers and the writers that go with them, shared by trimgate's front (front.py)
and its upstream client (h1.py), which only move bytes between these and sockets:

- ``RequestReader`` reads what a client sends the front: ``receive_data(bytes)``, then
  ``next_event()`` gives ``NEED_DATA``, a ``Request`` (head and its whole body) or
  ``Delegate`` (a request the front leaves to aiohttp, with every byte read so far);
  ``start_next()`` once the answer is out reads the next pipelined request.
- ``AnswerReader`` reads what a provider answers: ``expect(no_body)`` per request,
  ``receive_data(bytes)`` (``b""`` at the connection's end), then ``next_event()`` gives
  ``NEED_DATA``, an ``Answer`` head, ``Data``, ``END`` or ``Closed``, or raises
  ``ProtocolError``; ``reusable`` says whether the connection may carry another request.
- ``request_head``, ``answer_head``, ``chunk`` and ``LAST_CHUNK`` write.

The events a reader gives do not depend on how the bytes were cut into reads
(tests/proxy/test_http11.py feeds every fixture cut in two and byte by byte).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from multidict import CIMultiDict

# --- the grammar both sides share --------------------------------------------------------

HEAD_END: Final = re.compile(rb"\r?\n\r?\n")  # the first blank line, LF or CRLF
TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # a field name (RFC 9110 §5.1)
CTL: Final = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # never in a head passed on
HEX_DIGITS: Final = b"0123456789abcdefABCDEF"

# --- limits: the front's (a request it does not take is aiohttp's, which judges it) -------

MAX_REQUEST_HEAD: Final = 16 * 1024  # a longer head goes to aiohttp, which refuses it
MAX_REQUEST_LINE: Final = 8000  # a longer line, or more fields than MAX_FIELDS: aiohttp's
MAX_FIELDS: Final = 128  # limits (8190 bytes a line, 128 fields) decide
METHODS: Final = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# fields aiohttp refuses to see twice (aiohttp.http_parser.SINGLETON_HEADERS)
SINGLETONS: Final = (
    "Content-Length",
    "Content-Location",
    "Content-Range",
    "Content-Type",
    "ETag",
    "Host",
    "Max-Forwards",
    "Server",
    "Transfer-Encoding",
    "User-Agent",
)
# framing and connection fields aiohttp's parser acts on: a request with one is aiohttp's
DELEGATED_FIELDS: Final = (
    "Transfer-Encoding",
    "Expect",
    "Upgrade",
    "Proxy-Connection",
    "Sec-WebSocket-Key1",  # an old WebSocket draft's: aiohttp refuses it
)
_BLANK_LINES: Final = re.compile(rb"(?:\r\n)+")
# origin-form targets of RFC 3986 characters only; anything else is aiohttp's to judge
_REQUEST_LINE: Final = re.compile(r"([A-Z]+) (/[A-Za-z0-9\-._~!$&'()*+,;=:@/?%]*) HTTP/1\.1")

# --- limits: the client's (an answer past them is a ProtocolError) --------------------------

MAX_ANSWER_HEAD: Final = 64 * 1024  # status line and headers of one answer
MAX_CHUNK_LINE: Final = 8 * 1024  # a chunk-size line or a trailer line
MAX_TRAILERS: Final = 64 * 1024
NO_BODY_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
NO_BODY_STATUS: Final = frozenset({204, 304})


class ProtocolError(ValueError):
    """What the peer sent cannot be framed as HTTP/1.1."""


# --- events ---------------------------------------------------------------------------------


class _NeedData:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NEED_DATA"


class _End:
    __slots__ = ()

    def __repr__(self) -> str:
        return "END"


NEED_DATA: Final = _NeedData()  # nothing more until more bytes arrive
END: Final = _End()  # the answer's body is complete


@dataclass(slots=True)
class Request:
    """A request the front serves: method, target, headers, body length, keep-alive, body."""

    method: str
    target: str
    headers: CIMultiDict[str]
    length: int
    keep: bool
    body: bytes = b""


@dataclass(slots=True)
class Delegate:
    """A request the front leaves to aiohttp, with every byte read so far (never a refusal:
    aiohttp's parser decides)."""

    data: bytes


@dataclass(slots=True)
class Answer:
    """An answer's head: status, reason, minor version (0 or 1), headers."""

    status: int
    reason: str
    version: int
    headers: CIMultiDict[str]


@dataclass(slots=True)
class Data:
    """Body bytes of an answer."""

    data: bytes


@dataclass(slots=True)
class Closed:
    """The connection ended before the answer did; ``started``: part of it had come."""

    started: bool


# --- requests in (the front) ------------------------------------------------------------------


def parse_request_head(head: bytes, *, max_body: int, delegated: Iterable[str]) -> Request | None:
    """The head (without its blank line), or None: aiohttp takes the connection.

    None is never a refusal: it only means aiohttp's parser decides, so this one
    can be strict without ever answering differently from aiohttp.
    """
    text = head.decode("utf-8", "surrogateescape")  # aiohttp's reading of header bytes
    lines = text.split("\r\n")
    breaks = len(lines) - 1
    if breaks > MAX_FIELDS or (
        len(head) > MAX_REQUEST_LINE
        and any(len(line) > MAX_REQUEST_LINE for line in head.split(b"\r\n"))
    ):
        return None
    if text.count("\n") != breaks or text.count("\r") != breaks or CTL.search(text):
        return None  # a bare CR or LF, or a control character
    line = _REQUEST_LINE.fullmatch(lines[0])
    if line is None:
        return None
    method, target = line.groups()
    path = target.partition("?")[0]
    if method not in METHODS or "%" in path or path in delegated:
        return None  # escapes: aiohttp routes on the decoded path, so it decides
    pairs = []
    for field in lines[1:]:
        name, colon, value = field.partition(":")
        if not colon or not TOKEN.fullmatch(name):
            return None  # also a folded line, or whitespace before the colon
        pairs.append((name, value.strip(" \t")))
    headers = CIMultiDict(pairs)
    names = len({name.lower() for name, _ in pairs})
    return _request(method, target, headers, names, max_body)


def _request(
    method: str, target: str, headers: CIMultiDict[str], names: int, max_body: int
) -> Request | None:
    if any(name in headers for name in DELEGATED_FIELDS):
        return None
    if "Host" not in headers:
        return None  # aiohttp refuses an HTTP/1.1 request without a Host
    if len(headers) != names and any(len(headers.getall(name, ())) > 1 for name in SINGLETONS):
        return None  # a field aiohttp takes only once, twice
    declared = headers.get("Content-Length")
    length = 0
    if declared is not None:
        if not declared.isdigit() or not declared.isascii() or len(declared) > 18:
            return None
        length = int(declared)
        if length > max_body:
            return None  # aiohttp answers 413 (the proxy's own envelope is for its path)
    keep = True
    if "Connection" in headers:
        joined = ",".join(headers.getall("Connection"))
        tokens = {t.strip(" \t").lower() for t in joined.split(",")}
        if "upgrade" in tokens:
            return None
        keep = "close" not in tokens
    return Request(method, target, headers, length, keep)


# RequestReader.state
IDLE: Final = 0  # between requests, nothing of the next one read
HEAD: Final = 1  # part of a head read
BODY: Final = 2  # the head read, its body arriving
DONE: Final = 3  # a request given out: later bytes wait for start_next()
DELEGATED: Final = 4  # given to aiohttp: this reader is done


class RequestReader:
    """The requests on one client connection, one at a time."""

    __slots__ = (
        "_buf",
        "_have",
        "_parts",
        "_request",
        "_scanned",
        "delegated",
        "max_body",
        "state",
    )

    def __init__(self, *, max_body: int, delegated: frozenset[str]) -> None:
        self.max_body = max_body
        self.delegated = delegated  # paths aiohttp serves (the admin paths)
        self.state = IDLE
        # bytes of the next head (or, once DONE, of pipelined requests): the read itself
        # while it is the only one, a bytearray once reads must be joined
        self._buf: bytes | bytearray = b""
        self._scanned = 0  # how far the head has been searched for its end
        self._request: Request | None = None
        self._parts: list[bytes] = []  # the body, as it arrives
        self._have = 0

    @property
    def buffered(self) -> int:
        """Bytes read and not yet given out (a partial head, pipelined requests)."""
        return len(self._buf)

    def receive_data(self, data: bytes) -> None:
        if self.state == BODY:
            self._parts.append(data)
            self._have += len(data)
        elif not self._buf:
            self._buf = data
            if self.state == IDLE:
                self.state = HEAD
        else:
            if isinstance(self._buf, bytes):
                self._buf = bytearray(self._buf)
            self._buf += data  # in place: a head sent byte by byte costs no quadratic copying

    def next_event(self) -> Request | Delegate | _NeedData:
        state = self.state
        if state == HEAD:
            return self._head()
        if state == BODY:
            return self._body()
        return NEED_DATA

    def start_next(self) -> None:
        """The answer is out: read the next request (pipelined bytes first)."""
        if self.state == DONE:
            self.state = HEAD if self._buf else IDLE

    def _head(self) -> Request | Delegate | _NeedData:
        buf = self._buf
        if buf[:2] == b"\r\n":  # empty lines before a request are ignored (RFC 9112 §2.2)
            blank = _BLANK_LINES.match(buf)
            assert blank is not None
            buf = self._buf = buf[blank.end() :]
            if not buf:
                self.state = IDLE
                return NEED_DATA
        found = HEAD_END.search(buf, self._scanned)
        if found is None:
            if len(buf) - 3 > MAX_REQUEST_HEAD:  # no blank line can end it in time now
                return self._delegate()
            self._scanned = max(0, len(buf) - 3)
            return NEED_DATA
        if found.end() - found.start() != 4 or found.start() > MAX_REQUEST_HEAD:
            return self._delegate()  # a blank line of bare LFs: aiohttp's parser decides
        head = bytes(buf[: found.start()])
        request = parse_request_head(head, max_body=self.max_body, delegated=self.delegated)
        if request is None:
            return self._delegate()
        rest = bytes(buf[found.end() :])
        self._buf = b""
        self._scanned = 0
        self._request = request
        self._parts = [rest] if rest else []
        self._have = len(rest)
        self.state = BODY
        return self._body()

    def _body(self) -> Request | _NeedData:
        request = self._request
        assert request is not None
        if self._have < request.length:
            return NEED_DATA
        parts = self._parts
        self._parts = []
        extra = self._have - request.length  # pipelined bytes after the body, in the last part
        self._have = 0
        if extra:
            last = parts[-1]
            parts[-1] = last[: len(last) - extra]
            self._buf = last[len(last) - extra :]
        # the body is copied at most once: joined, or cut from a part that holds more
        request.body = parts[0] if len(parts) == 1 else b"".join(parts)
        self._request = None
        self.state = DONE
        return request

    def _delegate(self) -> Delegate:
        data, self._buf = self._buf, b""
        self.state = DELEGATED
        return Delegate(bytes(data))


# --- answers out (the front) --------------------------------------------------------------------


def answer_head(
    status: int,
    reason: str | None,
    headers: Iterable[tuple[str, str]],
    *,
    date: str,
    length: int | None,
    keep: bool,
) -> tuple[bytes, bool]:
    """The status line and headers, and whether the body is chunked (``length`` None)."""
    parts = [f"HTTP/1.1 {status} {reason or ''}\r\n"]
    for key, value in headers:
        parts.append(f"{key}: {value}\r\n")
    parts.append(f"Date: {date}\r\n")
    chunked = False
    if status in NO_BODY_STATUS or status < 200:
        pass  # never a body, so no framing
    elif length is not None:
        parts.append(f"Content-Length: {length}\r\n")
    else:
        parts.append("Transfer-Encoding: chunked\r\n")
        chunked = True
    if not keep:
        parts.append("Connection: close\r\n")
    parts.append("\r\n")
    text = "".join(parts)
    if text.count("\n") != len(parts) or text.count("\r") != len(parts):
        raise ValueError("a line break in an answer's status line or header")
    return text.encode("utf-8", "surrogateescape"), chunked


def chunk(data: bytes) -> tuple[bytes, bytes, bytes]:
    """One chunk of a chunked body (``data`` not empty)."""
    return (b"%x\r\n" % len(data), data, b"\r\n")


LAST_CHUNK: Final = b"0\r\n\r\n"


# --- requests out (the client) ---------------------------------------------------------------


def request_head(
    method: str, target: str, host: str, headers: Iterable[tuple[str, str]], length: int
) -> bytes:
    """The request line and headers; a header that would split the head is refused
    (ValueError)."""
    parts = [method, " ", target, " HTTP/1.1\r\nHost: ", host, "\r\n"]
    lines = 3  # the request line, Host and the blank line that ends the head
    for key, value in headers:
        parts += (key, ": ", value, "\r\n")
        lines += 1
    if length or method not in NO_BODY_METHODS:
        parts += ("Content-Length: ", str(length), "\r\n")
        lines += 1
    parts.append("\r\n")
    text = "".join(parts)
    if text.count("\n") != lines or text.count("\r") != lines or "\0" in text or " " in target:
        raise ValueError("a request header or the path holds a line break or NUL")
    return text.encode("utf-8", "surrogateescape")


# --- answers in (the client) -------------------------------------------------------------------


def parse_answer_head(head: bytes) -> Answer:
    """Status, reason, minor version and headers of an answer's head (without its blank
    line); ProtocolError if it is not one. Values are UTF-8 with undecodable bytes kept as
    surrogates (aiohttp's reading), so they pass on byte for byte."""
    text = head.decode("utf-8", "surrogateescape")
    if CTL.search(text):
        raise ProtocolError("a control character in the answer's head")
    lines = text.split("\n")
    version, _, rest = lines[0].rstrip("\r").partition(" ")
    if version == "HTTP/1.1":
        minor = 1
    elif version == "HTTP/1.0":
        minor = 0
    else:
        raise ProtocolError("not an HTTP/1.x status line")
    code, _, reason = rest.partition(" ")
    if "\r" in reason:
        raise ProtocolError("a bare CR in the answer's head")
    if len(code) != 3 or not code.isdigit() or not code.isascii():
        raise ProtocolError("the status code is invalid")
    pairs: list[tuple[str, str]] = []
    for line in lines[1:]:
        if line[-1:] == "\r":
            line = line[:-1]
        if not line:
            continue
        if "\r" in line:
            raise ProtocolError("a bare CR in the answer's head")
        if line[0] in " \t":  # an obsolete folded continuation: joined with a space
            if not pairs:
                raise ProtocolError("a header line continues nothing")
            name, value = pairs[-1]
            pairs[-1] = (name, value + " " + line.strip(" \t"))
            continue
        name, sep, value = line.partition(":")
        if not sep or TOKEN.fullmatch(name) is None:
            raise ProtocolError("a header line is invalid")
        pairs.append((name, value.strip(" \t")))
    return Answer(int(code), reason if reason.isascii() else "", minor, CIMultiDict(pairs))


def content_length(values: list[str]) -> int | None:
    """The one length the Content-Length fields agree on, or None."""
    lengths = {v.strip() for value in values for v in value.split(",")}
    if len(lengths) != 1:
        return None
    (length,) = lengths
    if not length.isdigit() or not length.isascii() or len(length) > 18:
        return None
    return int(length)


# how an answer's body is framed (RFC 9112 §6.3)
_NONE: Final = 0  # no body, or the body is complete
_LENGTH: Final = 1
_CHUNKED: Final = 2
_UNTIL_CLOSE: Final = 3
# where a chunked body's reader is
_SIZE: Final = 0
_DATA: Final = 1
_DATA_END: Final = 2
_TRAILER: Final = 3


class AnswerReader:
    """The answers on one connection to a provider, one per ``expect``."""

    __slots__ = (
        "_buf",
        "_clean",
        "_cstate",
        "_end",
        "_eof",
        "_error",
        "_line",
        "_mode",
        "_no_body",
        "_pending",
        "_remaining",
        "_scanned",
        "_trailers",
        "_waiting",
        "reusable",
    )

    def __init__(self) -> None:
        self.reusable = True  # the connection may carry another request after this answer
        self._waiting = False  # a request went out; its answer's head is not all in
        self._buf = bytearray()  # the head so far
        self._scanned = 0  # how far the head has been searched for its end
        self._no_body = False  # the request was HEAD
        self._mode = _NONE
        self._remaining = 0
        self._pending: list[bytes] = []  # body bytes not yet given out
        self._end = False  # END is the next event
        self._error: ProtocolError | None = None  # raised once the bytes before it are out
        self._eof = False
        self._clean = True
        self._cstate = _SIZE
        self._line = bytearray()
        self._trailers = 0

    @property
    def in_body(self) -> bool:
        """The head has been given out and the body's end has not."""
        return self._mode != _NONE or self._end or self._error is not None

    def expect(self, no_body: bool) -> None:
        """A request went out (``no_body``: a HEAD): its answer comes next."""
        self._waiting = True
        self._buf.clear()
        self._scanned = 0
        self._no_body = no_body

    def receive_data(self, data: bytes) -> None:
        """Bytes from the provider; ``b""``: it closed the connection."""
        if not data:
            self.receive_eof()
        elif self._mode != _NONE:
            self._pending.append(data)
        elif self._waiting:
            self._buf += data
        else:  # bytes nobody asked for: this connection cannot be trusted again
            self.reusable = False

    def receive_eof(self, clean: bool = True) -> None:
        """The connection ended (``clean``: not by an error, so a body read to the
        connection's end is whole)."""
        self._eof = True
        self._clean = clean
        self.reusable = False

    def next_event(self) -> Answer | Data | _End | Closed | _NeedData:
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        if self._end:
            self._end = False
            return END
        mode = self._mode
        if mode == _NONE:
            return self._head() if self._waiting else NEED_DATA
        if self._pending:
            return self._chunked() if mode == _CHUNKED else self._body()
        if self._eof:
            self._mode = _NONE
            self._pending.clear()
            return END if mode == _UNTIL_CLOSE and self._clean else Closed(True)
        return NEED_DATA

    def _refuse(self, why: str) -> ProtocolError:
        self.reusable = False
        self._waiting = False
        self._mode = _NONE
        self._pending.clear()
        return ProtocolError(why)

    def _head(self) -> Answer | Closed | _NeedData:
        while True:
            buf = self._buf
            found = HEAD_END.search(buf, self._scanned)
            if found is None:
                if len(buf) - 3 > MAX_ANSWER_HEAD:  # no blank line can end it in time now
                    raise self._refuse("the answer's headers are too large")
                self._scanned = max(0, len(buf) - 3)  # a blank line may straddle two reads
                if self._eof:
                    self._waiting = False
                    return Closed(bool(buf))
                return NEED_DATA
            if found.start() > MAX_ANSWER_HEAD:
                raise self._refuse("the answer's headers are too large")
            try:
                answer = parse_answer_head(bytes(buf[: found.start()]))
            except ProtocolError as exc:
                raise self._refuse(str(exc)) from None
            if 100 <= answer.status < 200:
                if answer.status == 101:
                    raise self._refuse("the upstream switched protocols")
                del buf[: found.end()]  # an interim answer (100, 103): the real one follows
                self._scanned = 0
                continue
            rest = bytes(buf[found.end() :])
            buf.clear()
            self._waiting = False
            self._start_body(answer, rest)
            return answer

    def _start_body(self, answer: Answer, rest: bytes) -> None:
        headers = answer.headers
        connection = headers.get("Connection", "").lower()
        if (answer.version == 0 and "keep-alive" not in connection) or "close" in connection:
            self.reusable = False
        mode = _NONE
        if not (self._no_body or answer.status in NO_BODY_STATUS):
            if "Transfer-Encoding" in headers:
                coding = ",".join(headers.getall("Transfer-Encoding"))
                if "Content-Length" in headers:
                    # a confused framing (RFC 9112 §6.3): the coding wins, the length is
                    # never passed on, the connection is not reused
                    headers.popall("Content-Length")
                    self.reusable = False
                if coding.rpartition(",")[2].strip().lower() == "chunked":
                    mode = _CHUNKED
                    self._cstate = _SIZE
                    self._line.clear()
                    self._trailers = 0
                else:
                    mode = _UNTIL_CLOSE
            elif "Content-Length" in headers:
                length = content_length(headers.getall("Content-Length"))
                if length is None:
                    raise self._refuse("the answer's Content-Length is invalid")
                if length:
                    mode = _LENGTH
                    self._remaining = length
            else:
                mode = _UNTIL_CLOSE
        if mode == _UNTIL_CLOSE:
            self.reusable = False
        self._mode = mode
        if mode == _NONE:
            self._end = True
            if rest:
                self.reusable = False  # bytes after the answer: the framing is off
        elif rest:
            self._pending.append(rest)

    def _body(self) -> Data:
        pending = self._pending
        data = pending[0] if len(pending) == 1 else b"".join(pending)
        pending.clear()
        if self._mode == _LENGTH:
            n = len(data)
            remaining = self._remaining
            if n < remaining:
                self._remaining = remaining - n
                return Data(data)
            if n > remaining:
                self.reusable = False  # bytes after the answer: the framing is off
                data = data[:remaining]
            self._mode = _NONE
            self._end = True
        return Data(data)

    def _chunked(self) -> Data | _End | Closed | _NeedData:
        out: list[bytes] = []
        pending = self._pending
        if len(pending) == 1:  # the usual case: one read since the last event
            data = pending[0]
            pending.clear()
            pos = self._chunk_piece(data, out)
            if self._end and pos < len(data):
                self.reusable = False  # bytes after the answer: the framing is off
        else:
            for i, data in enumerate(pending):
                pos = self._chunk_piece(data, out)
                if self._mode != _CHUNKED:  # ended (or refused) in this read
                    if self._end and (pos < len(data) or i + 1 < len(pending)):
                        self.reusable = False
                    break
            pending.clear()
        if out:
            return Data(out[0] if len(out) == 1 else b"".join(out))
        event = self.next_event()
        assert not isinstance(event, Answer)
        return event

    def _chunk_piece(self, data: bytes, out: list[bytes]) -> int:
        """Decode one read into ``out``; where the body ended in it (or its length)."""
        pos = 0
        n = len(data)
        while pos < n:
            if self._cstate == _DATA:
                take = min(self._remaining, n - pos)
                out.append(data if take == n else data[pos : pos + take])
                pos += take
                self._remaining -= take
                if self._remaining == 0:
                    self._cstate = _DATA_END
                continue
            nl = data.find(b"\n", pos)
            if nl < 0:
                self._line += data[pos:]
                if len(self._line) > MAX_CHUNK_LINE + 1:  # + its CR
                    self._fail("a chunk line is too long")
                return n
            if self._line:
                self._line += data[pos:nl]
                line = bytes(self._line)
                self._line.clear()
            else:
                line = data[pos:nl]
            pos = nl + 1
            if line[-1:] == b"\r":
                line = line[:-1]
            if self._cstate == _DATA_END and not line:  # the usual line: a chunk's end
                self._cstate = _SIZE
            elif not self._chunk_line(line):
                return pos
        return pos

    def _chunk_line(self, line: bytes) -> bool:
        """One line of a chunked body read; False once the body is over (or refused)."""
        if len(line) > MAX_CHUNK_LINE:
            return self._fail("a chunk line is too long")
        state = self._cstate
        if state == _SIZE:
            digits = line.partition(b";")[0].strip(b" \t")
            if not digits or len(digits) > 16 or digits.strip(HEX_DIGITS):
                return self._fail("a chunk size is invalid")
            size = int(digits, 16)
            if size:
                self._remaining = size
                self._cstate = _DATA
            else:
                self._cstate = _TRAILER
        elif state == _DATA_END:
            if line:
                return self._fail("a chunk does not end where its size says")
            self._cstate = _SIZE
        elif line:  # a trailer field: read and dropped
            self._trailers += len(line)
            if self._trailers > MAX_TRAILERS:
                return self._fail("the answer's trailers are too large")
        else:
            self._mode = _NONE
            self._end = True
            return False
        return True

    def _fail(self, why: str) -> bool:
        """Refuse the body once the bytes decoded before the fault are given out."""
        self._error = self._refuse(why)
        return False
