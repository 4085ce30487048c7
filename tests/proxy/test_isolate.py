"""Dense bodies (very many small JSON objects) examined in the worker process, end to end
over loopback: the same trim as in a thread, retries replanned there too, and a worker
that dies or hits a bug never costs a request."""

from __future__ import annotations

import asyncio
import gzip
import io
import logging
import os
import pickle
import signal
import struct

import orjson
import pytest
from multidict import CIMultiDict

from tests.fakes import FakeProvider, Recorded, Reply, json_reply, openai_ok, openai_overflow
from tests.proxy.conftest import MakeStack, Stack
from trimgate.config import Config
from trimgate.proxy.app import PROXY
from trimgate.proxy.isolate import DENSE_OBJECTS, ExamineFailed, Isolation, _frame, dense, serve
from trimgate.proxy.routing import Router

PATH = "/v1/chat/completions"
MODELS = [{"match": "small-*", "context_window": 16_000}]
TRIM = ("trimmed", "dropped-turns", "kept-turns", "tokens-before", "tokens-after", "budget")


def dense_chat(turns: int = DENSE_OBJECTS) -> bytes:
    """A history of tiny messages: more JSON objects than DENSE_OBJECTS."""
    messages: list[dict[str, str]] = [{"role": "system", "content": "Be brief."}]
    for t in range(turns):  # numbers, so that it does not compress past the inflation ratio
        messages += [{"role": "user", "content": f"{t}"}, {"role": "assistant", "content": "a"}]
    messages.append({"role": "user", "content": f"now {turns}"})
    return orjson.dumps({"model": "small-1", "messages": messages})


def no_usage() -> FakeProvider:
    # answers without usage: nothing calibrates, so every request plans alike
    return FakeProvider(lambda r: json_reply(openai_ok()))


def isolation(stack: Stack) -> Isolation:
    found = stack.app[PROXY].offload.isolation
    assert found is not None
    return found


async def post(stack: Stack, body: bytes, **headers: str) -> dict[str, str]:
    resp = await stack.client.post(
        PATH, data=body, headers={"Content-Type": "application/json", **headers}
    )
    assert resp.status == 200, await resp.text()
    await resp.read()
    return {h: resp.headers.get(f"x-trimgate-{h}", "") for h in (*TRIM, "skipped", "retries")}


def test_dense_is_told_by_the_objects_in_the_first_bytes() -> None:
    assert dense(dense_chat(), compressed=False)
    assert not dense(orjson.dumps({"messages": [{"content": "x" * 10_000_000}]}), False)
    assert not dense(dense_chat(60_000), False)  # too many: forwarded as it came, unshipped
    assert dense(b"x" * 20_000, compressed=True)  # what it inflates to is not known
    assert not dense(b"x" * 1_000, compressed=True)  # small: a thread inflates it quickly


async def test_a_dense_body_is_trimmed_in_the_worker_as_in_a_thread(
    make_stack: MakeStack,
) -> None:
    body = dense_chat()
    in_process = await make_stack(models=MODELS)
    in_thread = await make_stack(models=MODELS, server={"examine_process": False})
    assert in_thread.app[PROXY].offload.isolation is None
    assert await isolation(in_process).start()
    # the same requests to both (the first answer's usage calibrates the second's plan);
    # compressed bodies go to the worker too, and inflate there
    gzipped = gzip.compress(body)
    for data, headers in ((body, {}), (gzipped, {"Content-Encoding": "gzip"})):
        got = await post(in_process, data, **headers)
        assert got["trimmed"] == "true" and got["skipped"] == ""
        assert got == await post(in_thread, data, **headers)
        assert in_process.fake.requests[-1].body == in_thread.fake.requests[-1].body


async def test_a_retry_of_a_dense_body_is_replanned_in_the_worker(make_stack: MakeStack) -> None:
    first: list[int] = []

    def answer(r: Recorded) -> Reply:  # the first body sent overflows, the retry fits
        first.append(len(r.body))
        if len(r.body) > first[0] * 0.9:
            return openai_overflow(20_000, 16_000)
        return json_reply(openai_ok(10))

    stack = await make_stack(FakeProvider(answer), models=MODELS)
    worker = isolation(stack)
    assert await worker.start()
    got = await post(stack, dense_chat())
    assert got["retries"] == "1" and got["trimmed"] == "true"
    assert worker.answered == {"examine": 1, "replan": 1}


