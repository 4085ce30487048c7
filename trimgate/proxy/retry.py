"""Reactive retries: on a recognised overflow, plan again with fewer turns and resend.
An error that only suspects one (``Attempt.suspect``) is probed: resent trimmed to 2/3
(and, when the same wording comes back, once more to 4/9); the probe's answer tells
whether it was an overflow (``Wordings`` remembers). A plain client error (400, 413 or
422 that names nothing a trim cannot fix, however else it is worded) is probed too, one
step, when the body is larger than the largest its upstream answered with success for
that model (``Growth``): a history that grows a turn at a time meets the window so.

Rules of this module:
- A retry happens only before the first byte reaches the client: it wraps "send and read
  enough to tell an overflow" (``relay.sniff_overflow``), never the relay.
- What the next attempt keeps is decided in the core (``policy.may_retry``,
  ``policy.next_attempt``: at least one turn fewer each time, so the ladder ends); this
  module only wires that decision into tenacity, always with ``stop``.
- The common path (no overflow) never builds the tenacity loop.
- An answer replaced by a retry is closed; a bug while planning a retry sends the
  provider's own answer back rather than a 500.
- A probe that confirms nothing sends the provider's first answer back (read whole before
  the probe, so kept), as if no probe had been made but for ``x-trimgate-probe``.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from tenacity import AsyncRetrying, retry_if_result, stop_after_attempt, wait_none

from trimgate.errors import DecodeError, UpstreamError
from trimgate.providers.overflow import Overflow, confirm_suspect
from trimgate.proxy.examine import Chat
from trimgate.proxy.isolate import dense
from trimgate.proxy.offload import Offload, heavy
from trimgate.proxy.relay import Attempt
from trimgate.trimming.pipeline import Policy, TrimReport
from trimgate.trimming.policy import may_retry, next_attempt

log = logging.getLogger("trimgate")

# A probe steps down to 2/3 and, when the same wording comes back, once more (4/9
# of the first estimate) before its suspicion is refuted: at most two extra calls.
PROBE_STEPS = 2

Sleep = Callable[[float], Awaitable[None]]
Send = Callable[[bytes], Awaitable[Attempt]]  # one upstream attempt with this body
Learn = Callable[[Chat, int | None, TrimReport], None]  # a provider count of a sent body


@dataclass(slots=True)
class Retries:
    """The reactive loop's state: what was last sent and how it went."""

    report: TrimReport  # of the body last sent
    body: bytes
    request_id: str
    last: Attempt | None = None
    retries: int = 0
    overflows: int = 0
    probe: str | None = None  # how a probe went: "fixed", "confirmed" or "refuted"
    wording: str | None = None  # the probed answer's wording (ids and numbers blanked)
    questioned: Attempt | None = None  # the answer a probe in flight questions
    questioned_report: TrimReport | None = None  # of the body that answer was to


