"""The request handler: read, decode, plan, encode, send, retry on overflow, relay.

Nothing a client sends is lost: a body trimgate cannot read is forwarded as
it came (``x-trimgate-skipped``); when nothing changes, the original bytes go
upstream. A reactive retry happens only before the first byte reaches the
client, so no byte of a failed attempt is ever relayed.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import re
import time
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

import orjson
from aiohttp import web
from multidict import CIMultiDict
from tenacity import AsyncRetrying, retry_if_result, stop_after_attempt, wait_none
from yarl import URL

from trimgate.config import Config, TrimmingConfig
from trimgate.errors import DecodeError, UpstreamError
from trimgate.providers.base import Codec, Decoded, DecodeOptions
from trimgate.providers.catalog import Catalog, CatalogEntry
from trimgate.providers.overflow import Overflow, stream_head_decided
from trimgate.providers.registry import CODECS, error_body
from trimgate.proxy import upstream as up
from trimgate.proxy.events import EventHub
from trimgate.proxy.front import FrontRequest
from trimgate.proxy.metrics import Metrics
from trimgate.proxy.routing import NoUpstream, Route, Router
from trimgate.proxy.signals import Outcome, attribution, record, response_headers
from trimgate.sse import SSEDecoder, SSEEvent
from trimgate.trimming.budget import effective_budget, reactive_budget
from trimgate.trimming.estimate import Calibration, bytes_tokens, observe, text_tokens, utf8_len
from trimgate.trimming.pipeline import Policy, TrimReport, plan

log = logging.getLogger("trimgate")

ERROR_BODY_LIMIT = 256 * 1024  # an error body read whole to recognise an overflow
FIRST_EVENT_LIMIT = 64 * 1024
USAGE_JSON_LIMIT = 8 * 1024 * 1024  # JSON answers larger than this teach no calibration
INFLATE_STEP = 1024 * 1024  # a compressed answer is inflated for its usage this much at a time
INFLATE_PER_READ = 64 * 1024 * 1024  # more from one read: a bomb, no count is read from it
MAX_CALIBRATED_MODELS = 1024
# Request ids are unique, not secret: a PRNG seeded from os.urandom, no syscall per request.
_IDS = random.Random()
Sleep = Callable[[float], Awaitable[None]]
Incoming = web.Request | FrontRequest  # aiohttp's request, or one trimgate's front parsed


@dataclass(slots=True)
class Attempt:
    resp: up.Answer
    head: bytes  # body bytes already read from resp, relayed first
    overflow: Overflow | None
    retry: bool = False


@dataclass(slots=True)
class _UpstreamTimer:
    spent: float = 0.0  # seconds spent waiting on the provider, excluded from overhead


@dataclass(slots=True)
class _Retries:
    """The reactive loop's state: what was last sent and how it went."""

    report: TrimReport  # of the body last sent
    body: bytes
    request_id: str
    last: Attempt | None = None
    retries: int = 0
    overflows: int = 0


def decode_chat(
    codec: Codec,
    raw: bytes,
    path: str,
    options: DecodeOptions,
    tool_texts: bool,
    parsed: dict[str, Any] | None = None,
) -> tuple[Decoded, dict[str, Any] | None]:
    """The codec's decode of a chat body, and the parsed body if it was parsed (for a
    second decode with other options: pass it as ``parsed``).

    Sized from the bytes where the codec can (``decode_raw``: no parsed history to build
    and free), else parsed. Raises ``DecodeError``, whose reason says why the body is
    not trimmed.
    """
    if parsed is None:
        decoded = codec.decode_raw(raw, path=path, options=options, tool_texts=tool_texts)
        if decoded is not None:
            return decoded, None
        try:
            parsed = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise DecodeError("invalid-json") from None
        if not isinstance(parsed, dict):
            raise DecodeError("not-an-object")
    return codec.decode(parsed, path=path, options=options), parsed