async def test_a_worker_that_dies_costs_no_request(make_stack: MakeStack) -> None:
    stack = await make_stack(no_usage(), models=MODELS)
    worker = isolation(stack)
    assert await worker.start()
    first = worker.pid
    assert first is not None
    os.kill(first, signal.SIGKILL)
    await asyncio.sleep(0.2)
    body = dense_chat()
    got = await post(stack, body)  # examined in a thread meanwhile
    assert got["trimmed"] == "true"
    assert await worker.start()  # a later request starts it again
    assert worker.pid not in (None, first)
    assert await post(stack, body) == got
    assert worker.answered["examine"] == 1


async def test_a_body_too_large_once_inflated_is_refused_by_the_worker(
    make_stack: MakeStack,
) -> None:
    stack = await make_stack(models=MODELS, server={"max_body_bytes": 1_000_000})
    assert await isolation(stack).start()
    bomb = gzip.compress(b'{"model": "small-1", "messages": [' + b" " * 5_000_000 + b"]}")
    resp = await stack.client.post(
        PATH, data=bomb, headers={"Content-Type": "application/json", "Content-Encoding": "gzip"}
    )
    assert resp.status == 413
    assert stack.fake.requests == []


@pytest.mark.parametrize("closed", [True, False], ids=["pipe-closed", "killed"])
async def test_the_worker_ends_with_the_proxy(make_stack: MakeStack, closed: bool) -> None:
    stack = await make_stack(models=MODELS)
    worker = isolation(stack)
    assert await worker.start()
    pid = worker.pid
    assert pid is not None
    if not closed:
        os.kill(pid, signal.SIGKILL)
        await asyncio.sleep(0.2)
    await stack.app[PROXY].close()
    assert worker.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_the_worker_answers_a_bug_with_its_type_and_serves_on() -> None:
    config = Config()
    route = Router(config).route("POST", PATH)
    body = dense_chat(10)
    calls = [
        ("examine", (CIMultiDict[str](), route, body, {}, {})),  # before the config: a bug
        ("config", config),
        ("examine", (CIMultiDict[str](), route, body, {}, {})),
    ]
    stdin = io.BytesIO(b"".join(_frame(call) for call in calls))
    stdout = io.BytesIO()
    serve(stdin, stdout)
    out = stdout.getvalue()
    answers = []
    while out:
        (size,) = struct.unpack(">Q", out[:8])
        answers.append(pickle.loads(out[8 : 8 + size]))
        out = out[8 + size :]
    assert answers[0] == ("error", "AssertionError")
    assert answers[1] == ("ok", None)
    kind, (chat, reason, same) = answers[2]
    assert kind == "ok" and reason == "unknown-window" and same  # no window: sent as it came
    assert chat is not None and chat.body == b"" and chat.send_body == b""
    assert chat.report.tokens_before > 0 and chat.codec.wire_format == "openai"


def workers_of_this_process() -> list[int]:
    """Live children of this test process that run the examining worker."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        state, ppid = fields[0], int(fields[1])
        if ppid == os.getpid() and state != "Z" and b"trimgate.proxy.isolate" in cmdline:
            found.append(int(entry))
    return found


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.3], ids=["at-once", "starting", "soon-after"])
async def test_a_shutdown_while_the_worker_starts_leaves_no_process(
    make_stack: MakeStack, delay: float
) -> None:
    stack = await make_stack(models=MODELS)
    before = set(workers_of_this_process())
    await post(stack, dense_chat())  # starts the worker, examined in a thread meanwhile
    await asyncio.sleep(delay)
    await stack.app[PROXY].close()
    assert set(workers_of_this_process()) <= before


@pytest.mark.parametrize("failure", ["bug-in-worker", "bug-reaching-it"])
async def test_a_failure_of_the_process_path_never_costs_the_request(
    make_stack: MakeStack,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    failure: str,
) -> None:
    async def failing(*args: object) -> None:
        if failure == "bug-in-worker":
            raise ExamineFailed("KeyError")  # the worker answered a bug with its type
        raise RuntimeError("the plumbing broke")

    monkeypatch.setattr(Isolation, "examine", failing)
    stack = await make_stack(no_usage(), models=MODELS)
    body = dense_chat()
    with caplog.at_level(logging.WARNING, logger="trimgate"):
        got = await post(stack, body)
    events = [getattr(r, "event", "") for r in caplog.records]
    if failure == "bug-in-worker":  # as a bug in a thread: forwarded as it came
        assert got["skipped"] == "internal-error" and got["trimmed"] != "true"
        assert stack.fake.requests[-1].body == body
        assert "examine_error" in events
    else:  # a thread examines it instead
        assert got["trimmed"] == "true" and got["skipped"] == ""
        assert "examine_process" in events
