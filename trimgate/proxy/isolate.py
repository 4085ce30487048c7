"""Examination in a worker process, for bodies of very many small JSON objects.

Rules of this module:
- Only dense bodies come here (``dense``): parsing and decoding them holds the GIL for
  tens of milliseconds at a stretch (orjson never lets it go, nor does compiled code), so
  a worker thread cannot give it back to the event loop and every other request waits.
  In another process they cost the loop only the copy of their bytes. Compressed bodies
  over 16 KiB come too: what they inflate to is not known before.
- The worker is a ``python`` child running ``main``, a process of its own (never a fork of
  the serving process, nor a re-run of the caller's main module). It builds its own
  ``Examiner`` from the config; each call ships the request's bytes and the little state
  examination reads (calibration, learned windows) and gets back the ``Chat`` without the
  bytes the caller already holds. Calls take turns: one worker, one call at a time.
- The worker starts with the first dense body; until it is up, dense bodies are examined
  in a thread as before. A worker that dies is started again by a later call, and the
  request it had is examined in a thread: never lost, never a 500.
- The core's compiled dataclasses do not unpickle as they are (frozen, slots): they cross
  as their fields (``_register``), a codec as its format's name.
"""

from __future__ import annotations

import asyncio
import contextlib
import copyreg
import dataclasses
import logging
import pickle
import struct
import sys
from collections.abc import Mapping
from typing import Any, BinaryIO, Final

from multidict import CIMultiDict

from trimgate.config import Config
from trimgate.providers.base import Codec, DecodeOptions
from trimgate.providers.registry import CODECS
from trimgate.proxy.examine import MAX_EXAMINED_OBJECTS, Chat, Examiner, InflatedTooLarge
from trimgate.proxy.routing import Route
from trimgate.trimming.estimate import Calibration
from trimgate.trimming.pipeline import Policy, TrimReport
from trimgate.trimming.policy import Settings

log = logging.getLogger("trimgate")

# A body with more '{' than this in its first SAMPLE_BYTES is examined in the worker:
# about 10 ms of decoding at 0.5-1 us an object.
DENSE_OBJECTS: Final = 10_000
SAMPLE_BYTES: Final = 4 * 2**20
COMPRESSED_BYTES: Final = 16 * 1024  # a compressed body over this goes to the worker
START_TIMEOUT: Final = 30.0  # seconds the worker may take to answer its first call
CALL_TIMEOUT: Final = 60.0  # seconds one call may take before the worker is given up
# Request headers examination reads (the others stay home)
_HEADERS: Final = ("Content-Encoding", "x-trimgate-mode", "x-trimgate-budget", "anthropic-beta")
_LENGTH = struct.Struct(">Q")
# The worker's command (imported by name: what it pickles must name this module, not __main__)
_WORKER: Final = "from trimgate.proxy.isolate import main; main()"


def dense(body: bytes, compressed: bool) -> bool:
    """Whether examining ``body`` belongs in the worker process: it holds many JSON objects
    (counted as '{' in its first 4 MiB: about 0.3 ms) but not too many to be examined at
    all (``too-many-items``), or it is compressed and over 16 KiB
    (what it inflates to is not known before; a smaller one stays in a thread)."""
    if compressed:
        return len(body) > COMPRESSED_BYTES
    # past MAX_EXAMINED_OBJECTS it is forwarded unexamined: a thread tells that at once,
    # without shipping the body
    return DENSE_OBJECTS < body.count(b"{", 0, SAMPLE_BYTES) <= MAX_EXAMINED_OBJECTS


# --- crossing the process boundary ------------------------------------------------------


def _fields(obj: Any) -> tuple[type[Any], tuple[Any, ...]]:
    return type(obj), tuple(getattr(obj, f.name) for f in dataclasses.fields(obj))


def _codec(wire_format: str) -> Codec:
    return CODECS[wire_format]


def _codec_name(codec: Codec) -> tuple[Any, tuple[str]]:
    return _codec, (codec.wire_format,)


