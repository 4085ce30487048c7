"""HTTP/1.1 framing without I/O: what both readers share, and the writers.

The grammar of a head, the ``NEED_DATA`` event both readers give, ``ProtocolError``,
and ``answer_head``, ``chunk``, ``LAST_CHUNK`` (the front's) and ``request_head``
(the upstream client's).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

# --- the grammar both sides share --------------------------------------------------------

HEAD_END: Final = re.compile(rb"\r?\n\r?\n")  # the first blank line, LF or CRLF
TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # a field name (RFC 9110 §5.1)
CTL: Final = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # never in a head passed on
HEX_DIGITS: Final = b"0123456789abcdefABCDEF"

NO_BODY_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
NO_BODY_STATUS: Final = frozenset({204, 304})


class ProtocolError(ValueError):
    """What the peer sent cannot be framed as HTTP/1.1."""


# --- the event both readers give -------------------------------------------------------


class _NeedData:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NEED_DATA"


NEED_DATA: Final = _NeedData()  # nothing more until more bytes arrive


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
