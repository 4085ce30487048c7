"""JSON log lines: batched writes, and the hot-path line equal to logging's own."""

from __future__ import annotations

import asyncio
import io
import logging
import threading
from collections.abc import Iterator

import orjson
import pytest

from trimgate import logs


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    """trimgate's logging set up as `serve` does, writing to a buffer; restored after."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    logs.setup("INFO")
    buffer = io.StringIO()
    assert logs._HANDLER is not None
    logs._HANDLER.setStream(buffer)
    yield buffer
    root.handlers[:], root.level = saved
    logs._HANDLER = None


@pytest.fixture
def alone(stream: io.StringIO, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The LogRecords made, counted: the hot path makes none. A test using this calls
    ``isolate()`` first: pytest adds its own handlers when the test body starts."""
    made: list[str] = []
    real = logging.Logger.makeRecord

    def counting(self: logging.Logger, *args: object, **kwargs: object) -> logging.LogRecord:
        record = real(self, *args, **kwargs)  # type: ignore[arg-type]
        made.append(record.getMessage())
        return record

    monkeypatch.setattr(logging.Logger, "makeRecord", counting)
    yield made


def isolate() -> None:
    """Only trimgate's handler on the root, as under `trimgate serve`."""
    assert logs._HANDLER is not None
    logging.getLogger().handlers[:] = [logs._HANDLER]


def lines(buffer: io.StringIO) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in buffer.getvalue().splitlines()]


FIELDS = {"event": "request", "request_id": "ab12", "status": 200, "trimmed": False}


def test_the_hot_path_line_is_the_line_logging_writes(
    stream: io.StringIO, alone: list[str]
) -> None:
    isolate()
    log = logging.getLogger("trimgate")
    log.info("request", extra=FIELDS)
    logs.line(log, logging.INFO, "request", dict(FIELDS))
    assert alone == ["request"]  # the second line made no record
    via_logging, direct = lines(stream)
    assert list(via_logging) == list(direct)  # same keys in the same order
    assert {**via_logging, "ts": None} == {**direct, "ts": None}
    assert direct["level"] == "info" and direct["msg"] == "request"


def test_another_listener_gets_a_real_record(
    stream: io.StringIO, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="trimgate"):
        logs.line(logging.getLogger("trimgate"), logging.INFO, "request", dict(FIELDS))
    (record,) = [r for r in caplog.records if r.getMessage() == "request"]
    assert record.__dict__["request_id"] == "ab12"


def test_a_disabled_level_writes_nothing(stream: io.StringIO) -> None:
    logging.getLogger().setLevel(logging.WARNING)
    logs.line(logging.getLogger("trimgate"), logging.INFO, "request", dict(FIELDS))
    logs.flush()
    assert stream.getvalue() == ""


async def test_info_lines_wait_for_a_batch_warnings_do_not(
    stream: io.StringIO, alone: list[str]
) -> None:
    isolate()
    log = logging.getLogger("trimgate")
    log.info("first", extra={"n": 1})
    logs.line(log, logging.INFO, "second", {"n": 2})
    assert stream.getvalue() == ""  # waiting, at most FLUSH_AFTER
    log.warning("third", extra={"n": 3})  # written at once, after what waited before it
    assert [line["msg"] for line in lines(stream)] == ["first", "second", "third"]
    log.info("fourth")
    for _ in range(40):  # bounded: the timer fires after FLUSH_AFTER
        if "fourth" in stream.getvalue():
            break
        await asyncio.sleep(logs.FLUSH_AFTER / 4)
    assert lines(stream)[-1]["msg"] == "fourth"


async def test_a_full_batch_is_written_without_waiting(
    stream: io.StringIO, alone: list[str]
) -> None:
    isolate()
    log = logging.getLogger("trimgate")
    for i in range(logs.MAX_PENDING):
        log.info("line", extra={"i": i})
    assert len(lines(stream)) == logs.MAX_PENDING


async def test_flush_writes_what_waits(stream: io.StringIO, alone: list[str]) -> None:
    isolate()
    logging.getLogger("trimgate").info("pending")
    logs.flush()
    assert lines(stream)[0]["msg"] == "pending"


def test_outside_an_event_loop_lines_are_written_at_once(
    stream: io.StringIO, alone: list[str]
) -> None:
    isolate()
    logging.getLogger("trimgate").info("now")
    assert lines(stream)[0]["msg"] == "now"


def test_a_line_left_waiting_when_a_loop_closes_does_not_stall_the_next_loop(
    stream: io.StringIO, alone: list[str]
) -> None:
    isolate()
    log = logging.getLogger("trimgate")

    async def first() -> None:
        log.info("a")  # waits; its timer dies with this loop

    asyncio.run(first())

    async def second() -> str:
        log.info("b")
        await asyncio.sleep(logs.FLUSH_AFTER * 4)
        return stream.getvalue()

    assert '"msg":"b"' in asyncio.run(second())


def test_the_hot_path_honours_the_handlers_level(stream: io.StringIO, alone: list[str]) -> None:
    isolate()
    assert logs._HANDLER is not None
    logs._HANDLER.setLevel(logging.WARNING)
    log = logging.getLogger("trimgate")
    log.info("via logging")  # dropped by the handler's level
    logs.line(log, logging.INFO, "request", dict(FIELDS))
    logs.flush()
    assert stream.getvalue() == ""


async def test_a_line_from_another_thread_leaves_the_loops_timer_alone(
    stream: io.StringIO, alone: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate()
    log = logging.getLogger("trimgate")
    loop_thread = threading.get_ident()
    cancelled_on: list[int] = []
    real = asyncio.TimerHandle.cancel

    def spy(self: asyncio.TimerHandle) -> None:
        cancelled_on.append(threading.get_ident())
        real(self)

    monkeypatch.setattr(asyncio.TimerHandle, "cancel", spy)
    log.info("on the loop")  # waits, with a timer on this loop
    await asyncio.to_thread(log.warning, "from a thread")  # e.g. in /metrics' executor
    assert [line["msg"] for line in lines(stream)] == ["on the loop", "from a thread"]
    # TimerHandle.cancel is not thread-safe (uvloop: uv_close off the loop's thread)
    assert all(t == loop_thread for t in cancelled_on), cancelled_on
