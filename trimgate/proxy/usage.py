"""Read the provider's usage from an answer as it is relayed.

Rules of this module:
- Pure: bytes in (``feed``), counts out (``usage``: prompt tokens and, of them, those
  read from the provider's prompt cache; ``output_tokens``); no I/O, no aiohttp. The
  relay feeds it every chunk it writes and never waits on it.
- It never holds the answer up or holds it whole: a stream is read through
  ``sse.SSEMarkedEvents`` (only events holding one of the codec's usage markers are
  decoded); a JSON answer is kept up to ``USAGE_JSON_LIMIT`` and parsed at the end.
- gzip / deflate answers are inflated on the side in bounded steps (the client still gets
  the compressed bytes); other encodings, bombs and corrupt streams teach nothing.
"""

from __future__ import annotations

import zlib
from typing import Any

import orjson

from trimgate.providers.base import Codec, Usage
from trimgate.sse import SSEMarkedEvents

USAGE_JSON_LIMIT = 8 * 1024 * 1024  # JSON answers larger than this teach no calibration
INFLATE_STEP = 1024 * 1024  # a compressed answer is inflated for its usage this much at a time
INFLATE_PER_READ = 64 * 1024 * 1024  # more from one read: a bomb, no count is read from it


class UsageSniffer:
    """The prompt usage an answer reports, read from its bytes as they pass."""

    __slots__ = ("_buf", "_codec", "_inflate", "_output", "_parsed", "_stream", "_usage")

    def __init__(self, codec: Codec, content_type: str, content_encoding: str = "") -> None:
        self._codec = codec
        ctype = content_type.lower()
        encoding = content_encoding.lower().strip()
        self._inflate: Any = None
        readable = not encoding
        if encoding in ("gzip", "x-gzip", "deflate"):
            wbits = zlib.MAX_WBITS | (16 if "gzip" in encoding else 0)
            self._inflate = zlib.decompressobj(wbits)
            readable = True
        sse = readable and "text/event-stream" in ctype
        self._stream: SSEMarkedEvents | None = (
            SSEMarkedEvents(codec.stream_usage_markers, USAGE_JSON_LIMIT) if sse else None
        )
        self._buf: bytearray | None = (
            bytearray() if readable and not sse and "json" in ctype else None
        )
        self._usage: Usage | None = None
        self._output: int | None = None
        self._parsed = 0  # bytes of ``_buf`` read into ``_usage`` / ``_output`` so far

    def _stop(self) -> None:
        self._stream = self._buf = None

    def _active(self) -> bool:
        if self._stream is not None:
            return not self._stream.closed
        return self._buf is not None

    def feed(self, chunk: bytes) -> None:
        if not self._active():
            return
        inflate = self._inflate
        if inflate is None:
            self._feed_plain(chunk)
            return
        try:  # in bounded steps: one compressed read may inflate to far more than a step
            data = inflate.decompress(chunk, INFLATE_STEP)
            self._feed_plain(data)
            budget = INFLATE_PER_READ
            while inflate.unconsumed_tail and self._active():
                budget -= len(data)
                if budget <= 0:
                    self._stop()
                    return
                data = inflate.decompress(inflate.unconsumed_tail, INFLATE_STEP)
                self._feed_plain(data)
        except zlib.error:
            self._stop()

    def _feed_plain(self, chunk: bytes) -> None:
        if not chunk:
            return
        if self._stream is not None:
            for event in self._stream.decode(chunk):
                found, output = self._codec.stream_usages(event.data)
                if found is not None:
                    self._usage = found
                if output is not None:
                    self._output = output
        elif self._buf is not None:
            if len(self._buf) + len(chunk) > USAGE_JSON_LIMIT:
                self._buf = None  # too big to parse for a count: teaches nothing
            else:
                self._buf += chunk

    def _read_json(self) -> bool:
        """Parse the JSON answer kept so far (once per length); False: not valid JSON."""
        buf = self._buf
        if not buf or len(buf) == self._parsed:
            return True
        try:
            body = orjson.loads(buf)
        except orjson.JSONDecodeError:
            return False
        self._parsed = len(buf)
        self._usage = self._codec.prompt_usage(body)
        self._output = self._codec.output_usage(body)
        return True

    @property
    def usage(self) -> Usage | None:
        """The last usage the answer stated: (prompt tokens, of them read from the
        prompt cache), or None (none yet, or unreadable)."""
        return self._usage if self._read_json() else None

    @property
    def output_tokens(self) -> int | None:
        """The output tokens the answer stated last, or None (none yet, or unreadable)."""
        return self._output if self._read_json() else None

    @property
    def prompt_tokens(self) -> int | None:
        """The prompt tokens of ``usage``."""
        found = self.usage
        return found[0] if found is not None else None