def _register() -> None:
    for cls in (TrimReport, Policy, Settings, DecodeOptions, Calibration):
        copyreg.pickle(cls, _fields)
    for codec in CODECS.values():
        copyreg.pickle(type(codec), _codec_name)


_register()


def _frame(obj: object) -> bytes:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(data)) + data


# --- the worker's side --------------------------------------------------------------------


def main() -> None:
    """The worker process: calls on stdin, answers on stdout."""
    serve(sys.stdin.buffer, sys.stdout.buffer)


def serve(stdin: BinaryIO, stdout: BinaryIO) -> None:
    """Answer calls until the caller closes the pipe: the first one carries the config."""
    examiner: Examiner | None = None
    while head := stdin.read(_LENGTH.size):
        (size,) = _LENGTH.unpack(head)
        op, args = pickle.loads(stdin.read(size))
        try:
            if op == "config":
                examiner = Examiner(args)
                answer: object = ("ok", None)
            elif op == "examine":
                assert examiner is not None
                answer = ("ok", _examine(examiner, *args))
            else:
                chat, policy, max_body = args
                answer = ("ok", chat.replan(policy, max_body))
        except InflatedTooLarge as exc:
            answer = ("too-large", exc.limit)
        except Exception as exc:  # a bug: the caller forwards the body untouched and logs it
            answer = ("error", type(exc).__name__)
        stdout.write(_frame(answer))
        stdout.flush()


def _examine(
    examiner: Examiner,
    headers: CIMultiDict[str],
    route: Route,
    body: bytes,
    calibration: dict[str, Calibration],
    learned: dict[str, int],
) -> tuple[Chat | None, str | None, bool]:
    """The examined chat without the request's bytes, why it is not trimmed up front, and
    whether the body to send is the request's own."""
    chat, reason = examiner.examine(headers, route, body, calibration, learned)
    same = False
    if chat is not None:
        same = chat.send_body is body
        chat.body = b""  # the caller holds it
        if same:
            chat.send_body = b""
    return chat, reason, same


# --- the caller's side ----------------------------------------------------------------------


class ExamineFailed(Exception):
    """The worker hit a bug examining a body (its type name is the message)."""


class _Gone(Exception):
    """The worker is not there (starting, or it died)."""


