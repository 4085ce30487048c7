"""A sans-IO decoder of Server-Sent Events, and an encoder.

``SSEDecoder.decode(chunk)`` takes bytes split anywhere and returns the events
completed by them; ``flush()`` returns the last event of a stream that ended
without a blank line. The decoder follows the WHATWG rules that matter for
relaying: a leading BOM is skipped; lines end in LF, CRLF or CR; ``data``
lines join with LF; comments (``:``) are ignored; a blank line dispatches an
event that has data. A line longer than ``max_line`` is dropped whole.
"""

from __future__ import annotations

from dataclasses import dataclass

BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True, slots=True)
class SSEEvent:
    data: str
    event: str = ""
    id: str | None = None


class SSEDecoder:
    __slots__ = (
        "_buffer",
        "_data",
        "_discard",
        "_event",
        "_id",
        "_pending_cr",
        "_start",
        "max_line",
    )

    def __init__(self, max_line: int = 1 << 20) -> None:
        self._buffer = bytearray()
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None
        self._pending_cr = False
        self._discard = False  # inside a line too long to keep, until its end
        self._start: bytes | None = b""  # the stream's first bytes, until a BOM is ruled out
        self.max_line = max_line  # a longer line is dropped, not buffered without bound

    def decode(self, chunk: bytes) -> list[SSEEvent]:
        events: list[SSEEvent] = []
        if not chunk:
            return events
        if self._start is not None:
            chunk = self._start + chunk
            if len(chunk) < 3 and BOM.startswith(chunk):
                self._start = chunk
                return events
            self._start = None
            if chunk.startswith(BOM):
                chunk = chunk[3:]
        if self._pending_cr and chunk[:1] == b"\n":
            chunk = chunk[1:]  # the LF of a CRLF split across chunks
        self._pending_cr = False
        if not chunk:
            return events
        if b"\r" in chunk:  # every line end becomes LF (a CR at the end may start a CRLF)
            self._pending_cr = chunk[-1:] == b"\r"
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = chunk.split(b"\n")
        tail = lines.pop()  # the unfinished last line (empty when the chunk ends a line)
        if lines:
            if self._discard:  # the end of a dropped line, not a line of its own
                self._discard = False
                del lines[0]
            elif self._buffer:
                self._buffer += lines[0]
                lines[0] = bytes(self._buffer)
                self._buffer.clear()
            for raw in lines:
                self._line(raw, events)
        if tail and not self._discard:
            if len(self._buffer) + len(tail) > self.max_line:
                self._buffer.clear()
                self._discard = True
            else:
                self._buffer += tail
        return events

    def flush(self) -> list[SSEEvent]:
        events: list[SSEEvent] = []
        if self._start:
            self._buffer += self._start
            self._start = None
        if self._buffer and not self._discard:
            self._line(bytes(self._buffer), events)
            self._buffer.clear()
        self._line(b"", events)
        return events

    def _line(self, raw: bytes, events: list[SSEEvent]) -> None:
        if not raw:
            if self._data:
                events.append(SSEEvent("\n".join(self._data), self._event, self._id))
            self._data = []
            self._event = ""
            return
        line = raw.decode("utf-8", "replace")
        if line[0] == ":":
            return
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value


def encode_event(data: str, *, event: str = "", id: str | None = None) -> bytes:
    parts: list[str] = []
    if id is not None:
        parts.append(f"id: {id}\n")
    if event:
        parts.append(f"event: {event}\n")
    for line in data.split("\n"):
        parts.append(f"data: {line}\n")
    parts.append("\n")
    return "".join(parts).encode("utf-8")


def encode_comment(text: str = "") -> bytes:
    return f": {text}\n\n".encode()
