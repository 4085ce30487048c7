"""Relay the provider's answer to the client, and read an answer's head for an overflow.

Rules of this module:
- Before relaying, only as much of an answer is read as tells an overflow (an error
  body up to ``ERROR_BODY_LIMIT``; a stream's events up to the first with output, each
  checked; a JSON answer's first chunk, or all of it when it may state an error); those
  bytes are relayed first, so nothing read is lost. Once a byte is relayed, nothing is an
  overflow any more.
- The relay writes each chunk as it arrives (no buffering), to either server: aiohttp's
  ``StreamResponse`` or trimgate's own front (``FrontRequest``).
- A provider that breaks off mid-answer ends the client's connection: a truncated answer
  must not look complete.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass
from typing import Protocol

from aiohttp import web

from trimgate.errors import UpstreamError
from trimgate.providers.base import Codec
from trimgate.providers.overflow import (
    HOLDS,
    OUTPUT,
    UNAVAILABLE_STATUSES,
    UNSPENT,
    WINDOW_STOP_JSON,
    Overflow,
    Patterns,
    Suspect,
    detect_suspect,
    detect_unfixable,
    detect_unspent_stop,
    may_state_error,
    states_envelope_error,
    stop_usage_counts_prompt_only,
    stream_event_output,
    unspent_usage,
)
from trimgate.proxy import upstream as up
from trimgate.proxy.examine import decompress
from trimgate.proxy.front import FrontRequest
from trimgate.proxy.usage import UsageSniffer

log = logging.getLogger("trimgate")

ERROR_BODY_LIMIT = 256 * 1024  # an error body read whole to recognise an overflow
# A 200 stream is held until its first event with output, at most this many bytes (the
# Responses API's lifecycle events echo instructions and tools: they can be large).
STREAM_HOLD_LIMIT = 1024 * 1024
# ... and at most this long: a model that thinks for minutes before its first output
# (keep-alive comments only) must not hold the answer's head back from the client, nor
# let an idle timeout between it and trimgate fire. Overflows come well within it.
STREAM_HOLD_SECONDS = 15.0
SMALL_JSON_LIMIT = 64 * 1024  # a 200 JSON answer of known length up to this is read whole
_CHOICE_ERROR = re.compile(rb'"finish_reason"\s*:\s*"error"')
# (one search for the first of them: a search per separator to the buffer's end, for each
# of many small events, was quadratic)
_EVENT_END_RE = re.compile(rb"\r\n\r\n|\n\n|\r\r")
Incoming = web.Request | FrontRequest  # aiohttp's request, or one trimgate's front parsed


@dataclass(slots=True)
class Attempt:
    """One upstream answer, with the bytes of its body already read to judge it."""

    resp: up.Answer
    head: bytes  # body bytes already read from resp, relayed first
    overflow: Overflow | None
    retry: bool = False
    # an overflow no trim can fix (the output reservation alone fills the window)
    unfixable: bool = False
    # an error no reader recognises whose words suspect an overflow, worth one probe (or,
    # not ``worded``, a plain client error: worth one for a request that outgrew the rest)
    suspect: Suspect | None = None


async def sniff_overflow(
    codec: Codec, resp: up.Answer, patterns: Patterns = (), *, uncapped: bool = False
) -> Attempt:
    """Read just enough of an answer to tell an overflow: the attempt, with those bytes,
    the overflow, whether the answer states one no trim can fix (``detect_unfixable``)
    and, for an error answer neither, whether its words suspect one (``detect_suspect``).

    ``patterns`` are the upstream's own overflow wordings (``overflow_patterns``).
    ``uncapped``: a chat request that set no output limit, whose answer stopped at
    "length" before producing anything states an overflow, as does a Responses request's
    with no ``max_output_tokens`` left incomplete for it (``detect_unspent_stop``)."""
    encoding = resp.headers.get("Content-Encoding", "")
    ctype = resp.headers.get("Content-Type", "").lower()
    if resp.status >= 400:
        head, complete = await up.read_head(resp, ERROR_BODY_LIMIT)
        if not complete:
            return Attempt(resp, head, None)
        body = head
        if encoding:
            inflated = decompress(head, encoding.lower(), ERROR_BODY_LIMIT * 8)
            if inflated is None:
                return Attempt(resp, head, None)
            body = inflated
        return _judge(codec, resp, head, body, patterns, suspect=True)
    if encoding or not 200 <= resp.status < 300:  # (NovelAI answers its errors with 201)
        return Attempt(resp, b"", None)
    if "text/event-stream" in ctype:
        return await _sniff_stream(codec, resp, patterns, uncapped=uncapped)
    if "json" in ctype:
        head, complete = await up.read_head(resp, 0)  # the first chunk
        if not complete and _may_be_error(head, _length(resp)):
            rest, complete = await up.read_head(resp, ERROR_BODY_LIMIT)
            head += rest
        if complete and may_state_error(head):  # ("finish_reason": "length" counts)
            return _judge(codec, resp, head, head, patterns, suspect=False, uncapped=uncapped)
        return Attempt(resp, head, None)
    if ctype.startswith(_UNTYPED) or not ctype:
        # an event stream sent as another type, its first event an error (a serverless
        # gateway's Lambda answers a plain request so, as octet-stream): held as a stream
        first = asyncio.timeout(STREAM_HOLD_SECONDS)  # a slow first byte: the head goes out
        try:
            async with first:
                head, _ = await up.read_head(resp, 0)
        except TimeoutError:
            if not first.expired():
                raise  # the upstream's own read timeout
            return Attempt(resp, b"", None)
        if _SSE_START.match(head) is None or b"error" not in head:
            return Attempt(resp, head, None)
        return await _sniff_stream(codec, resp, patterns, head, uncapped=uncapped)
    return Attempt(resp, b"", None)


_UNTYPED = ("text/plain", "application/octet-stream")
_SSE_START = re.compile(rb"\s*(?:data|event)[ \t]*:")


def _judge(
    codec: Codec,
    resp: up.Answer,
    head: bytes,
    body: bytes,
    patterns: Patterns,
    *,
    suspect: bool,
    uncapped: bool = False,
) -> Attempt:
    """The attempt a whole body makes: its overflow, whether it is unfixable and (when
    ``suspect``) whether its words suspect one; ``uncapped`` as for ``sniff_overflow``.
    A bug in reading it lets it through."""
    try:
        status = resp.status
        if status in UNAVAILABLE_STATUSES and "Retry-After" in resp.headers:
            status = 504  # told when to come back: a busy upstream, read as a timed-out one
        found = codec.detect_overflow(status, body, patterns)
        if found is None and uncapped and resp.status == 200:
            found = detect_unspent_stop(body)
        attempt = Attempt(
            resp, head, found, unfixable=found is None and detect_unfixable(resp.status, body)
        )
        if suspect and found is None and not attempt.unfixable:
            attempt.suspect = detect_suspect(resp.status, body, plain=True)
    except Exception as exc:
        _check_failed(exc)
        return Attempt(resp, head, None)
    return attempt


def _check_failed(exc: Exception) -> None:
    """A bug in reading an answer for an overflow: logged (its type and place, never the
    answer), and the answer goes through as it came."""
    log.error(
        "reading an answer for an overflow failed; it goes through as it came",
        exc_info=exc,
        extra={"event": "overflow_check_error", "error": type(exc).__name__},
    )


def _length(resp: up.Answer) -> int | None:
    value = resp.headers.get("Content-Length")
    if value is None or not value.isdigit() or "Transfer-Encoding" in resp.headers:
        return None
    return int(value)


def _may_be_error(first: bytes, length: int | None) -> bool:
    """Whether a 200 JSON answer whose first chunk is ``first`` may state an error, so
    that it is read whole before relaying: an error object or a platform's error envelope
    at its start, an error inside a choice (``"finish_reason": "error"``), or a small
    answer of known length (nothing to stream there: reading it whole delays nothing)."""
    start = first[:256].lstrip()
    if start[:1] not in (b"{", b"["):
        return False
    if b'"error"' in start or _CHOICE_ERROR.search(first) is not None or WINDOW_STOP_JSON in first:
        return True
    if states_envelope_error(start):
        return True
    return length is not None and length <= SMALL_JSON_LIMIT


async def _sniff_stream(
    codec: Codec, resp: up.Answer, patterns: Patterns, first: bytes = b"", *, uncapped: bool
) -> Attempt:
    """Hold a 200 stream's events until the first one with output (a role-only opener,
    lifecycle events and comments are held with it), checking each complete event for an
    overflow; past ``STREAM_HOLD_LIMIT`` bytes or ``STREAM_HOLD_SECONDS`` without output,
    the stream is relayed. A stream that ends within the hold holding only text, no SSE
    line, is read as an error written raw into it (``detect_bare_stream_overflow``).
    ``first``: what was read of it already; ``uncapped`` as for ``sniff_overflow``."""
    buf = bytearray(first)
    hold = asyncio.timeout(STREAM_HOLD_SECONDS)  # one timer for the whole hold
    try:
        async with hold:
            head, found, unfixable = await _hold_stream(codec, resp, patterns, buf, uncapped)
    except TimeoutError:
        if not hold.expired():
            raise  # the upstream's own read timeout
        return Attempt(resp, bytes(buf), None)  # cancelled in a read: what was read is in buf
    except UpstreamError:
        raise
    except Exception as exc:  # a bug in reading an event: what was held goes through
        _check_failed(exc)
        return Attempt(resp, bytes(buf), None)
    return Attempt(resp, head, found, unfixable=unfixable)


async def _hold_stream(
    codec: Codec, resp: up.Answer, patterns: Patterns, buf: bytearray, uncapped: bool
) -> tuple[bytes, Overflow | None, bool]:
    scanned = search = 0  # the start of the first event not yet judged; where to look
    held = ""  # the kind of a reply in an overflow's words held (once a stream), if any
    unspent: Overflow | None = None  # a stop before any output whose usage is yet unsaid
    while True:
        while (end := _event_end(buf, search)) is not None:
            block = bytes(buf[scanned : end[0]])
            scanned = search = end[1]
            found = codec.detect_stream_event_overflow(
                block, output_started=False, patterns=patterns
            )
            if found is not None:
                return bytes(buf), found, False
            if _unfixable_event(block):
                return bytes(buf), None, True
            if unspent is not None:  # a stop that stated no usage: what follows decides
                if (stands := _unspent_stop_stands(block, uncapped)) is None:
                    continue
                return bytes(buf), unspent if stands else None, False
            if not held and (found := detect_unspent_stop(block)) is not None:
                if (counted := _stop_usage(block, uncapped)) is not None:
                    return bytes(buf), found if counted else None, False
                unspent = found
                continue
            said = stream_event_output(block, held=held)
            if said == OUTPUT:
                return bytes(buf), None, False
            if said == UNSPENT:  # the reply held was the server's error
                return bytes(buf), codec.detect_stream_overflow(bytes(buf), patterns), False
            if said in HOLDS:
                held = said
        if len(buf) > STREAM_HOLD_LIMIT:
            return bytes(buf), unspent if uncapped else None, False
        chunk = await resp.readany()
        if not chunk:  # the stream ended before any output
            tail = bytes(buf[scanned:])  # a last event without its blank line
            found, unfixable = None, False
            if tail.strip():
                found = codec.detect_stream_event_overflow(
                    tail, output_started=False, patterns=patterns
                )
                unfixable = found is None and _unfixable_event(tail)
            if found is None and not unfixable and unspent is not None:
                stands = _unspent_stop_stands(tail, uncapped, ended=True)
                return bytes(buf), unspent if stands else None, False
            if found is None and not unfixable and tail.strip() and not held:
                found = detect_unspent_stop(tail)  # the stream's last event
                counted = _stop_usage(tail, uncapped) if found is not None else None
                if found is not None and not (uncapped if counted is None else counted):
                    found = None
            if found is None and not unfixable:  # bare text: an error written raw into it
                found = codec.detect_bare_stream_overflow(bytes(buf), patterns)
            return bytes(buf), found, unfixable
        search = max(scanned, len(buf) - 3)
        buf += chunk


def _stop_usage(block: bytes, uncapped: bool) -> bool | None:
    """What a usage in ``block`` says of a stop before any output: for a request that set
    no output limit (``uncapped``), that it counts no output (``unspent_usage``); for any
    other, that it counts the prompt alone (``stop_usage_counts_prompt_only``), as a whole
    answer so finished is read. None when ``block`` states no usage."""
    return (unspent_usage if uncapped else stop_usage_counts_prompt_only)(block)


def _unspent_stop_stands(block: bytes, uncapped: bool, *, ended: bool = False) -> bool | None:
    """Whether a stop before any output that stated no usage stays an overflow after
    this event (no error: the caller read those for themselves): a usage (OpenAI's chunk
    after the stop) decides (``_stop_usage``); [DONE], or the stream's end (``ended``),
    leaves it one only for an uncapped request; another choice's output makes it a
    normal answer (False); a comment or an empty event waits for the next (None)."""
    counted = _stop_usage(block, uncapped)
    if counted is not None:
        return counted
    if _DONE_RE.fullmatch(block) is not None:
        return uncapped
    if stream_event_output(block) == OUTPUT:
        return False
    return uncapped if ended else None


_DONE_RE = re.compile(rb"\s*data:[ \t]*\[DONE\]\s*")


def _unfixable_event(block: bytes) -> bool:
    return b"error" in block and detect_unfixable(200, block)


def _event_end(buf: bytearray, start: int) -> tuple[int, int] | None:
    """(end of the event, start of the next) of the first blank line at or after
    ``start``: lines end in LF, CRLF or CR."""
    match = _EVENT_END_RE.search(buf, start)
    return None if match is None else (match.start(), match.end())


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
