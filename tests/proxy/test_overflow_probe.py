"""Probes end to end over loopback: an error no reader recognises, whose words only
suspect an overflow, is resent trimmed to 2/3, and once more to 4/9 when the same wording
comes back (ids and numbers aside). The probe's answer decides: a success (``fixed``), the
same wording with the prompt's count moved down with the trim (``confirmed``, and the
ladder goes on), or anything else (``refuted``: the provider's first answer goes back,
byte for byte). Each wording's verdict is remembered per upstream."""

from __future__ import annotations

import itertools
import logging
from typing import Any

import orjson
import pytest

from tests.fakes import FakeProvider, Recorded, Reply, json_reply, openai_ok
from tests.proxy.bodies import openai_chat
from tests.proxy.conftest import MakeStack
from trimgate.proxy import retry
from trimgate.proxy.retry import Wordings
from trimgate.proxy.signals import logged_wording

# every stack: a refuted probe relays an answer read whole, kept through the probe
pytestmark = pytest.mark.every_stack

LABELS = {"upstream": "openai", "model": "gpt-4o"}
PATH = "/v1/chat/completions"


def text_too_long() -> Reply:
    # NAVER CLOVA's OpenAI-compatible mode: no count, no word any reader keys on
    return json_reply({"status": {"code": "40003", "message": "Text too long"}}, status=400)


def units_over(units: int, limit: int) -> Reply:
    # a server that states its own unit, in a wording no table lists
    message = f"Sequence holds {units} units, which is over the limit of {limit} units"
    return json_reply({"error": {"message": message}}, status=400)


async def test_a_probe_the_trim_fixes_goes_through_and_teaches_the_wording(
    make_stack: MakeStack, caplog: pytest.LogCaptureFixture
) -> None:
    first: list[int] = []

    def answer(r: Recorded) -> Reply:
        first.append(len(r.body))
        return text_too_long() if len(r.body) > first[0] * 0.8 else json_reply(openai_ok(10))

    fake = FakeProvider(answer)
    stack = await make_stack(fake)
    with caplog.at_level(logging.INFO, logger="trimgate"):
        resp = await stack.client.post(PATH, json=openai_chat(24, model="gpt-4o"))
    assert resp.status == 200, await resp.text()
    assert len(fake.requests) == 2
    assert resp.headers["x-trimgate-probe"] == "fixed"
    assert resp.headers["x-trimgate-reason"] == "reactive"
    assert resp.headers["x-trimgate-retries"] == "1"
    assert stack.metric("trimgate_overflow_probes_total", **LABELS, result="fixed") == 1
    assert stack.metric("trimgate_context_overflows_total", **LABELS) == 1
    assert [e["reason"] for e in stack.events()] == ["reactive"]
    probes = [r for r in caplog.records if getattr(r, "event", "") == "overflow_probe"]
    assert [getattr(r, "result", None) for r in probes] == ["fixed"]
    assert "Text too long" not in caplog.text  # a provider's message is never logged

    # the wording is known now: an overflow from the first answer, with the whole ladder
    # (a body that needs more than one 2/3 step fits after the second)
    first.clear()
    fake.requests.clear()
    first.append(0)

    def needs_two_steps(r: Recorded) -> Reply:
        if first[0] == 0:
            first[0] = len(r.body)
        return text_too_long() if len(r.body) > first[0] * 0.5 else json_reply(openai_ok(10))

    fake.responder = needs_two_steps
    resp = await stack.client.post(PATH, json=openai_chat(24, model="gpt-4o"))
    assert resp.status == 200, await resp.text()
    assert "x-trimgate-probe" not in resp.headers
    assert int(resp.headers["x-trimgate-retries"]) >= 2
    sizes = [len(r.body) for r in fake.requests]
    assert all(b < a for a, b in itertools.pairwise(sizes))
    assert stack.metric("trimgate_overflow_probes_total", **LABELS, result="fixed") == 1