@dataclass(slots=True)
class Chat:
    """What an examined chat request needs while the upstream answers.

    The parsed body (if it was parsed) and its ``Conversation`` are not kept: a 2 MB
    history parses into about 5 MB of Python objects, which would otherwise live for
    the whole upstream wait. Nor is a compressed body's inflated JSON. A reactive retry
    inflates and decodes the body again (``replan``).
    """

    route: Route
    codec: Codec
    tc: TrimmingConfig
    policy: Policy
    report: TrimReport  # of the first plan
    label: str
    shadow: bool
    crumb: str
    model: str | None
    send_body: bytes  # what goes upstream first (the original bytes unless changed);
    # emptied once sent, so that it is not held while the answer is relayed
    body: bytes  # the request body as it came
    encoding: str  # its Content-Encoding, "" when none
    options: DecodeOptions
    tool_texts: bool  # tool-result capping is configured: a decode fills their texts

    def replan(self, policy: Policy, max_body: int) -> tuple[TrimReport, bytes]:
        """A retry's report and body, from the body decoded as ``_examine`` decoded it
        (same items, same indices); what it decodes is freed on return, before the send."""
        raw = self.body
        if self.encoding:
            inflated = _decompress(raw, self.encoding, max_body)
            if inflated is None:  # it inflated within the limit the first time
                raise ValueError("the body no longer inflates")
            raw = inflated
        decoded, _ = decode_chat(self.codec, raw, self.route.path, self.options, self.tool_texts)
        new_plan = plan(decoded.conversation, policy)
        body = orjson.dumps(self.codec.encode(decoded, new_plan, breadcrumb=self.crumb))
        return new_plan.report, body