class Isolation:
    """The worker process for dense bodies, started on first use."""

    __slots__ = ("_config", "_proc", "_starting", "_turn", "answered")

    def __init__(self, config: Config) -> None:
        self._config = config
        self._proc: asyncio.subprocess.Process | None = None
        self._starting: asyncio.Task[None] | None = None
        self._turn = asyncio.Lock()
        self.answered = {"examine": 0, "replan": 0}  # calls the worker answered, by kind

    async def examine(
        self,
        headers: Mapping[str, str],
        route: Route,
        body: bytes,
        calibration: Mapping[str, Calibration],
        learned: Mapping[str, int],
    ) -> tuple[Chat | None, str | None] | None:
        """The examined chat and why it is not trimmed up front, as ``Examiner.examine``;
        None: no worker to do it (starting, or gone): examine it in a thread.
        Raises ``InflatedTooLarge`` (the caller's 413) and ``ExamineFailed``."""
        sent = CIMultiDict((k, v) for k in _HEADERS for v in _getall(headers, k))
        args = (sent, route, body, dict(calibration), dict(learned))
        try:
            chat, reason, same = await self._call("examine", args)
        except _Gone:
            return None
        if chat is not None:
            chat.body = body
            if same:
                chat.send_body = body
        return chat, reason

    async def replan(
        self, chat: Chat, policy: Policy, max_body: int
    ) -> tuple[TrimReport, bytes] | None:
        """A retry's report and body (``Chat.replan``) from the worker; None: no worker.
        Raises ``ExamineFailed``."""
        try:
            found: tuple[TrimReport, bytes] = await self._call("replan", (chat, policy, max_body))
        except _Gone:
            return None
        return found

    async def _call(self, op: str, args: tuple[Any, ...]) -> Any:
        proc = self._proc
        if proc is None or proc.returncode is not None:
            self._start()
            raise _Gone
        # the exchange runs to its end even if the caller is cancelled (a client gone):
        # a call cut between its question and its answer would leave the answer in the pipe
        # for the next caller
        try:
            question = _frame((op, args))
        except Exception as exc:  # a bug here: nothing was sent, the worker is fine
            raise ExamineFailed(type(exc).__name__) from None
        exchange = asyncio.get_running_loop().create_task(self._exchange(proc, question))
        exchange.add_done_callback(_consume)
        answer = await asyncio.shield(exchange)
        self.answered[op] += 1
        return _answer(answer)

    async def _exchange(self, proc: asyncio.subprocess.Process, question: bytes) -> Any:
        async with self._turn:
            if proc is not self._proc:  # stopped while this call waited its turn
                raise _Gone
            try:
                async with asyncio.timeout(CALL_TIMEOUT):
                    return await _ask(proc, question)
            except Exception as exc:  # the pipe broke, the worker died or hung, or its
                # answer did not read: where the pipe stands is not known, so it goes
                log.warning(
                    "the examining process is gone; a later request starts it again",
                    extra={"event": "examine_process", "error_type": type(exc).__name__},
                )
                self._stop()
                raise _Gone from None

    async def start(self) -> bool:
        """Start the worker now, rather than with the first dense body, and wait for it;
        whether it is up."""
        if self._proc is None or self._proc.returncode is not None:
            self._start()
            assert self._starting is not None
            await asyncio.shield(self._starting)
        return self._proc is not None

    @property
    def pid(self) -> int | None:
        """The worker's process id, when it is up."""
        return self._proc.pid if self._proc is not None else None

    def _start(self) -> None:
        if self._starting is None or self._starting.done():
            self._starting = asyncio.get_running_loop().create_task(self._spawn())

    async def _spawn(self) -> None:
        """Start the worker and hand it the config; it serves once that is answered."""
        self._stop()
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-c",
                _WORKER,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
            )
        except OSError as exc:
            log.warning(
                "the examining process did not start; dense bodies are examined in threads",
                extra={"event": "examine_process", "error_type": type(exc).__name__},
            )
            return
        try:
            async with asyncio.timeout(START_TIMEOUT):
                _answer(await _ask(proc, _frame(("config", self._config))))
        except BaseException as exc:  # a failed start, or a shutdown while it started
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await asyncio.shield(proc.wait())  # reaped: nothing left open
            if not isinstance(exc, Exception):
                raise
            log.warning(
                "the examining process did not start; dense bodies are examined in threads",
                extra={"event": "examine_process", "error_type": type(exc).__name__},
            )
            return
        self._proc = proc

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()

    async def close(self) -> None:
        """Stop the worker (closing its pipe ends it; a worker that lingers is killed)."""
        if self._starting is not None:
            self._starting.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._starting
        proc, self._proc = self._proc, None
        if proc is None or proc.returncode is not None:
            return
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            async with asyncio.timeout(2.0):
                await proc.wait()
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()


async def _ask(proc: asyncio.subprocess.Process, question: bytes) -> Any:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(question)
    await proc.stdin.drain()
    (size,) = _LENGTH.unpack(await proc.stdout.readexactly(_LENGTH.size))
    return pickle.loads(await proc.stdout.readexactly(size))


def _answer(answer: tuple[str, Any]) -> Any:
    kind, value = answer
    if kind == "too-large":
        raise InflatedTooLarge(value)
    if kind == "error":
        raise ExamineFailed(value)
    return value


def _consume(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: a caller that went away does not leave it unread


def _getall(headers: Mapping[str, str], name: str) -> list[str]:
    getall = getattr(headers, "getall", None)
    if getall is not None:
        return list(getall(name, ()))
    value = headers.get(name)
    return [] if value is None else [value]
