"""HTTP/1.1 framing without I/O: the answers a provider sends the client (``AnswerReader``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from multidict import CIMultiDict

from trimgate.proxy.http11.common import (
    CTL,
    HEAD_END,
    HEX_DIGITS,
    NEED_DATA,
    NO_BODY_STATUS,
    TOKEN,
    ProtocolError,
    _NeedData,
)

# --- limits: the client's (an answer past them is a ProtocolError) --------------------------

MAX_ANSWER_HEAD: Final = 64 * 1024  # status line and headers of one answer
MAX_CHUNK_LINE: Final = 8 * 1024  # a chunk-size line or a trailer line
MAX_TRAILERS: Final = 64 * 1024


class _End:
    __slots__ = ()

    def __repr__(self) -> str:
        return "END"


END: Final = _End()  # the answer's body is complete


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
