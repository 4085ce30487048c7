"""Structured JSON log lines.

Records carry the fields given in ``extra``; nothing else of a request is
ever logged (no headers, no bodies), so credentials and message contents
cannot reach a log.
"""

from __future__ import annotations

import itertools
import logging
import sys
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


def setup(level: str = "INFO") -> None:
    # The logging HOWTO's "Optimization" switches: no caller lookup (a frame walk
    # per record), no thread names; records keep the pid (workers).
    logging._srcfile = None
    logging.logThreads = False
    logging.logMultiprocessing = False
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # aiohttp's access log would print request lines: keep it quiet.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