class Proxy:
    def __init__(
        self,
        config: Config,
        *,
        metrics: Metrics,
        hub: EventHub,
        client: Callable[[], up.UpstreamClient],
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.config = config
        self.metrics = metrics
        self.hub = hub
        self.router = Router(config)
        self._client = client
        self._sleep = sleep
        user = [
            CatalogEntry(name=m.name or m.match, match=m.match, context_window=m.context_window)
            for m in config.models
        ]
        self.catalog = Catalog(user)
        self._overrides = {
            (m.name or m.match): config.for_model(m.trimming) for m in config.models if m.trimming
        }
        self.calibration: dict[str, Calibration] = {}
        t = config.trimming
        self._options = DecodeOptions(breadcrumb=t.breadcrumb.text, media_tokens=t.media_tokens)
        # Tool-result capping anywhere: decodes fill the results' texts (decode_raw)
        self._caps = any(c.max_tool_result_chars > 0 for c in (t, *self._overrides.values()))

    # --- entry ------------------------------------------------------------

    async def handle(self, request: Incoming) -> web.StreamResponse | None:
        """Serve one request; None: it was answered through the ``FrontRequest``."""
        started = time.perf_counter()
        request_id = f"{_IDS.getrandbits(64):016x}"
        raw_path = request.raw_path.partition("?")[0]
        if request.method == "CONNECT" or not raw_path.startswith("/"):
            return _refuse(request_id)
        if _unsafe_path(raw_path, request.path):
            return _refuse(request_id, "dot segments and empty segments are not forwarded")
        try:
            route = self.router.route(request.method, raw_path)
        except NoUpstream as exc:
            return error_response(
                exc.provider, 404, f"no upstream configured for {exc.provider}", request_id
            )
        provider = route.upstream.provider
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            self._count(route, "other", 413)
            return error_response(
                provider, 413, "request body exceeds server.max_body_bytes", request_id
            )
        chat: Chat | None = None
        skipped: str | None = None
        if route.wire_format is not None:
            try:
                chat, skipped = self._examine(request, route, body)
            except Exception as exc:  # a bug must not break a request the provider would answer
                log.exception(
                    "examining the request failed; forwarding it untouched",
                    extra={
                        "event": "examine_error",
                        "request_id": request_id,
                        "error_type": type(exc).__name__,
                    },
                )
                chat, skipped = None, "internal-error"
        try:
            return await self._forward(request, route, body, chat, skipped, request_id, started)
        except UpstreamError as exc:
            label = chat.label if chat else "other"
            self._count(route, label, exc.status)
            log.warning(
                "upstream failed",
                extra={
                    "event": "upstream_error",
                    "request_id": request_id,
                    "upstream": route.name,
                    "status": exc.status,
                    "error": str(exc),
                },
            )
            return error_response(provider, exc.status, str(exc), request_id)

    # --- examine: decode and plan -------------------------------------------

    def _examine(
        self, request: Incoming, route: Route, body: bytes
    ) -> tuple[Chat | None, str | None]:
        assert route.wire_format is not None
        mode = request.headers.get("x-trimgate-mode", "").lower() or self.config.trimming.mode
        if mode not in ("enforce", "shadow", "off"):
            mode = self.config.trimming.mode
        if mode == "off":
            return None, None
        raw = body
        encoding = request.headers.get("Content-Encoding", "").lower().strip()
        if encoding:
            decompressed = _decompress(body, encoding, self.config.server.max_body_bytes)
            if decompressed is None:
                return None, "compressed-body"
            raw = decompressed
        codec = CODECS[route.wire_format]
        path, caps = route.path, self._caps
        try:
            decoded, parsed = decode_chat(codec, raw, path, self._options, caps)
        except DecodeError as exc:
            return None, exc.reason
        if decoded.skip:
            return None, decoded.skip

        entry = self.catalog.lookup(decoded.model)
        label = entry.name if entry else "other"
        tc = self._overrides.get(label, self.config.trimming)
        options = self._options
        if tc.breadcrumb.text != options.breadcrumb or tc.media_tokens != options.media_tokens:
            options = DecodeOptions(breadcrumb=tc.breadcrumb.text, media_tokens=tc.media_tokens)
            decoded, _ = decode_chat(codec, raw, path, options, caps, parsed)
        window = entry.context_window if entry else tc.max_context_tokens
        ratio = self.calibration.get(label, Calibration()).planning_ratio if tc.calibrate else 1.0
        policy = make_policy(
            tc,
            window,
            decoded,
            request_budget=_int_header(request.headers.get("x-trimgate-budget")),
            ratio=ratio,
            max_input=entry.max_input if entry else None,
        )
        crumb = tc.breadcrumb.text
        trim_plan = plan(decoded.conversation, policy)
        shadow = mode == "shadow"
        if shadow or not trim_plan.changed:
            send_body = body
        else:
            send_body = orjson.dumps(codec.encode(decoded, trim_plan, breadcrumb=crumb))
        # The parsed body, its conversation and the plan are freed on return, before
        # the send: not kept for the whole upstream wait (Chat's docstring).
        chat = Chat(
            route=route,
            codec=codec,
            tc=tc,
            policy=policy,
            report=trim_plan.report,
            label=label,
            shadow=shadow,
            crumb=crumb,
            model=decoded.model,
            send_body=send_body,
            body=body,
            encoding=encoding,
            options=options,
            tool_texts=caps,
        )
        return chat, None

    # --- forward, with reactive retries ---------------------------------------

    async def _forward(
        self,
        request: Incoming,
        route: Route,
        body: bytes,
        chat: Chat | None,
        skipped: str | None,
        request_id: str,
        started: float,
    ) -> web.StreamResponse | None:
        url = URL(route.url(request.raw_path.partition("?")[2]), encoded=True)
        headers = up.request_headers(request.headers)
        timer = _UpstreamTimer()
        extra = {"x-trimgate-request-id": request_id}
        if skipped:
            extra["x-trimgate-skipped"] = skipped
        send = functools.partial(
            self._send,
            request.method,
            url,
            headers,
            body,
            route,
            timer,
            chat.codec if chat else None,
        )

        if chat is None:  # pass-through: byte for byte
            final = await send(body)
            try:
                self._count(route, "other", final.resp.status)
                self._overhead(route, started, timer)
                return await _relay(request, final, extra, None)
            finally:
                final.resp.release()  # also when the relay failed or never started

        if _unreadable_encodings(headers.get("Accept-Encoding", "")):
            # trimgate must read error bodies (overflow) and usage: ask only for
            # encodings it can inflate; the answer is still relayed compressed
            headers["Accept-Encoding"] = "gzip, deflate"
        final, outcome = await self._with_retries(chat, send, request_id)
        try:
            outcome.attribution = attribution(request.headers)
            extra.update(response_headers(outcome))
            status = final.resp.status
            self._count(route, chat.label, status)
            self._overhead(route, started, timer)
            # Metrics, the event and the log lines go out as soon as the handler first
            # waits (the relay's first read), after the answer's first bytes: not in
            # the time to first byte.
            asyncio.get_running_loop().call_soon(_record, outcome, self.metrics, self.hub, status)
            sniffer = _UsageSniffer(chat, final.resp) if status < 300 else None
            response = await _relay(request, final, extra, sniffer)
            if sniffer is not None:
                self._learn(chat, sniffer.prompt_tokens(), outcome.report)
            return response
        finally:
            final.resp.release()  # also when the relay failed or never started

    async def _send(
        self,
        method: str,
        url: URL,
        headers: CIMultiDict[str],
        original: bytes,
        route: Route,
        timer: _UpstreamTimer,
        codec: Codec | None,
        payload: bytes,
    ) -> Attempt:
        """One upstream attempt: send, and on chat paths read enough to tell an overflow."""
        if payload is not original and "Content-Encoding" in headers:
            # a body trimgate encoded (first attempt or retry) is never under the
            # client's content encoding
            headers = headers.copy()
            headers.popall("Content-Encoding")
        t = time.perf_counter()
        resp = await self._client().request(method, url, headers, payload)
        self.metrics.for_upstream(route.name)[1].observe(time.perf_counter() - t)
        if codec is None:
            timer.spent += time.perf_counter() - t
            return Attempt(resp, b"", None)
        try:
            head, overflow = await _sniff_overflow(codec, resp)
        except BaseException:
            resp.close()
            raise
        finally:
            timer.spent += time.perf_counter() - t  # waiting for the first bytes is upstream's
        return Attempt(resp, head, overflow)

    def _overhead(self, route: Route, started: float, timer: _UpstreamTimer) -> None:
        overhead = time.perf_counter() - started - timer.spent
        self.metrics.for_upstream(route.name)[0].observe(max(0.0, overhead))

    async def _with_retries(
        self,
        chat: Chat,
        attempt: Callable[[bytes], Awaitable[Attempt]],
        request_id: str,
    ) -> tuple[Attempt, Outcome]:
        # the body sent is referenced by ``state`` only: freed when a retry replaces it,
        # and before the answer is relayed
        state = _Retries(report=chat.report, body=chat.send_body, request_id=request_id)
        chat.send_body = b""
        final = await self._attempt(chat, state, attempt)
        if final.retry:
            # tenacity runs only the retries: the common path pays nothing for it
            retrying = AsyncRetrying(
                stop=stop_after_attempt(chat.tc.reactive.max_retries),
                retry=retry_if_result(lambda a: bool(a.retry)),
                wait=wait_none(),
                sleep=self._sleep,
                retry_error_callback=lambda rs: rs.outcome.result() if rs.outcome else None,
                reraise=True,
            )
            try:
                final = await retrying(self._retry, chat, state, attempt)
            except BaseException:  # cancelled between attempts, or a failed resend
                if state.last is not None:
                    state.last.resp.close()  # the answer nobody will relay now
                raise
        report = state.report
        reason = None
        if report.trimmed:
            reason = "reactive" if state.retries else "preemptive"
        outcome = Outcome(
            request_id=request_id,
            upstream=chat.route.name,
            provider=chat.route.upstream.provider,
            wire_format=chat.codec.wire_format,
            model=chat.model,
            model_label=chat.label,
            report=report,
            reason=reason,
            retries=state.retries,
            overflows=state.overflows,
            exhausted=final.overflow is not None,
            shadow=chat.shadow,
        )
        return final, outcome

    async def _attempt(
        self, chat: Chat, state: _Retries, attempt: Callable[[bytes], Awaitable[Attempt]]
    ) -> Attempt:
        result = await attempt(state.body)
        if result.overflow is not None:
            state.overflows += 1
            reactive = chat.tc.reactive
            result.retry = (
                reactive.enabled
                and reactive.max_retries > 0
                and not chat.shadow
                and state.report.kept_turns > 1  # a lone turn is never resent
            )
        state.last = result
        return result

    async def _retry(
        self, chat: Chat, state: _Retries, attempt: Callable[[bytes], Awaitable[Attempt]]
    ) -> Attempt:
        """Plan again from the last overflow, dropping at least one more turn, and resend."""
        last = state.last
        assert last is not None and last.overflow is not None
        previous = state.report
        self._learn(chat, last.overflow.real, previous)
        target = reactive_budget(previous.tokens_after, last.overflow.real, last.overflow.maximum)
        policy = replace(chat.policy, budget=target, max_turns=previous.kept_turns - 1)
        try:
            report, body = chat.replan(policy, self.config.server.max_body_bytes)
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
        return await self._attempt(chat, state, attempt)

    # --- calibration --------------------------------------------------------

    def _learn(self, chat: Chat, reported: int | None, sent: TrimReport) -> None:
        """Fold the provider's count for the body ``sent`` into the model's calibration."""
        if reported is None or not chat.tc.calibrate:
            return
        label = chat.label
        if label not in self.calibration and len(self.calibration) >= MAX_CALIBRATED_MODELS:
            return
        scaled = sent.tokens_before if chat.shadow else sent.tokens_after
        estimated = round(scaled / (chat.policy.ratio or 1.0))  # back to raw estimate
        state = observe(self.calibration.get(label, Calibration()), reported, estimated)
        self.calibration[label] = state
        self.metrics.set_calibration(label, state.ratio)

    def _count(self, route: Route, label: str, status: int) -> None:
        self.metrics.count_request(route.name, route.upstream.provider, label, status)


# --- helpers ---------------------------------------------------------------


def _record(outcome: Outcome, metrics: Metrics, hub: EventHub, status: int) -> None:
    """``record`` run as a loop callback: a failure is logged with the request's id."""
    try:
        record(outcome, metrics, hub, status=status)
    except Exception as exc:
        log.exception(
            "recording a request's signals failed",
            extra={
                "event": "record_error",
                "request_id": outcome.request_id,
                "error_type": type(exc).__name__,
            },
        )


def make_policy(
    tc: TrimmingConfig,
    window: int,
    decoded: Decoded,
    *,
    request_budget: int | None = None,
    budget: int | None = None,
    ratio: float = 1.0,
    max_input: int | None = None,
) -> Policy:
    """The trimming policy of one request (``budget`` overrides the computed one)."""
    if budget is None:
        budget = effective_budget(
            window,
            pruning_enabled=tc.history_pruning.enabled,
            pruning_max_tokens=tc.history_pruning.max_tokens,
            request_budget=request_budget,
            reserve_output=tc.reserve_output_tokens,
            output_limit=decoded.output_limit,
            max_input=max_input,
        )
    placement = tc.breadcrumb.placement
    return Policy(
        budget=budget,
        breadcrumb_tokens=breadcrumb_tokens(tc.breadcrumb.text, placement),
        placement=placement,
        max_messages=tc.max_history_messages,
        max_tool_result_chars=tc.max_tool_result_chars,
        orphan_sweep=tc.orphan_sweep,
        hoist=decoded.hoistable and tc.system_messages == "hoist",
        ratio=ratio,
    )


@functools.lru_cache(maxsize=64)
def breadcrumb_tokens(text: str, placement: str) -> int:
    """The breadcrumb's cost: its own message, merged text plus a blank line, or none."""
    if placement == "message":
        return text_tokens(text)
    if placement == "merge":
        return bytes_tokens(utf8_len(text) + 2)
    return 0


def _int_header(value: str | None) -> int | None:
    if not value:
        return None
    try:
        n = int(value.strip())
    except ValueError:
        return None
    return n if n > 0 else None


def _decompress(body: bytes, encoding: str, limit: int) -> bytes | None:
    if encoding not in ("gzip", "deflate", "x-gzip"):
        return None
    wbits = 16 + zlib.MAX_WBITS if encoding in ("gzip", "x-gzip") else zlib.MAX_WBITS
    try:
        d = zlib.decompressobj(wbits)
        out = d.decompress(body, limit + 1)
    except zlib.error:
        return None
    if len(out) > limit or d.unconsumed_tail:
        return None
    return out


async def _sniff_overflow(codec: Codec, resp: up.Answer) -> tuple[bytes, Overflow | None]:
    """Read just enough of an answer to tell an overflow, and return those bytes."""
    encoding = resp.headers.get("Content-Encoding", "")
    ctype = resp.headers.get("Content-Type", "").lower()
    if resp.status >= 400:
        head, complete = await up.read_head(resp, ERROR_BODY_LIMIT)
        if not complete:
            return head, None
        body = head
        if encoding:
            inflated = _decompress(head, encoding.lower(), ERROR_BODY_LIMIT * 8)
            if inflated is None:
                return head, None
            body = inflated
        return head, codec.detect_overflow(resp.status, body)
    if encoding or resp.status != 200:
        return b"", None
    if "text/event-stream" in ctype:
        head = await up.read_until(resp, stream_head_decided, FIRST_EVENT_LIMIT)
        return head, codec.detect_stream_overflow(head)
    if "json" in ctype:
        head, complete = await up.read_head(resp, 0)  # the first chunk
        start = head[:256].lstrip()
        if start[:1] == b"{" and (b'"error"' in start or b'"type":"error"' in start):
            if not complete:
                rest, complete = await up.read_head(resp, ERROR_BODY_LIMIT)
                head += rest
            if complete:
                return head, codec.detect_overflow(resp.status, head)
        return head, None
    return b"", None


class _UsageSniffer:
    """Reads the prompt-token usage from a relayed answer without holding it up.

    gzip / deflate answers are inflated on the side (the client still gets the
    compressed bytes); other encodings teach nothing. A stream is cut at its
    event boundaries with C-level byte searches, and only the events holding one
    of the codec's usage markers are decoded: relaying a chunk costs a ``find``,
    not a parse.
    """

    __slots__ = (
        "_buf",
        "_codec",
        "_inflate",
        "_markers",
        "_parts",
        "_pending",
        "_skipping",
        "_sse",
        "_tokens",
    )

    def __init__(self, chat: Chat, resp: up.Answer) -> None:
        self._codec = chat.codec
        self._markers = chat.codec.stream_usage_markers
        ctype = resp.headers.get("Content-Type", "").lower()
        encoding = resp.headers.get("Content-Encoding", "").lower().strip()
        self._inflate: Any = None
        readable = not encoding
        if encoding in ("gzip", "x-gzip", "deflate"):
            wbits = zlib.MAX_WBITS | (16 if "gzip" in encoding else 0)
            self._inflate = zlib.decompressobj(wbits)
            readable = True
        sse = readable and "text/event-stream" in ctype
        # the stream's bytes since its last event boundary, while it is cut by byte search
        self._parts: list[bytes] | None = [] if sse else None
        self._pending = 0
        self._skipping = False  # inside an event too long to decode, until its end
        self._sse: SSEDecoder | None = None  # a full decoder, once CR line ends show up
        self._buf: bytearray | None = (
            bytearray() if readable and not sse and "json" in ctype else None
        )
        self._tokens: int | None = None

    def _stop(self) -> None:
        self._parts = self._sse = self._buf = None

    def _active(self) -> bool:
        return self._parts is not None or self._sse is not None or self._buf is not None

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
        if self._parts is not None:
            self._feed_stream(chunk)
        elif self._sse is not None:
            self._events(self._sse.decode(chunk))
        elif self._buf is not None:
            if len(self._buf) + len(chunk) > USAGE_JSON_LIMIT:
                self._buf = None  # too big to parse for a count: teaches nothing
            else:
                self._buf += chunk

    def _feed_stream(self, chunk: bytes) -> None:
        parts = self._parts
        assert parts is not None
        if b"\r" in chunk:  # CR line ends: event boundaries are not a plain b"\n\n"
            if self._skipping:  # (an oversized event in a CR stream: no more counts)
                self._stop()
                return
            self._parts = None
            self._sse = SSEDecoder()
            self._events(self._sse.decode(b"".join(parts) + chunk))
            return
        found = chunk.rfind(b"\n\n")
        if found >= 0:
            end = found + 2
        elif chunk[:1] == b"\n" and parts and parts[-1][-1:] == b"\n":
            end = 1  # the blank line straddles two chunks
        else:
            self._pending += len(chunk)
            if self._skipping or self._pending > USAGE_JSON_LIMIT:
                # an event longer than the limit teaches nothing: only its last byte is
                # kept, to see a blank line that straddles two chunks
                self._skipping = True
                self._parts = [chunk[-1:]]
            else:
                parts.append(chunk)
            return
        rest = chunk[end:]
        self._parts = [rest] if rest else []
        self._pending = len(rest)
        if self._skipping:
            # the skipped event ends at its first blank line; later events in this
            # chunk up to ``end`` are whole and are read
            self._skipping = False
            straddled = chunk[:1] == b"\n" and parts[-1:] == [b"\n"]
            first = 1 if straddled else chunk.find(b"\n\n") + 2
            complete = chunk[first:end]
        else:
            complete = b"".join(parts) + chunk[:end] if parts else chunk[:end]
        if complete and any(marker in complete for marker in self._markers):
            self._events(SSEDecoder().decode(complete))  # it starts and ends at a boundary

    def _events(self, events: list[SSEEvent]) -> None:
        for event in events:
            tokens = self._codec.stream_usage(event.data)
            if tokens is not None:
                self._tokens = tokens

    def prompt_tokens(self) -> int | None:
        if self._buf:
            try:
                self._tokens = self._codec.usage(orjson.loads(self._buf))
            except orjson.JSONDecodeError:
                return None
        return self._tokens


class _Out(Protocol):
    async def write(self, data: bytes) -> None: ...
    async def write_eof(self) -> None: ...


async def _relay(
    request: Incoming,
    attempt: Attempt,
    extra: dict[str, str],
    sniffer: _UsageSniffer | None,
) -> web.StreamResponse | None:
    """The answer to the client as it arrives; the caller releases ``attempt.resp``.

    None: the answer went out through a ``FrontRequest`` (trimgate's own front)."""
    resp = attempt.resp
    headers = up.response_headers(resp.headers, extra)
    length: int | None = None
    value = resp.headers.get("Content-Length")
    if value is not None and value.isdigit() and "Transfer-Encoding" not in resp.headers:
        length = int(value)
    out: _Out
    response: web.StreamResponse | None
    if isinstance(request, FrontRequest):  # trimgate's front: the head goes with the body
        request.start(resp.status, resp.reason, headers, length)
        if length is None and not attempt.head:
            await request.flush()  # a stream that may be slow to start: its head at once
        out, response = request, None
    else:
        response = web.StreamResponse(status=resp.status, reason=resp.reason)
        response.headers.extend(headers)
        if length is not None:
            response.content_length = length
        await response.prepare(request)
        out = response
    if attempt.head:
        if sniffer:
            sniffer.feed(attempt.head)
        await out.write(attempt.head)
    try:
        while chunk := await resp.readany():
            if sniffer:
                sniffer.feed(chunk)
            await out.write(chunk)
    except UpstreamError:
        # The provider broke off mid-answer; the client sees the connection end.
        log.warning("upstream broke off mid-answer", extra={"event": "upstream_truncated"})
        if request.transport is not None:
            request.transport.close()
        return response
    await out.write_eof()
    return response


def _unreadable_encodings(accept: str) -> bool:
    lowered = accept.lower()
    return "br" in lowered or "zstd" in lowered or "compress" in lowered


_DOT_SEGMENT = re.compile(r"(?:^|/)(?:\.|%2e){1,2}(?:/|$)", re.IGNORECASE)


def _unsafe_path(raw: str, decoded: str) -> bool:
    """A path that could climb out of an upstream's base path once decoded."""
    if "." not in raw and "%" not in raw and "//" not in raw and "\\" not in decoded:
        return False  # the common path: nothing a dot segment could be made of
    return (
        "//" in raw
        or _DOT_SEGMENT.search(raw) is not None
        or _DOT_SEGMENT.search(decoded) is not None
        or "\\" in decoded
    )


def _refuse(request_id: str, why: str = "trimgate is not an open proxy") -> web.Response:
    return web.json_response(
        {"error": {"message": why, "type": "invalid_request_error"}},
        status=400,
        headers={"x-trimgate-request-id": request_id},
    )


def error_response(provider: str, status: int, message: str, request_id: str) -> web.Response:
    """An error in the provider's own envelope, so SDKs raise their usual exceptions."""
    body = error_body(provider, status, message, request_id)
    headers = CIMultiDict({"x-trimgate-request-id": request_id, "x-trimgate-error": "true"})
    return web.Response(body=body, status=status, content_type="application/json", headers=headers)