async def test_the_probed_wording_is_logged_only_when_asked(
    make_stack: MakeStack, caplog: pytest.LogCaptureFixture
) -> None:
    def answer(r: Recorded) -> Reply:
        # a wording with an id and a count, each blanked in the key
        message = "Text too long for request req_8c1f2a9b7d: 4182 units"
        return json_reply({"error": {"message": message}}, status=400)

    key = "400 Text too long for request #: N units"
    for log_wordings, expected in ((False, None), (True, key)):
        caplog.clear()
        stack = await make_stack(
            FakeProvider(answer), trimming={"reactive": {"log_wordings": log_wordings}}
        )
        with caplog.at_level(logging.INFO, logger="trimgate"):
            resp = await stack.client.post(PATH, json=openai_chat(24, model="gpt-4o"))
        assert resp.status == 400 and resp.headers["x-trimgate-probe"] == "refuted"
        (probe,) = [r for r in caplog.records if getattr(r, "event", "") == "overflow_probe"]
        assert getattr(probe, "wording", None) == expected
        assert "req_8c1f2a9b7d" not in caplog.text and "4182" not in caplog.text


async def test_a_refuted_probe_sends_the_first_answer_back_and_is_not_repeated(
    make_stack: MakeStack, caplog: pytest.LogCaptureFixture
) -> None:
    # a look-alike: the same error whatever is sent, with an id that changes each time
    ids = itertools.count(1)
    bodies: list[bytes] = []

    def answer(r: Recorded) -> Reply:
        message = f"request req_{next(ids):08x}z failed: message text exceeds what we accept"
        error = {"error": {"message": message, "type": "invalid_request"}}
        bodies.append(orjson.dumps(error))
        return json_reply(error, status=400)

    fake = FakeProvider(answer)
    stack = await make_stack(fake)
    with caplog.at_level(logging.INFO, logger="trimgate"):
        resp = await stack.client.post(PATH, json=openai_chat(24, model="gpt-4o"))
        body = await resp.read()
    assert resp.status == 400 and len(fake.requests) == 3  # the probe's two steps
    sizes = [len(r.body) for r in fake.requests]
    assert sizes[2] < sizes[1] < sizes[0]
    assert orjson.loads(body) == orjson.loads(bodies[0])  # the first answer, not the probe's
    assert resp.headers["x-trimgate-probe"] == "refuted"
    assert resp.headers["x-trimgate-trimmed"] == "false"
    assert resp.headers["x-trimgate-retries"] == "0"
    for header in ("exhausted", "retries-spent", "unfixable", "reason"):
        assert f"x-trimgate-{header}" not in resp.headers
    assert stack.metric("trimgate_overflow_probes_total", **LABELS, result="refuted") == 1
    assert stack.metric("trimgate_context_overflows_total", **LABELS) == 0
    assert stack.metric("trimgate_reactive_retries_total", **LABELS) == 0
    assert stack.events() == []
    probes = [r for r in caplog.records if getattr(r, "event", "") == "overflow_probe"]
    assert [(r.levelno, getattr(r, "result", None)) for r in probes] == [
        (logging.WARNING, "refuted")
    ]

    # the verdict is remembered: the same wording is not probed again
    resp = await stack.client.post(PATH, json=openai_chat(24, model="gpt-4o"))
    assert resp.status == 400 and len(fake.requests) == 4
    assert "x-trimgate-probe" not in resp.headers


@pytest.mark.parametrize("counter", [False, True], ids=["same", "trace-number"])
async def test_an_overflow_of_more_than_half_again_is_fixed_by_the_second_step(
    make_stack: MakeStack, counter: bool
) -> None:
    # a countless wording, and a prompt about twice the window: the first step (2/3) gets
    # the same wording back (with a trace number that changes each time, or not), the
    # second (4/9) fits
    first: list[int] = []

    def too_long() -> Reply:
        if not counter:
            return text_too_long()
        message = f"Text too long (trace {48213 + 17 * len(first)})"
        return json_reply({"status": {"code": "40003", "message": message}}, status=400)

    def answer(r: Recorded) -> Reply:
        first.append(len(r.body))
        return too_long() if len(r.body) > first[0] * 0.55 else json_reply(openai_ok(10))

    fake = FakeProvider(answer)
    stack = await make_stack(fake)
    resp = await stack.client.post(PATH, json=openai_chat(30, model="gpt-4o"))
    assert resp.status == 200, await resp.text()
    assert len(fake.requests) == 3
    assert resp.headers["x-trimgate-probe"] == "fixed"
    assert resp.headers["x-trimgate-retries"] == "2"
    assert stack.metric("trimgate_overflow_probes_total", **LABELS, result="fixed") == 1
    # the first answer and the first step's were both overflows
    assert stack.metric("trimgate_context_overflows_total", **LABELS) == 2

    # learned: the next such request is an overflow from its first answer
    first.clear()
    fake.requests.clear()
    resp = await stack.client.post(PATH, json=openai_chat(30, model="gpt-4o"))
    assert resp.status == 200 and "x-trimgate-probe" not in resp.headers


