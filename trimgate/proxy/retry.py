"""Reactive retries: on a recognised overflow, plan again with fewer turns and resend.

Rules of this module:
- A retry happens only before the first byte reaches the client: it wraps "send and read
  enough to tell an overflow" (``relay.sniff_overflow``), never the relay.
- What the next attempt keeps is decided in the core (``policy.may_retry``,
  ``policy.next_attempt``: at least one turn fewer each time, so the ladder ends); this
  module only wires that decision into tenacity, always with ``stop``.
- The common path (no overflow) never builds the tenacity loop.
- An answer replaced by a retry is closed; a bug while planning a retry sends the
  provider's own answer back rather than a 500.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from tenacity import AsyncRetrying, retry_if_result, stop_after_attempt, wait_none

from trimgate.errors import DecodeError
from trimgate.proxy.examine import Chat
from trimgate.proxy.offload import Offload, heavy
from trimgate.proxy.relay import Attempt
from trimgate.trimming.pipeline import Policy, TrimReport
from trimgate.trimming.policy import may_retry, next_attempt

log = logging.getLogger("trimgate")

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


async def send_with_retries(
    chat: Chat,
    send: Send,
    request_id: str,
    *,
    sleep: Sleep,
    learn: Learn,
    max_body: int,
    offload: Offload,
) -> tuple[Attempt, Retries]:
    """The final attempt (to relay) and the loop's state, whose ``report`` is of the body
    last sent. The caller drops the state before relaying: it holds that body."""
    # the body sent is referenced by ``state`` only: freed when a retry replaces it
    state = Retries(report=chat.report, body=chat.send_body, request_id=request_id)
    chat.send_body = b""
    final = await _attempt(chat, state, send)
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
            final = await retrying(_retry, chat, state, send, learn, max_body, offload)
        except BaseException:  # cancelled between attempts, or a failed resend
            if state.last is not None:
                state.last.resp.close()  # the answer nobody will relay now
            raise
    state.body = b""  # sent: not held while the answer is relayed
    state.last = None
    return final, state


async def replan(
    chat: Chat, policy: Policy, max_body: int, offload: Offload
) -> tuple[TrimReport, bytes]:
    """``chat.replan``, in a worker thread when the body is large or compressed (as its
    first examination was)."""
    return await offload.run(
        heavy(chat.body, bool(chat.encoding)), lambda: chat.replan(policy, max_body)
    )


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


async def _attempt(chat: Chat, state: Retries, send: Send) -> Attempt:
    result = await send(state.body)
    if result.overflow is not None:
        state.overflows += 1
        result.retry = may_retry(chat.settings, state.report, shadow=chat.shadow)
    state.last = result
    return result


async def _retry(
    chat: Chat, state: Retries, send: Send, learn: Learn, max_body: int, offload: Offload
) -> Attempt:
    """Plan again from the last overflow, dropping at least one more turn, and resend
    (planned in a worker thread when the body is large, as its first examination was)."""
    last = state.last
    assert last is not None and last.overflow is not None
    previous = state.report
    learn(chat, last.overflow.real, previous)
    policy = next_attempt(
        chat.policy, previous, last.overflow.real, last.overflow.maximum, retry=state.retries
    )
    try:
        report, body = await replan(chat, policy, max_body, offload)
    except DecodeError as exc:  # a body trimgate cannot re-encode (nesting too deep)
        log.warning(
            "a retry could not be planned; the provider's answer goes back",
            extra={"event": "retry_skipped", "reason": exc.reason, "request_id": state.request_id},
        )
        last.retry = False
        return last
    except Exception as exc:  # a bug: the provider's own answer goes back, not a 500
        log.exception(
            "planning a retry failed",
            extra={
                "event": "retry_error",
                "error": type(exc).__name__,
                "request_id": state.request_id,
            },
        )
        last.retry = False
        return last
    last.resp.close()
    state.report, state.body = report, body
    state.retries += 1
    return await _attempt(chat, state, send)
