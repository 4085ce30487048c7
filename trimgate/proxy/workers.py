"""``trimgate serve --workers N``: N processes on one port, one event stream.

* Listening: every worker binds the same port with SO_REUSEPORT; the kernel
  spreads new connections across them.
* Metrics: Prometheus multiprocess mode. The supervisor sets
  ``PROMETHEUS_MULTIPROC_DIR`` to a fresh directory before the workers start;
  each worker's ``/metrics`` reads every worker's files, so any worker answers
  with the sums.
* Events: a worker does not deliver its trims itself. It sends them to the
  supervisor over a Unix socket; the supervisor numbers them and sends each
  to every worker, so all workers hold the same ring buffer with the same
  ids, and an SSE client resuming with ``Last-Event-ID`` on another worker
  misses nothing. A worker that starts late (or restarts) is sent the recent
  events first. If the supervisor is gone, a worker delivers locally.
* Supervision: a worker that dies is restarted (at most ``MAX_RESTARTS``
  times a minute); SIGTERM / SIGINT stop them all, each with the grace
  ``server.shutdown_grace`` for its answers in flight (a worker still running
  ``STOP_MARGIN`` after that is killed).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import multiprocessing
import os
import shutil
import signal
import tempfile
import time
from collections import deque
from multiprocessing.process import BaseProcess
from typing import Any

import orjson

from trimgate.config import Config, parse_config
from trimgate.proxy.events import BUFFER_SIZE

log = logging.getLogger("trimgate")

MAX_RESTARTS = 5
STOP_MARGIN = 5.0  # seconds a stopping worker gets after its grace, to close and flush logs
LINE_LIMIT = 1 << 20  # an event is a few hundred bytes; its fields are bounded
WRITE_BUFFER_LIMIT = 1 << 20  # a worker that stops reading is disconnected, not waited for


# --- the supervisor ---------------------------------------------------------


class EventRelay:
    """Numbers events from all workers and sends each to every worker."""

    def __init__(self, buffer_size: int = BUFFER_SIZE) -> None:
        self._ids = itertools.count(1)
        self._writers: set[asyncio.StreamWriter] = set()
        # A worker that starts (or restarts) late gets the recent events too.
        self._recent: deque[bytes] = deque(maxlen=buffer_size)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for event in self._recent:
            writer.write(event)
        self._writers.add(writer)
        try:
            while line := await reader.readline():
                event = b'{"id":%d,"payload":%s}\n' % (next(self._ids), line.rstrip(b"\n"))
                self._recent.append(event)
                for w in list(self._writers):
                    if w.transport.get_write_buffer_size() > WRITE_BUFFER_LIMIT:
                        w.close()
                        self._writers.discard(w)
                        continue
                    w.write(event)
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass  # ValueError: a line over LINE_LIMIT; the worker reconnects
        finally:
            self._writers.discard(writer)
            writer.close()


def run_supervisor(config: Config, workers: int) -> None:
    tmp = tempfile.mkdtemp(prefix="trimgate-")
    metrics_dir = os.path.join(tmp, "metrics")
    os.mkdir(metrics_dir)
    socket_path = os.path.join(tmp, "events.sock")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
    try:
        asyncio.run(_supervise(config, workers, socket_path))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


async def _supervise(config: Config, workers: int, socket_path: str) -> None:
    relay = EventRelay()
    server = await asyncio.start_unix_server(relay.handle, path=socket_path, limit=LINE_LIMIT)
    ctx = multiprocessing.get_context("spawn")
    data = config.model_dump(mode="json")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)

    def start(slot: int) -> BaseProcess:
        proc = ctx.Process(
            target=worker_main, args=(data, socket_path, slot), name=f"trimgate-worker-{slot}"
        )
        proc.start()
        return proc

    procs = [start(i) for i in range(workers)]
    from trimgate.proxy.serve import say_where  # imported where used, as in worker_main

    say_where(config)
    restarts: list[float] = []
    try:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.5)
            for slot, proc in enumerate(procs):
                if proc.is_alive() or stop.is_set():
                    continue
                now = time.monotonic()
                restarts = [t for t in restarts if now - t < 60]
                if len(restarts) >= MAX_RESTARTS:
                    log.error("workers keep dying; stopping", extra={"event": "workers_failed"})
                    stop.set()
                    break
                restarts.append(now)
                log.warning(
                    "worker died; restarting",
                    extra={"event": "worker_restart", "slot": slot, "exitcode": proc.exitcode},
                )
                _mark_dead(proc)
                procs[slot] = start(slot)
    finally:
        for proc in procs:
            if proc.is_alive() and proc.pid is not None:
                os.kill(proc.pid, signal.SIGTERM)
        # a worker gives its answers in flight server.shutdown_grace, then closes
        deadline = time.monotonic() + config.server.shutdown_grace + STOP_MARGIN
        for proc in procs:
            await asyncio.to_thread(proc.join, max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                log.warning(
                    "a worker outlived the shutdown grace; killing it",
                    extra={"event": "worker_killed", "pid": proc.pid},
                )
                proc.kill()
        server.close()
        await server.wait_closed()


def _mark_dead(proc: BaseProcess) -> None:
    if proc.pid is None:
        return
    with contextlib.suppress(Exception):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(proc.pid)  # type: ignore[no-untyped-call]


# --- a worker ----------------------------------------------------------------


def worker_main(data: dict[str, Any], socket_path: str, slot: int) -> None:
    from trimgate import logs
    from trimgate.proxy.serve import install_uvloop, run_server

    logs.setup()
    install_uvloop()
    config = parse_config(data)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(run_server(config, reuse_port=True, relay_path=socket_path))
    finally:
        logs.flush()  # a worker process ends without logging.shutdown


class WorkerLink:
    """A worker's connection to the supervisor's event relay."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._writer: asyncio.StreamWriter | None = None
        self._task: asyncio.Task[None] | None = None
        self._deliver: Any = None
        self._last_id = 0

    async def start(self, deliver: Any) -> None:
        self._deliver = deliver
        reader, self._writer = await asyncio.open_unix_connection(self.path, limit=LINE_LIMIT)
        self._task = asyncio.create_task(self._run(reader))

    async def _run(self, reader: asyncio.StreamReader) -> None:
        """Stay connected to the relay; reconnect (bounded pace) when the link drops."""
        while True:
            await self._read(reader, self._deliver)
            while True:
                await asyncio.sleep(0.5)
                try:
                    reader, self._writer = await asyncio.open_unix_connection(
                        self.path, limit=LINE_LIMIT
                    )
                    break
                except OSError:
                    continue

    def send(self, payload: dict[str, Any]) -> bool:
        w = self._writer
        if w is None or w.is_closing() or w.transport.get_write_buffer_size() > WRITE_BUFFER_LIMIT:
            return False
        w.write(orjson.dumps(payload) + b"\n")
        return True

    async def _read(self, reader: asyncio.StreamReader, deliver: Any) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError, ValueError):
            while line := await reader.readline():
                message = orjson.loads(line)
                event_id = int(message["id"])
                if event_id > self._last_id:  # a reconnect replays the recent ones
                    self._last_id = event_id
                    deliver(event_id, message["payload"])
        self._writer = None

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._writer is not None:
            self._writer.close()
            self._writer = None
