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

The shared grammar and the writers are in ``common``, the front's reader in ``request``,
the client's in ``answer``; every name is importable from here.
"""

from __future__ import annotations

from trimgate.proxy.http11.answer import (
    END,
    MAX_ANSWER_HEAD,
    MAX_CHUNK_LINE,
    MAX_TRAILERS,
    Answer,
    AnswerReader,
    Closed,
    Data,
    content_length,
    parse_answer_head,
)
from trimgate.proxy.http11.common import (
    CTL,
    HEAD_END,
    HEX_DIGITS,
    LAST_CHUNK,
    NEED_DATA,
    NO_BODY_METHODS,
    NO_BODY_STATUS,
    TOKEN,
    ProtocolError,
    answer_head,
    chunk,
    request_head,
)
from trimgate.proxy.http11.request import (
    BODY,
    DELEGATED,
    DELEGATED_FIELDS,
    DONE,
    HEAD,
    IDLE,
    MAX_FIELDS,
    MAX_REQUEST_HEAD,
    MAX_REQUEST_LINE,
    METHODS,
    SINGLETONS,
    Delegate,
    Request,
    RequestReader,
    parse_request_head,
)

__all__ = [
    "BODY",
    "CTL",
    "DELEGATED",
    "DELEGATED_FIELDS",
    "DONE",
    "END",
    "HEAD",
    "HEAD_END",
    "HEX_DIGITS",
    "IDLE",
    "LAST_CHUNK",
    "MAX_ANSWER_HEAD",
    "MAX_CHUNK_LINE",
    "MAX_FIELDS",
    "MAX_REQUEST_HEAD",
    "MAX_REQUEST_LINE",
    "MAX_TRAILERS",
    "METHODS",
    "NEED_DATA",
    "NO_BODY_METHODS",
    "NO_BODY_STATUS",
    "SINGLETONS",
    "TOKEN",
    "Answer",
    "AnswerReader",
    "Closed",
    "Data",
    "Delegate",
    "ProtocolError",
    "Request",
    "RequestReader",
    "answer_head",
    "chunk",
    "content_length",
    "parse_answer_head",
    "parse_request_head",
    "request_head",
]
