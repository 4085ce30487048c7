"""HTTP/1.1 framing without I/O: the requests a client sends the front (``RequestReader``)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from multidict import CIMultiDict

from trimgate.proxy.http11.common import CTL, HEAD_END, NEED_DATA, TOKEN, _NeedData

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

    @property
    def received(self) -> int:
        """Bytes of the body in progress read so far (state ``BODY``; pipelined bytes after
        it included)."""
        return self._have if self.state == BODY else 0

    @property
    def pending(self) -> Request | None:
        """The request whose body is arriving (state ``BODY``), else None."""
        return self._request if self.state == BODY else None

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

    def drop_body(self) -> None:
        """The body in progress is refused: what arrived of it is let go, and the reader
        takes nothing more (the connection closes after the answer)."""
        self._parts = []
        self._have = 0
        self._request = None
        self.state = DONE

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