class Wordings:
    """What probes taught, per upstream: the wordings that proved overflows (recognised
    from then on) and, for ``forget_after`` seconds, the ones that proved not to be (not
    probed again meanwhile). At most ``size`` wordings, the least recently used dropped."""

    def __init__(
        self,
        size: int = 512,
        forget_after: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._size = size
        self._forget_after = forget_after
        self._clock = clock
        self._known: OrderedDict[tuple[str, str], tuple[bool, float]] = OrderedDict()

    def verdict(self, upstream: str, wording: str) -> bool | None:
        """True: an overflow; False: not one (lately); None: not known."""
        key = (upstream, wording)
        known = self._known.get(key)
        if known is None:
            return None
        overflow, at = known
        if not overflow and self._clock() - at > self._forget_after:
            del self._known[key]
            return None
        self._known.move_to_end(key)
        return overflow

    def learn(self, upstream: str, wording: str, overflow: bool) -> None:
        key = (upstream, wording)
        self._known[key] = (overflow, self._clock())
        self._known.move_to_end(key)
        while len(self._known) > self._size:
            self._known.popitem(last=False)


class Growth:
    """The largest body (its estimate, provider tokens) each upstream answered with
    success, per model, at most ``size`` pairs (the least recently used dropped). An
    agent's history grows a turn at a time: a plain client error to a body larger than
    the largest that passed, and of at least ``floor`` tokens, may well be the window
    nobody has listed the wording of (``grown``)."""

    def __init__(self, size: int = 1024, floor: int = 4096) -> None:
        self._size = size
        self._floor = floor
        self._largest: OrderedDict[tuple[str, str], int] = OrderedDict()

    def passed(self, upstream: str, model: str | None, tokens: int) -> None:
        key = (upstream, model or "")
        self._largest[key] = max(tokens, self._largest.get(key, 0))
        self._largest.move_to_end(key)
        while len(self._largest) > self._size:
            self._largest.popitem(last=False)

    def grown(self, upstream: str, model: str | None, tokens: int) -> bool:
        """Past the largest body that passed; never before one has (a first request's
        error is a wrong model name or key as often as a window)."""
        largest = self._largest.get((upstream, model or ""))
        return largest is not None and tokens >= self._floor and tokens > largest


async def send_with_retries(
    chat: Chat,
    send: Send,
    request_id: str,
    *,
    sleep: Sleep,
    learn: Learn,
    max_body: int,
    offload: Offload,
    wordings: Wordings | None = None,
    growth: Growth | None = None,
) -> tuple[Attempt, Retries]:
    """The final attempt (to relay) and the loop's state, whose ``report`` is of the body
    the final answer is to. The caller drops the state before relaying: it holds that
    body. ``wordings``: what probes taught; None: suspects are never probed. ``growth``:
    the largest bodies that passed; None: a plain client error is never probed."""
    # the body sent is referenced by ``state`` only: freed when a retry replaces it
    state = Retries(report=chat.report, body=chat.send_body, request_id=request_id)
    chat.send_body = b""
    final = await _attempt(chat, state, send, wordings, grown=_grown(chat, growth))
    if final.retry:
        # tenacity runs only the retries: the common path pays nothing for it
        retrying = AsyncRetrying(
            stop=stop_after_attempt(chat.settings.max_retries),
            retry=retry_if_result(lambda a: bool(a.retry)),
            wait=wait_none(),
            sleep=sleep,
            retry_error_callback=lambda rs: rs.outcome.result() if rs.outcome else None,
            reraise=True,
        )
        try:
            final = await retrying(_retry, chat, state, send, learn, max_body, offload, wordings)
        except UpstreamError as exc:
            questioned, before = state.questioned, state.questioned_report
            if questioned is None or before is None:
                if state.last is not None:
                    state.last.resp.close()
                raise
            # a probe's resend failed (refused, timed out): the provider's first answer,
            # read whole, goes back rather than a gateway error
            log.warning(
                "a probe's resend failed; the provider's first answer goes back",
                extra={
                    "event": "upstream_error",
                    "request_id": request_id,
                    "upstream": chat.route.name,
                    "status": exc.status,
                    "error": str(exc),
                },
            )
            final = _refute(state, questioned, before, state.last)
        except BaseException:  # cancelled between attempts, or a failed resend
            for answer in (state.last, state.questioned):
                if answer is not None:
                    answer.resp.close()  # an answer nobody will relay now
            raise
    state.body = b""  # sent: not held while the answer is relayed
    state.last = None
    return final, state


async def replan(
    chat: Chat, policy: Policy, max_body: int, offload: Offload
) -> tuple[TrimReport, bytes]:
    """``chat.replan``, in a worker thread when the body is large or compressed, in the
    worker process when it is dense (as its first examination was)."""
    off = heavy(chat.body, bool(chat.encoding))
    isolation = offload.isolation
    if off and isolation is not None and dense(chat.body, bool(chat.encoding)):
        found = await isolation.replan(chat, policy, max_body)
        if found is not None:
            return found
    return await offload.run(off, lambda: chat.replan(policy, max_body))


def unresolved(final: Attempt, sent: TrimReport) -> str | None:
    """Why the answer relayed is an overflow error, or None: the error states an output
    reservation that alone fills the window (``output-reservation``: nothing was resent),
    the body ``sent`` had one turn left (``one-turn``), or the retries ran out (or were
    not allowed: reactive off, shadow) with more turns left (``retries-spent``)."""
    if final.unfixable:
        return "output-reservation"
    if final.overflow is None:
        return None
    return "one-turn" if sent.kept_turns <= 1 else "retries-spent"


def _grown(chat: Chat, growth: Growth | None) -> bool:
    """Whether the body first planned outgrew every one its upstream passed (``Growth``)."""
    return growth is not None and growth.grown(
        chat.route.name, chat.model, chat.report.tokens_after
    )


async def _attempt(
    chat: Chat, state: Retries, send: Send, wordings: Wordings | None, *, grown: bool = False
) -> Attempt:
    """One attempt, judged: a recognised overflow (or a wording a probe proved one) is
    retried; a suspect, on the first attempt, is probed (a plain one only when the body
    ``grown`` past every success)."""
    result = await send(state.body)
    state.last = result
    if state.questioned is not None:
        return _probed(chat, state, result, wordings)
    suspect = result.suspect
    # a plain error is questioned only past every success, and so is what a probe of it
    # taught (a dropped turn that fixed one may have held some other fault)
    if (
        result.overflow is None
        and suspect is not None
        and wordings is not None
        and (suspect.worded or grown)
    ):
        known = wordings.verdict(chat.route.name, suspect.wording)
        if known:  # a wording an earlier probe proved an overflow
            result.overflow = Overflow(None, None)
        elif known is None and state.retries == 0 and chat.settings.probe:
            result.retry = may_retry(chat.settings, state.report, shadow=chat.shadow)
            return result
    if result.overflow is not None:
        state.overflows += 1
        result.retry = may_retry(chat.settings, state.report, shadow=chat.shadow)
    return result


def _probed(chat: Chat, state: Retries, result: Attempt, wordings: Wordings | None) -> Attempt:
    """Judge a probe by its answer: an overflow (recognised, or the first answer's
    wording with the prompt's count moved down with the trim) goes on up the ladder; a
    success means the trim fixed it; anything else refutes the suspicion, and the first
    answer goes back."""
    questioned, before = state.questioned, state.questioned_report
    assert questioned is not None and questioned.suspect is not None and before is not None
    state.questioned = state.questioned_report = None
    wording = state.wording = questioned.suspect.wording
    if result.overflow is None and result.suspect is not None:
        shrink = state.report.tokens_after / max(1, before.tokens_after)
        result.overflow = confirm_suspect(questioned.suspect, result.suspect, shrink)
    # the overflows counted: the first answer and, after a second step, the first step's
    # (``state.retries`` is the number of steps, as a probe starts the ladder)
    if result.overflow is not None:
        state.probe = "confirmed"
        state.overflows += state.retries + 1
        result.retry = may_retry(chat.settings, state.report, shadow=chat.shadow)
    elif result.resp.status < 400 and not result.unfixable:
        state.probe = "fixed"
        state.overflows += state.retries
    elif _one_step_further(chat, state, questioned, result):
        # the same wording, with no count moved to tell: the prompt may be more than half
        # again over the window; one more 2/3 step before the suspicion is refuted
        state.questioned, state.questioned_report = questioned, before
        result.retry = True
        return result
    else:
        result = _refute(state, questioned, before, result)
    if result is not questioned:
        questioned.resp.release()  # read whole before the probe: its connection is free
    if wordings is not None and (
        state.probe != "fixed" or questioned.resp.status not in (424, 500)
    ):
        # a 500 (or a 424 relaying one: SageMaker's "Received server error (500) from
        # primary") a resend passed may have been passing trouble: nothing is learned from it
        wordings.learn(chat.route.name, wording, state.probe != "refuted")
    return result


def _refute(
    state: Retries, questioned: Attempt, before: TrimReport, answer: Attempt | None
) -> Attempt:
    """The suspicion stands unproven: the probe's ``answer`` (if any) is closed, and the
    provider's first answer goes back, reported as the body it answered."""
    if answer is not None and answer is not questioned:
        answer.resp.close()
    state.questioned = state.questioned_report = None
    state.probe = "refuted"
    state.report, state.retries, state.last = before, 0, questioned
    questioned.retry = False
    return questioned


def _one_step_further(chat: Chat, state: Retries, questioned: Attempt, result: Attempt) -> bool:
    """Whether a probe answered by the first answer's wording (ids and numbers aside: a
    count that moved with the trim confirmed it already, and one that moved otherwise, a
    trace or attempt number, tells nothing) gets a second step: only after the first
    step, when a retry is left and the probe's body still had a turn to drop."""
    first, again = questioned.suspect, result.suspect
    return (
        first is not None
        and first.worded  # a plain error is probed one step only
        and again is not None
        and again.wording == first.wording
        and state.retries < min(PROBE_STEPS, chat.settings.max_retries)
        and may_retry(chat.settings, state.report, shadow=chat.shadow)
    )


def _unplanned(state: Retries, last: Attempt) -> Attempt:
    """The answer that goes back when the next attempt cannot be planned: the last one,
    or, in a probe's second step, the provider's first answer (the suspicion unproven)."""
    questioned, before = state.questioned, state.questioned_report
    if questioned is not None and before is not None:
        return _refute(state, questioned, before, last)
    last.retry = False
    return last


async def _retry(
    chat: Chat,
    state: Retries,
    send: Send,
    learn: Learn,
    max_body: int,
    offload: Offload,
    wordings: Wordings | None,
) -> Attempt:
    """Plan again from the last overflow (or, for a probe, at 2/3 of the estimate),
    dropping at least one more turn, and resend (planned in a worker thread when the body
    is large, as its first examination was)."""
    last = state.last
    assert last is not None
    previous = state.report
    overflow = last.overflow
    if overflow is not None and state.probe is None:
        # a count a probe read may be in any unit (characters, bytes): only the ratio of
        # its two counts aims the retry, nothing calibrates on it
        learn(chat, overflow.real, previous)
    policy = next_attempt(
        chat.policy,
        previous,
        overflow.real if overflow else None,
        overflow.maximum if overflow else None,
        retry=state.retries,
        # (a probe's counts may be in any unit: no output limit in tokens is taken out)
        whole=overflow is not None and overflow.whole and state.probe is None,
    )
    try:
        report, body = await replan(chat, policy, max_body, offload)
    except DecodeError as exc:  # a body trimgate cannot re-encode (nesting too deep)
        log.warning(
            "a retry could not be planned; the provider's answer goes back",
            extra={"event": "retry_skipped", "reason": exc.reason, "request_id": state.request_id},
        )
        return _unplanned(state, last)
    except Exception as exc:  # a bug: the provider's own answer goes back, not a 500
        log.exception(
            "planning a retry failed",
            extra={
                "event": "retry_error",
                "error": type(exc).__name__,
                "request_id": state.request_id,
            },
        )
        return _unplanned(state, last)
    if overflow is None and state.questioned is None:
        # a first probe: the answer it questions was read whole, and is kept
        state.questioned, state.questioned_report = last, previous
    else:  # an overflow, or a first probe's answer that questions nothing more
        last.resp.close()
    state.report, state.body = report, body
    state.retries += 1
    return await _attempt(chat, state, send, wordings)
