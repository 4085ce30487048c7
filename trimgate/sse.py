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


def event_fields(head: bytes, limit: int) -> list[list[tuple[bytes, bytes]]]:
    """The fields of a stream head's first ``limit`` blocks, for readers that must see
    what ``SSEDecoder`` leaves out: data-less events, non-standard fields.

    Each block (text up to a blank line; the head's unfinished tail is the last) is a list
    of ``(field, value)``: line ends of every kind, comments and the space after the colon
    handled as the decoder handles them. The rest of the head is not scanned.
    """
    if b"\r" in head:
        head = head.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    blocks: list[list[tuple[bytes, bytes]]] = []
    for block in head.split(b"\n\n", limit)[:limit]:
        fields: list[tuple[bytes, bytes]] = []
        for line in block.split(b"\n"):
            if not line or line[:1] == b":":
                continue
            field, sep, value = line.partition(b":")
            if sep and value[:1] == b" ":
                value = value[1:]
            fields.append((field, value))
        blocks.append(fields)
    return blocks


class SSEMarkedEvents:
    """The events of a stream that may hold one of ``markers``, found without decoding the
    rest.

    The stream is cut at its event boundaries (a blank line) with C-level byte searches,
    and only the stretches of whole events that hold a marker are decoded, so an event
    without one may come with them (the caller reads each): reading a chunk costs a
    ``find``, not a parse. Events are matched by their raw bytes, so a marker must
    not span a line end. Once a CR shows up (line ends are not plain LF, so a boundary is
    not a plain ``b"\\n\\n"``), every later event is decoded, by an ``SSEDecoder``. An event
    longer than ``max_event`` bytes is skipped; in a CR stream one ends the reading
    (``closed``).
    """

    __slots__ = ("_decoder", "_markers", "_max", "_parts", "_pending", "_skipping", "closed")

    def __init__(self, markers: tuple[bytes, ...], max_event: int) -> None:
        self._markers = markers
        self._max = max_event
        # the stream's bytes since its last event boundary, while it is cut by byte search
        self._parts: list[bytes] = []
        self._pending = 0
        self._skipping = False  # inside an event too long to decode, until its end
        self._decoder: SSEDecoder | None = None  # the full decoder, once CR line ends show up
        self.closed = False

    def decode(self, chunk: bytes) -> list[SSEEvent]:
        if self.closed or not chunk:
            return []
        if self._decoder is not None:
            return self._decoder.decode(chunk)
        parts = self._parts
        if b"\r" in chunk:
            if self._skipping:  # an oversized event in a CR stream: its end is not found
                self.closed = True
                self._parts = []
                return []
            self._decoder = SSEDecoder()
            self._parts = []
            return self._decoder.decode(b"".join(parts) + chunk)
        found = chunk.rfind(b"\n\n")
        if found >= 0:
            end = found + 2
        elif chunk[:1] == b"\n" and parts and parts[-1][-1:] == b"\n":
            end = 1  # the blank line straddles two chunks
        else:
            self._pending += len(chunk)
            if self._skipping or self._pending > self._max:
                # an event longer than the limit is not read: only its last byte is
                # kept, to see a blank line that straddles two chunks
                self._skipping = True
                self._parts = [chunk[-1:]]
            else:
                parts.append(chunk)
            return []
        rest = chunk[end:]
        self._parts = [rest] if rest else []
        self._pending = len(rest)
        if self._skipping:
            # the skipped event ends at its first blank line; later events in this
            # chunk up to ``end`` are whole and are read
            self._skipping = False
            straddled = chunk[:1] == b"\n" and parts[-1:] == [b"\n"]
            first = 1 if straddled else chunk.find(b"\n\n") + 2
            complete = chunk[first:end]
        else:
            complete = b"".join(parts) + chunk[:end] if parts else chunk[:end]
        if complete and any(marker in complete for marker in self._markers):
            return SSEDecoder().decode(complete)  # it starts and ends at a boundary
        return []


def encode_event(data: str | bytes, *, event: str = "", id: str | int | None = None) -> bytes:
    """One event's frame. ``data`` as bytes (already UTF-8, e.g. serialised JSON) is
    framed without a round trip through ``str`` when it holds no line end."""
    if isinstance(data, bytes) and b"\n" not in data and b"\r" not in data:
        head = b""
        if isinstance(id, int):
            head = b"id: %d\n" % id
        elif id is not None:
            head = b"id: %s\n" % id.encode()
        if event:
            head += b"event: %s\n" % event.encode()
        return b"%sdata: %s\n\n" % (head, data)
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    parts: list[str] = []
    if id is not None:
        parts.append(f"id: {id}\n")
    if event:
        parts.append(f"event: {event}\n")
    for line in text.split("\n"):
        parts.append(f"data: {line}\n")
    parts.append("\n")
    return "".join(parts).encode("utf-8")


def encode_comment(text: str = "") -> bytes:
    return f": {text}\n\n".encode()


def encode_retry(milliseconds: int) -> bytes:
    """The reconnection delay a client should wait after the stream ends."""
    return b"retry: %d\n\n" % milliseconds
