"""Structured JSON log lines.

Records carry the fields given in ``extra``; nothing else of a request is
ever logged (no headers, no bodies), so credentials and message contents
cannot reach a log. The one opt-in exception is the wording of a provider's error
that a probe questioned (``trimming.reactive.log_wordings``, off by default), with
numbers, ids, quoted text, addresses and long tokens blanked (``signals.logged_wording``).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import sys
import threading
import time
from datetime import UTC, datetime
from typing import Any

import orjson

_BLANK = logging.LogRecord("", 0, "", 0, "", None, None).__dict__
_STANDARD = set(_BLANK) | {"message", "asctime"}
# LogRecord sets its own attributes first, then makeRecord adds ``extra``: the
# fields of a line are found after the first _N_STANDARD attributes.
_N_STANDARD = len(_BLANK)


class JsonFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__()
        self._second = -1
        self._stamp = ""

    def _timestamp(self, created: float) -> str:
        second = int(created)
        if second != self._second:  # one datetime per second, not per line
            self._second = second
            self._stamp = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        return f"{self._stamp}.{int((created - second) * 1000):03d}+00:00"

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": self._timestamp(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "pid": record.process,
            "msg": record.getMessage(),
        }
        for key, value in itertools.islice(record.__dict__.items(), _N_STANDARD, None):
            if key not in _STANDARD and not key.startswith("_"):
                line[key] = value
        if record.exc_info and record.exc_info[0] is not None:
            # The type and where it was raised, never the message or a traceback:
            # an exception's message may quote request contents.
            line["exc_type"] = record.exc_info[0].__name__
            tb = record.exc_info[2]
            while tb is not None and tb.tb_next is not None:
                tb = tb.tb_next
            if tb is not None:
                code = tb.tb_frame.f_code
                line["exc_where"] = f"{code.co_filename.rsplit('/', 1)[-1]}:{tb.tb_lineno}"
        return orjson.dumps(line, default=str).decode()


FLUSH_AFTER = 0.05  # seconds an info line may wait in the buffer
MAX_PENDING = 256  # lines


class JsonHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """JSON lines to a stream, written in batches.

    A line below WARNING waits at most ``FLUSH_AFTER`` seconds (or ``MAX_PENDING``
    lines) for others to go with it in one write: one system call per batch, not
    per request. A warning or worse is written at once, after what waits before
    it. Outside an event loop every line is written at once.
    """

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self.setFormatter(JsonFormatter())
        self._pending: list[str] = []
        self._timer: asyncio.TimerHandle | None = None
        self._timer_loop: asyncio.AbstractEventLoop | None = None
        self._timer_thread = 0

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:
            self.handleError(record)
            return
        self.write_line(line, record.levelno)

    def write_line(self, line: str, level: int) -> None:
        self._pending.append(line)
        if level >= logging.WARNING or len(self._pending) >= MAX_PENDING:
            self.flush()
        elif self._timer is None or (self._timer_loop is not None and self._timer_loop.is_closed()):
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                self.flush()
                return
            self._timer_loop, self._timer_thread = loop, threading.get_ident()
            self._timer = loop.call_later(FLUSH_AFTER, self._flush_due)

    def _flush_due(self) -> None:
        with self.lock:  # type: ignore[union-attr]
            self._timer = None
            self.flush()

    def flush(self) -> None:
        with self.lock:  # type: ignore[union-attr]
            timer, self._timer = self._timer, None
            if timer is not None and self._timer_thread == threading.get_ident():
                timer.cancel()  # off its loop's thread it is left to fire on nothing
            if self._pending:
                lines = "\n".join(self._pending) + "\n"
                self._pending.clear()
                try:
                    self.stream.write(lines)
                    self.stream.flush()
                except Exception:
                    pass  # a closed or broken stream: nothing better to do with the lines


_HANDLER: JsonHandler | None = None  # the one setup() installed


def line(logger: logging.Logger, level: int, msg: str, fields: dict[str, Any]) -> None:
    """``logger.log(level, msg, extra=fields)``, the same JSON line, for lines on the hot
    path: written straight to trimgate's handler, without a LogRecord, while nothing
    else (another handler, a filter) would see the record. Otherwise through logging."""
    if not logger.isEnabledFor(level):
        return
    handler = _HANDLER
    root = logging.root
    if (
        handler is None
        or len(root.handlers) != 1
        or root.handlers[0] is not handler
        or logger.handlers
        or logger.filters
        or root.filters
        or handler.filters
        or level < handler.level
        or not logger.propagate
        or logger.parent is not root
    ):
        logger.log(level, msg, extra=fields)
        return
    formatter = handler.formatter
    assert isinstance(formatter, JsonFormatter)
    data: dict[str, Any] = {
        "ts": formatter._timestamp(time.time()),
        "level": logging.getLevelName(level).lower(),
        "logger": logger.name,
        "pid": os.getpid(),
        "msg": msg,
    }
    data.update(fields)
    with handler.lock:  # type: ignore[union-attr]
        handler.write_line(orjson.dumps(data, default=str).decode(), level)


def flush() -> None:
    """Write what waits (before a process ends without logging.shutdown)."""
    for handler in logging.getLogger().handlers:
        handler.flush()


def setup(level: str = "INFO") -> None:
    # The logging HOWTO's "Optimization" switches: no caller lookup (a frame walk
    # per record), no thread names; records keep the pid (workers).
    logging._srcfile = None
    logging.logThreads = False
    logging.logMultiprocessing = False
    global _HANDLER
    handler = _HANDLER = JsonHandler(sys.stderr)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # aiohttp's access log would print request lines: keep it quiet.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