@pytest.mark.parametrize("status", [424, 500])
async def test_a_fixed_500_or_424_teaches_nothing(make_stack: MakeStack, status: int) -> None:
    # a server fault (or SageMaker's 424 relaying one) heals on a resend too: the probe's
    # answer goes back, but the wording is probed again next time, never learned
    first: list[int] = []

    def answer(r: Recorded) -> Reply:
        if not first:
            first.append(len(r.body))
        if len(r.body) > first[0] * 0.8:
            return json_reply({"error": {"message": "Text too long"}}, status=status)
        return json_reply(openai_ok(10))

    fake = FakeProvider(answer)
    stack = await make_stack(fake)
    for _ in range(2):
        first.clear()
        fake.requests.clear()
        resp = await stack.client.post(PATH, json=openai_chat(24, model="gpt-4o"))
        assert resp.status == 200, await resp.text()
        assert resp.headers["x-trimgate-probe"] == "fixed" and len(fake.requests) == 2
    assert stack.metric("trimgate_overflow_probes_total", **LABELS, result="fixed") == 2


async def test_a_second_step_that_cannot_be_planned_sends_the_first_answer_back(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = itertools.count(1)
    bodies: list[bytes] = []

    def answer(r: Recorded) -> Reply:
        bodies.append(orjson.dumps({"error": {"message": f"Text too long (#{next(ids)})"}}))
        return Reply(status=400, body=bodies[-1])

    planned = 0
    real_replan = retry.replan

    async def replan_once(*args: Any, **kwargs: Any) -> Any:
        nonlocal planned
        planned += 1
        if planned > 1:
            raise RuntimeError("a bug while planning the second step")
        return await real_replan(*args, **kwargs)

    monkeypatch.setattr(retry, "replan", replan_once)
    fake = FakeProvider(answer)
    stack = await make_stack(fake)
    resp = await stack.client.post(PATH, json=openai_chat(24, model="gpt-4o"))
    assert resp.status == 400 and len(fake.requests) == 2
    assert await resp.read() == bodies[0]  # the first answer, not the first step's
    assert resp.headers["x-trimgate-probe"] == "refuted"
    assert resp.headers["x-trimgate-trimmed"] == "false"
    assert resp.headers["x-trimgate-retries"] == "0"


@pytest.mark.parametrize("step", [1, 2])
async def test_a_failed_probe_resend_sends_the_first_answer_back(
    make_stack: MakeStack, step: int
) -> None:
    # the probe's resend (its first or second step) meets a connection the provider drops:
    # the client gets the provider's first answer, not a gateway error
    def answer(r: Recorded) -> Reply:
        return Reply(reset=True) if len(fake.requests) > step else text_too_long()

    fake = FakeProvider(answer)
    stack = await make_stack(fake)
    resp = await stack.client.post(PATH, json=openai_chat(24, model="gpt-4o"))
    assert resp.status == 400
    assert await resp.json() == {"status": {"code": "40003", "message": "Text too long"}}
    assert resp.headers["x-trimgate-probe"] == "refuted"
    assert resp.headers["x-trimgate-retries"] == "0"


async def test_one_retry_allowed_means_one_probe_step(make_stack: MakeStack) -> None:
    first: list[int] = []

    def answer(r: Recorded) -> Reply:
        first.append(len(r.body))
        return text_too_long() if len(r.body) > first[0] * 0.55 else json_reply(openai_ok(10))

    fake = FakeProvider(answer)
    stack = await make_stack(fake, trimming={"reactive": {"max_retries": 1}})
    resp = await stack.client.post(PATH, json=openai_chat(30, model="gpt-4o"))
    assert resp.status == 400 and len(fake.requests) == 2
    assert await resp.json() == {"status": {"code": "40003", "message": "Text too long"}}
    assert resp.headers["x-trimgate-probe"] == "refuted"


async def test_counts_that_move_with_the_trim_confirm_it_and_aim_the_ladder(
    make_stack: MakeStack,
) -> None:
    # the server counts 10 units a byte and holds 30% of the first body: one 2/3 probe is
    # not enough, the moved count confirms the overflow and states the deficit
    first: list[int] = []

    def answer(r: Recorded) -> Reply:
        first.append(len(r.body))
        limit = first[0] * 3
        units = len(r.body) * 10
        return units_over(units, limit) if units > limit else json_reply(openai_ok(10))

    fake = FakeProvider(answer)
    stack = await make_stack(fake)
    resp = await stack.client.post(PATH, json=openai_chat(30, model="gpt-4o"))
    assert resp.status == 200, await resp.text()
    assert resp.headers["x-trimgate-probe"] == "confirmed"
    assert resp.headers["x-trimgate-reason"] == "reactive"
    assert 2 <= int(resp.headers["x-trimgate-retries"]) <= 3
    assert stack.metric("trimgate_overflow_probes_total", **LABELS, result="confirmed") == 1
    # the probe's answer was an overflow too: two answers counted before the ladder went on
    assert stack.metric("trimgate_context_overflows_total", **LABELS) >= 2


@pytest.mark.parametrize(
    ("status", "error", "config"),
    [
        (400, {"message": "Text too long"}, {"reactive": {"probe": False}}),
        (400, {"message": "Text too long"}, {"reactive": {"enabled": False}}),
        (429, {"message": "Text too long"}, {}),  # never statuses
        (502, {"message": "Text too long"}, {}),  # a gateway's: a resend may pass anyway
        (400, {"message": "max_tokens is too long for this model"}, {}),  # an output limit
        (400, {"message": "Image too large: 25 MB exceeds the limit"}, {}),  # media, bytes
        (400, {"message": "Text too long", "code": "insufficient_quota"}, {}),
        # a plain error before anything passed (a wrong model or key as often as not)
        (400, {"message": "Request contains an invalid argument."}, {}),
    ],
    ids=["off", "reactive-off", "429", "502", "output", "image", "quota", "plain"],
)
async def test_no_probe_where_a_trim_cannot_be_the_answer(
    make_stack: MakeStack, status: int, error: dict[str, str], config: dict[str, object]
) -> None:
    fake = FakeProvider(lambda r: json_reply({"error": error}, status=status))
    stack = await make_stack(fake, trimming=config)
    resp = await stack.client.post(PATH, json=openai_chat(24, model="gpt-4o"))
    assert resp.status == status and len(fake.requests) == 1
    assert await resp.json() == {"error": error}
    assert "x-trimgate-probe" not in resp.headers


def invalid_argument() -> Reply:
    # Vertex's answer to an input over the window, with no word of its size
    error = {"code": 400, "message": "Request contains an invalid argument.", "status": "x"}
    return json_reply({"error": error}, status=400)


async def test_a_plain_error_to_a_body_that_outgrew_the_rest_is_probed_once(
    make_stack: MakeStack,
) -> None:
    # an agent's history grows a turn at a time: 12 turns passed, 48 get a plain 400 that
    # a trim fixes, and then (the wording learned) it is an overflow from the first answer
    window: list[int] = []

    def answer(r: Recorded) -> Reply:
        return invalid_argument() if len(r.body) > window[0] else json_reply(openai_ok(10))

    fake = FakeProvider(answer)
    stack = await make_stack(fake)
    window.append(len(orjson.dumps(openai_chat(40, model="gpt-4o"))))
    assert (await stack.client.post(PATH, json=openai_chat(12, model="gpt-4o"))).status == 200
    resp = await stack.client.post(PATH, json=openai_chat(48, model="gpt-4o"))
    assert resp.status == 200, await resp.text()
    assert len(fake.requests) == 3 and resp.headers["x-trimgate-probe"] == "fixed"
    assert resp.headers["x-trimgate-reason"] == "reactive"
    assert stack.metric("trimgate_overflow_probes_total", **LABELS, result="fixed") == 1
    resp = await stack.client.post(PATH, json=openai_chat(56, model="gpt-4o"))
    assert resp.status == 200 and "x-trimgate-probe" not in resp.headers
    assert resp.headers["x-trimgate-reason"] == "reactive"
    # what it taught holds past every success only: the same words to a body no larger
    # than one that passed (a dropped turn that fixed it may have held another fault)
    seen = len(fake.requests)
    fake.responder = lambda r: invalid_argument()
    resp = await stack.client.post(PATH, json=openai_chat(12, model="gpt-4o"))
    assert resp.status == 400 and len(fake.requests) == seen + 1
    assert resp.headers["x-trimgate-retries"] == "0"


async def test_a_plain_error_is_probed_only_past_every_success_and_one_step_only(
    make_stack: MakeStack,
) -> None:
    calls = itertools.count()
    fake = FakeProvider(
        lambda r: json_reply(openai_ok(10)) if next(calls) == 0 else invalid_argument()
    )
    stack = await make_stack(fake)
    assert (await stack.client.post(PATH, json=openai_chat(12, model="gpt-4o"))).status == 200
    # no larger than what passed: the error goes back, nothing resent
    resp = await stack.client.post(PATH, json=openai_chat(12, model="gpt-4o"))
    assert resp.status == 400 and len(fake.requests) == 2
    assert "x-trimgate-probe" not in resp.headers
    # larger: one probe step (not two, as a worded suspect gets), then the first answer
    resp = await stack.client.post(PATH, json=openai_chat(48, model="gpt-4o"))
    assert resp.status == 400 and len(fake.requests) == 4
    assert resp.headers["x-trimgate-probe"] == "refuted"
    assert await resp.json() == invalid_argument().data
    assert resp.headers["x-trimgate-trimmed"] == "false"


@pytest.mark.parametrize("status", [500, 424])
async def test_a_plain_500_or_424_is_never_probed(make_stack: MakeStack, status: int) -> None:
    # they pass on whatever went wrong upstream: a resend may get past it by chance
    calls = itertools.count()
    error = {"error": {"message": "Request contains an invalid argument."}}
    fake = FakeProvider(
        lambda r: json_reply(openai_ok(10)) if next(calls) == 0 else json_reply(error, status)
    )
    stack = await make_stack(fake)
    assert (await stack.client.post(PATH, json=openai_chat(12, model="gpt-4o"))).status == 200
    resp = await stack.client.post(PATH, json=openai_chat(48, model="gpt-4o"))
    assert resp.status == status and len(fake.requests) == 2
    assert "x-trimgate-probe" not in resp.headers


def test_growth_keeps_the_largest_body_that_passed_per_upstream_and_model() -> None:
    growth = retry.Growth(size=2, floor=1000)
    assert not growth.grown("a", "m", 50_000)  # nothing passed yet: a first error is not
    growth.passed("a", "m", 500)
    assert growth.grown("a", "m", 1000) and not growth.grown("a", "m", 999)  # the floor
    growth.passed("a", "m", 5000)
    growth.passed("a", "m", 3000)  # a smaller success lowers nothing
    assert not growth.grown("a", "m", 5000) and growth.grown("a", "m", 5001)
    assert not growth.grown("b", "m", 9000) and not growth.grown("a", "n", 9000)
    growth.passed("a", "n", 2000)
    growth.passed("a", None, 2000)  # bounded: the least recently used goes first
    assert not growth.grown("a", "m", 9000) and growth.grown("a", None, 9000)


async def test_a_lone_turn_is_never_probed(make_stack: MakeStack) -> None:
    fake = FakeProvider(lambda r: text_too_long())
    stack = await make_stack(fake)
    resp = await stack.client.post(PATH, json=openai_chat(1, model="gpt-4o"))
    assert resp.status == 400 and len(fake.requests) == 1
    assert "x-trimgate-probe" not in resp.headers


def test_a_logged_wording_blanks_what_may_quote_a_request_or_name_someone() -> None:
    wording = (
        "400 Input 'my secret plan' is too long for alice@example.com at "
        "https://api.example.com/v1/x with key sk-abcdefghijklmnopqrstuvwxyz"
    )
    logged = logged_wording(wording)
    assert logged == "400 Input '…' is too long for # at # with key #"
    assert len(logged_wording("400 " + "word " * 200)) == 300


def test_wordings_remember_overflows_and_forget_refutations_after_a_while() -> None:
    now = [0.0]
    wordings = Wordings(size=3, forget_after=600.0, clock=lambda: now[0])
    wordings.learn("a", "400 Text too long", True)
    wordings.learn("a", "400 message text exceeds", False)
    assert wordings.verdict("a", "400 Text too long") is True
    assert wordings.verdict("b", "400 Text too long") is None  # per upstream
    assert wordings.verdict("a", "400 message text exceeds") is False
    now[0] = 601.0  # a refutation is forgotten: the wording is probed again
    assert wordings.verdict("a", "400 message text exceeds") is None
    assert wordings.verdict("a", "400 Text too long") is True  # an overflow is not
    for n in range(3):  # bounded: the least recently used goes first
        wordings.learn("a", f"400 wording {n}", True)
    assert wordings.verdict("a", "400 Text too long") is None
    assert wordings.verdict("a", "400 wording 0") is True
