"""Relay the provider's answer to the client, and read an answer's head for an overflow.

Rules of this module:
- Before relaying, only as much of an answer is read as tells an overflow (an error
  body up to ``ERROR_BODY_LIMIT``, a stream's first decisive event, a JSON answer's first
  chunk); those bytes are relayed first, so nothing read is lost.
- The relay writes each chunk as it arrives (no buffering), to either server: aiohttp's
  ``StreamResponse`` or trimgate's own front (``FrontRequest``).
- A provider that breaks off mid-answer ends the client's connection: a truncated answer
  must not look complete.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

from aiohttp import web

from trimgate.errors import UpstreamError
from trimgate.providers.base import Codec
from trimgate.providers.overflow import Overflow, stream_head_decided
from trimgate.proxy import upstream as up
from trimgate.proxy.examine import decompress
from trimgate.proxy.front import FrontRequest
from trimgate.proxy.usage import UsageSniffer

log = logging.getLogger("trimgate")

ERROR_BODY_LIMIT = 256 * 1024  # an error body read whole to recognise an overflow
FIRST_EVENT_LIMIT = 64 * 1024
Incoming = web.Request | FrontRequest  # aiohttp's request, or one trimgate's front parsed


@dataclass(slots=True)
class Attempt:
    """One upstream answer, with the bytes of its body already read to judge it."""

    resp: up.Answer
    head: bytes  # body bytes already read from resp, relayed first
    overflow: Overflow | None
    retry: bool = False


async def sniff_overflow(codec: Codec, resp: up.Answer) -> tuple[bytes, Overflow | None]:
    """Read just enough of an answer to tell an overflow, and return those bytes."""
    encoding = resp.headers.get("Content-Encoding", "")
    ctype = resp.headers.get("Content-Type", "").lower()
    if resp.status >= 400:
        head, complete = await up.read_head(resp, ERROR_BODY_LIMIT)
        if not complete:
            return head, None
        body = head
        if encoding:
            inflated = decompress(head, encoding.lower(), ERROR_BODY_LIMIT * 8)
            if inflated is None:
                return head, None
            body = inflated
        return head, codec.detect_overflow(resp.status, body)
    if encoding or resp.status != 200:
        return b"", None
    if "text/event-stream" in ctype:
        head = await up.read_until(resp, stream_head_decided, FIRST_EVENT_LIMIT)
        return head, codec.detect_stream_overflow(head)
    if "json" in ctype:
        head, complete = await up.read_head(resp, 0)  # the first chunk
        start = head[:256].lstrip()
        if start[:1] == b"{" and (b'"error"' in start or b'"type":"error"' in start):
            if not complete:
                rest, complete = await up.read_head(resp, ERROR_BODY_LIMIT)
                head += rest
            if complete:
                return head, codec.detect_overflow(resp.status, head)
        return head, None
    return b"", None


class _Out(Protocol):
    async def write(self, data: bytes) -> None: ...
    async def write_eof(self) -> None: ...


async def relay(
    request: Incoming,
    attempt: Attempt,
    extra: dict[str, str],
    sniffer: UsageSniffer | None,
) -> web.StreamResponse | None:
    """The answer to the client as it arrives; the caller releases ``attempt.resp``.

    None: the answer went out through a ``FrontRequest`` (trimgate's own front)."""
    resp = attempt.resp
    out, response = await _start(request, attempt, extra)
    if attempt.head:
        if sniffer:
            sniffer.feed(attempt.head)
        await out.write(attempt.head)
    try:
        while chunk := await resp.readany():
            if sniffer:
                sniffer.feed(chunk)
            await out.write(chunk)
    except UpstreamError:
        # The provider broke off mid-answer; the client sees the connection end.
        log.warning("upstream broke off mid-answer", extra={"event": "upstream_truncated"})
        if request.transport is not None:
            request.transport.close()
        return response
    await out.write_eof()
    return response


async def _start(
    request: Incoming, attempt: Attempt, extra: dict[str, str]
) -> tuple[_Out, web.StreamResponse | None]:
    """The response head, sent (or, through the front, started): where the body goes."""
    resp = attempt.resp
    headers = up.response_headers(resp.headers, extra)
    length: int | None = None
    value = resp.headers.get("Content-Length")
    if value is not None and value.isdigit() and "Transfer-Encoding" not in resp.headers:
        length = int(value)
    if isinstance(request, FrontRequest):  # trimgate's front: the head goes with the body
        request.start(resp.status, resp.reason, headers, length)
        if length is None and not attempt.head:
            await request.flush()  # a stream that may be slow to start: its head at once
        return request, None
    response = web.StreamResponse(status=resp.status, reason=resp.reason)
    response.headers.extend(headers)
    if length is not None:
        response.content_length = length
    await response.prepare(request)
    return response, response
