"""The request handler, read top to bottom: route, examine, send, retry, relay, signals.

Each step is a module of its own; this one only conducts them and measures:
- routing.py picks the upstream and refuses what trimgate must not forward;
- examine.py decodes and plans a chat body (no I/O);
- retry.py sends it, and on a recognised overflow plans again and resends, before any
  byte reaches the client, so no byte of a failed attempt is ever relayed;
- relay.py relays the answer while usage.py reads the provider's count from it;
- signals.py turns the report into headers, metrics, an event and a log line.

Nothing a client sends is lost: a body trimgate cannot read is forwarded as it came
(``x-trimgate-skipped``); when nothing changes, the original bytes go upstream.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import hmac
import logging
import random
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl

from aiohttp import web
from multidict import CIMultiDict
from yarl import URL

from trimgate.attribution import team_resolver
from trimgate.config import Config
from trimgate.errors import UpstreamError
from trimgate.proxy import otel
from trimgate.proxy import upstream as up
from trimgate.proxy.answers import error_response, refuse
from trimgate.proxy.events import EventHub
from trimgate.proxy.examine import Chat, Examiner, InflatedTooLarge, control_header_problem
from trimgate.proxy.front import BodyBudget, FrontRequest
from trimgate.proxy.isolate import ExamineFailed, Isolation, dense
from trimgate.proxy.metrics import Metrics
from trimgate.proxy.offload import Offload, heavy
from trimgate.proxy.relay import Attempt, Incoming, relay, sniff_overflow
from trimgate.proxy.retry import Growth, Send, Sleep, Wordings, send_with_retries, unresolved
from trimgate.proxy.routing import NoUpstream, Route, Router, refusal
from trimgate.proxy.signals import Outcome, attribution, record, record_usage, response_headers
from trimgate.proxy.usage import UsageSniffer as UsageSniffer  # bench/ablate.py replaces it
from trimgate.proxy.websocket import WebSocketRelay, is_upgrade
from trimgate.proxy.windows import MAX_LEARNED_MODEL_LEN, GeminiLookups, LearnedWindows
from trimgate.trimming.estimate import Calibration
from trimgate.trimming.pipeline import TrimReport
from trimgate.trimming.policy import learned, learned_window

log = logging.getLogger("trimgate")


@dataclass(slots=True)
class Counted:
    """The body bytes a request has counted in the proxy's ``BodyBudget`` so far."""

    bytes: int


# Request ids are unique, not secret: a PRNG seeded from os.urandom, no syscall per request.
_IDS = random.Random()


@dataclass(slots=True)
class _UpstreamTimer:
    spent: float = 0.0  # seconds spent waiting on the provider, excluded from overhead


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
        self.examiner = Examiner(config)
        self._client = client
        self._sleep = sleep
        self.calibration: dict[str, Calibration] = {}
        token = config.server.admin_token
        self._admin_token = token.encode("utf-8", "surrogateescape") if token else None
        self._max_body = config.server.max_body_bytes
        # request-body bytes held by the requests in flight (the front counts those it
        # reads before reading them; the proxy counts the others)
        self.bodies = BodyBudget(config.server.max_buffered_bytes)
        # large bodies are examined in worker threads, dense ones in a worker process
        self.offload = Offload(Isolation(config) if config.server.examine_process else None)
        self.team = team_resolver(config.metrics.attribution)  # None: no team label
        if self.team is not None and not metrics.teams:
            raise ValueError("metrics.attribution is on: Metrics(registry, teams=True)")
        self.windows = LearnedWindows()  # of models without a known window, per process
        self.wordings = Wordings()  # what probes of suspected overflows taught, per process
        self.growth = Growth()  # the largest bodies each upstream and model passed
        self.lookups = GeminiLookups(client)
        self.websockets = WebSocketRelay(self)
        self.otel = otel.start(config)  # None: OpenTelemetry is off

    # --- route ----------------------------------------------------------------

    async def handle(self, request: Incoming) -> web.StreamResponse | None:
        """Serve one request; None: it was answered through the ``FrontRequest``."""
        started = time.perf_counter()
        request_id = f"{_IDS.getrandbits(64):016x}"
        raw_path = request.raw_path.partition("?")[0]
        why = refusal(request.method, raw_path, request.path)
        if why is not None:
            return refuse(request_id, why)
        try:
            route = self.router.route(request.method, raw_path)
        except NoUpstream as exc:
            return error_response(
                exc.provider, 404, f"no upstream configured for {exc.provider}", request_id
            )
        provider = route.upstream.provider
        team = self.team(request.headers) if self.team is not None else None
        early = self._refused(request, route, provider, request_id, team)
        if early is not None:
            return early
        if isinstance(request, web.Request) and is_upgrade(request.headers):
            # trimgate's front hands every upgrade to aiohttp, so it arrives here
            return await self.websockets.relay(request, route, request_id)
        # The bytes this request's body holds, counted against server.max_buffered_bytes
        # as they arrive (the front counts those it reads) and until the answer is relayed
        # (the body is kept for a retry).
        if isinstance(request, FrontRequest) and request.busy:
            return self._busy(route, provider, request_id, team)
        counted = Counted(0)
        try:
            if isinstance(request, FrontRequest):
                body = request.body
                if not request.held:  # a small body that came with its head
                    if not self.bodies.take(len(body)):
                        return self._busy(route, provider, request_id, team)
                    counted.bytes = len(body)
            else:
                read = await self._read_counted(request, counted)
                if read is None:
                    return self._busy(route, provider, request_id, team)
                body = read
            try:
                chat, skipped = await self.examine(request.headers, route, body, request_id)
            except InflatedTooLarge:
                return self._too_large(route, provider, request_id, " once inflated", team)
            return await self._send_and_relay(
                request, route, provider, body, chat, skipped, request_id, started, team
            )
        except web.HTTPRequestEntityTooLarge:
            return self._too_large(route, provider, request_id, "", team)
        finally:
            self.bodies.give(counted.bytes)

    async def _read_counted(self, request: web.Request, counted: Counted) -> bytes | None:
        """A body aiohttp's server reads, counted in ``counted`` as it arrives; None past
        the budget (the rest is not read), 413 past ``max_body_bytes``."""
        chunks: list[bytes] = []
        while chunk := await request.content.readany():
            if counted.bytes + len(chunk) > self._max_body:
                raise web.HTTPRequestEntityTooLarge(
                    max_size=self._max_body, actual_size=counted.bytes + len(chunk)
                )
            if not self.bodies.take(len(chunk), counted.bytes):
                return None
            counted.bytes += len(chunk)
            chunks.append(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def _refused(
        self, request: Incoming, route: Route, provider: str, request_id: str, team: str | None
    ) -> web.Response | None:
        """The answer to a routed request that is never forwarded, or None."""
        if self._admin_token is not None and _carries(request, self._admin_token):
            # a scraper's mistyped admin path (``/metrics/``): the admin token never
            # leaves trimgate, and the upstream is never contacted
            self._count(route, "other", 404, team)
            log.warning(
                "a request carrying the admin token was not forwarded",
                extra={"event": "admin_token_refused", "request_id": request_id},
            )
            return error_response(
                provider,
                404,
                "not an admin endpoint; a request carrying the admin token is never forwarded",
                request_id,
            )
        bad = control_header_problem(request.headers)
        if bad is not None:  # the client asked trimgate for something it cannot do
            self._count(route, "other", 400, team)
            return error_response(provider, 400, bad, request_id)
        return None

    async def _send_and_relay(
        self,
        request: Incoming,
        route: Route,
        provider: str,
        body: bytes,
        chat: Chat | None,
        skipped: str | None,
        request_id: str,
        started: float,
        team: str | None,
    ) -> web.StreamResponse | None:
        try:
            return await self._forward(
                request, route, body, chat, skipped, request_id, started, team
            )
        except UpstreamError as exc:
            self._count(route, chat.label if chat else "other", exc.status, team)
            log.warning(
                "upstream failed",
                extra={
                    "event": "upstream_error",
                    "request_id": request_id,
                    "upstream": route.name,
                    "status": exc.status,
                    "error": str(exc),
                    **({"team": team} if team is not None else {}),
                },
            )
            return error_response(provider, exc.status, str(exc), request_id)

    # --- bounds -----------------------------------------------------------------

    def _busy(self, route: Route, provider: str, request_id: str, team: str | None) -> web.Response:
        self._count(route, "other", 503, team)
        log.warning(
            "request bodies in flight are at server.max_buffered_bytes; answered 503",
            extra={"event": "busy", "request_id": request_id, "upstream": route.name},
        )
        response = error_response(
            provider, 503, "trimgate is holding too many request bodies; retry", request_id
        )
        response.headers["Retry-After"] = "1"
        return response

    def _too_large(
        self, route: Route, provider: str, request_id: str, how: str, team: str | None
    ) -> web.Response:
        self._count(route, "other", 413, team)
        return error_response(
            provider, 413, f"request body exceeds server.max_body_bytes{how}", request_id
        )

    async def close(self) -> None:
        """Stop the examination threads and process (at shutdown)."""
        self.offload.close()
        if self.offload.isolation is not None:
            await self.offload.isolation.close()

    # --- examine ----------------------------------------------------------------

    async def examine(
        self, headers: Mapping[str, str], route: Route, body: bytes, request_id: str
    ) -> tuple[Chat | None, str | None]:
        """The examined chat (None: forwarded untouched) and the reason it is not trimmed
        up front. A large or compressed body is examined in a worker thread, a dense one in
        the examining process (proxy/isolate.py), so that decoding and planning it does not
        hold up every other request on the loop. A bug while examining forwards the body
        untouched (``internal-error``), never a 500."""
        if route.wire_format is None:
            return None, None
        compressed = "Content-Encoding" in headers
        off = heavy(body, compressed)
        isolation = self.offload.isolation
        if off and isolation is not None and dense(body, compressed):
            try:
                found = await isolation.examine(
                    headers, route, body, self.calibration, self.windows.windows
                )
            except InflatedTooLarge:
                raise
            except ExamineFailed as exc:  # a bug while examining: as in a thread
                return _examine_failed(request_id, str(exc), traceback=False)
            except Exception as exc:  # a bug in reaching the worker: a thread examines it
                log.exception(
                    "the examining process could not be asked; examining in a thread",
                    extra={
                        "event": "examine_process",
                        "request_id": request_id,
                        "error_type": type(exc).__name__,
                    },
                )
                found = None
            if found is not None:
                return found  # None: no worker now, a thread examines it
        return await self.offload.run(
            off, lambda: self._examine_safely(headers, route, body, request_id)
        )

    def _examine_safely(
        self, headers: Mapping[str, str], route: Route, body: bytes, request_id: str
    ) -> tuple[Chat | None, str | None]:
        try:
            return self._examine(headers, route, body)
        except InflatedTooLarge:
            raise
        except Exception as exc:  # a bug must not break a request the provider would answer
            return _examine_failed(request_id, type(exc).__name__, traceback=True)

    def _examine(
        self, headers: Mapping[str, str], route: Route, body: bytes
    ) -> tuple[Chat | None, str | None]:
        # a method of its own: bench/ablate.py replaces it to switch the examination off
        return self.examiner.examine(headers, route, body, self.calibration, self.windows.windows)

    # --- send, retry, relay, signals --------------------------------------------

    async def _forward(
        self,
        request: Incoming,
        route: Route,
        body: bytes,
        chat: Chat | None,
        skipped: str | None,
        request_id: str,
        started: float,
        team: str | None = None,
    ) -> web.StreamResponse | None:
        url = URL(route.url(request.raw_path.partition("?")[2]), encoded=True)
        headers = up.request_headers(request.headers)
        timer = _UpstreamTimer()
        extra = {"x-trimgate-request-id": request_id}
        if skipped:
            extra["x-trimgate-skipped"] = skipped
        send: Send = functools.partial(
            self._send, request.method, url, headers, body, route, timer, chat
        )

        if chat is None:  # pass-through: byte for byte
            final = await send(body)
            try:
                self._count(route, "other", final.resp.status, team)
                self._overhead(route, started, timer)
                return await relay(request, final, extra, None)
            finally:
                final.resp.release()  # also when the relay failed or never started

        if _unreadable_encodings(headers.get("Accept-Encoding", "")):
            # trimgate must read error bodies (overflow) and usage: ask only for
            # encodings it can inflate; the answer is still relayed compressed
            headers["Accept-Encoding"] = "gzip, deflate"
        if chat.window_unknown:
            send = self._learning(chat, send, request_id)
            if chat.codec.wire_format == "gemini":
                self._ask_window(chat, request, route)
        final, outcome = await self._send_chat(chat, send, request_id)
        try:
            outcome.attribution = attribution(request.headers, team)
            outcome.team = team
            extra.update(response_headers(outcome))
            if chat.counted_after is not None:  # count_tokens answered for the client's body
                extra["x-trimgate-tokens-after"] = str(chat.counted_after)
            status = final.resp.status
            self._count(route, chat.label, status, team)
            self._overhead(route, started, timer)
            # Metrics, the event and the log lines go out as soon as the handler first
            # waits (the relay's first read), after the answer's first bytes: not in
            # the time to first byte.
            asyncio.get_running_loop().call_soon(_record, outcome, self.metrics, self.hub, status)
            return await self._relay_chat(request, chat, final, extra, outcome, started)
        finally:
            final.resp.release()  # also when the relay failed or never started

    async def _relay_chat(
        self,
        request: Incoming,
        chat: Chat,
        final: Attempt,
        extra: dict[str, str],
        outcome: Outcome,
        started: float,
    ) -> web.StreamResponse | None:
        """Relays a chat's answer; a success's usage is read on the way, learned from and
        recorded (and given to OpenTelemetry when configured)."""
        sniffer = None
        if final.resp.status < 300:
            rh = final.resp.headers
            ctype, encoding = rh.get("Content-Type", ""), rh.get("Content-Encoding", "")
            sniffer = UsageSniffer(chat.codec, ctype, encoding)
        response = await relay(request, final, extra, sniffer)
        if sniffer is not None:
            usage = sniffer.usage
            self._learn(chat, usage[0] if usage else None, outcome.report)
            if usage is not None and not chat.route.count_tokens:  # a count is no traffic
                record_usage(outcome, self.metrics, *usage)
        if self.otel is not None and not chat.route.count_tokens:
            self.otel.chat(outcome, request.headers, started, final.resp.status, sniffer)
        return response

    async def _send_chat(self, chat: Chat, send: Send, request_id: str) -> tuple[Attempt, Outcome]:
        """The answer to relay and what happened; the retry state (which holds the body
        sent) is freed on return, before the relay."""
        final, state = await send_with_retries(
            chat,
            send,
            request_id,
            sleep=self._sleep,
            learn=self._learn,
            max_body=self.config.server.max_body_bytes,
            offload=self.offload,
            wordings=self.wordings,
            growth=self.growth,
        )
        report = state.report
        if final.resp.status < 400 and final.overflow is None:
            self.growth.passed(chat.route.name, chat.model, report.tokens_after)
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
            unresolved=unresolved(final, report),
            shadow=chat.shadow,
            probe=state.probe,
            probe_wording=state.wording if chat.settings.log_wordings else None,
        )
        return final, outcome

    async def _send(
        self,
        method: str,
        url: URL,
        headers: CIMultiDict[str],
        original: bytes,
        route: Route,
        timer: _UpstreamTimer,
        chat: Chat | None,
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
        if not 100 <= resp.status <= 599:  # 000-099 and 600-999 parse, but are no status
            resp.close()
            raise UpstreamError(f"upstream sent an invalid status code ({resp.status:03d})")
        self.metrics.for_upstream(route.name)[1].observe(time.perf_counter() - t)
        if chat is None:
            timer.spent += time.perf_counter() - t
            return Attempt(resp, b"", None)
        try:
            patterns = route.upstream.compiled_overflow_patterns
            # the first answer only (Chat's and Responses')
            uncapped, chat.uncapped = chat.uncapped, False
            return await sniff_overflow(chat.codec, resp, patterns, uncapped=uncapped)
        except BaseException:
            resp.close()
            raise
        finally:
            timer.spent += time.perf_counter() - t  # waiting for the first bytes is upstream's

    def _learning(self, chat: Chat, send: Send, request_id: str) -> Send:
        """``send``, learning the model's window from the first overflow that states one."""

        async def send_and_learn(payload: bytes) -> Attempt:
            attempt = await send(payload)
            if attempt.overflow is not None:
                window = learned_window(attempt.overflow.maximum)
                if window is not None:
                    name = chat.route.name
                    self._learn_window(chat.model, window, name, "overflow", request_id)
            return attempt

        return send_and_learn

    def _ask_window(self, chat: Chat, request: Incoming, route: Route) -> None:
        """Ask Gemini's models.get for the window, in the background (the request goes on)."""
        name = route.name

        def learn(model: str, window: int) -> None:
            self._learn_window(model, window, name, "models.get")

        query = request.raw_path.partition("?")[2]
        base = route.upstream.base_url
        self.lookups.ask(chat.model, base, route.path, query, request.headers, learn)

    def _learn_window(
        self, model: str | None, window: int, upstream: str, source: str, request_id: str = ""
    ) -> None:
        label = self.windows.learn(model, window)
        if label is None:  # known already, or a model string too long to keep
            return
        self.metrics.set_learned_window(label, window)
        fields: dict[str, object] = {
            "event": "window_learned",
            "upstream": upstream,
            "model": (model or "")[:MAX_LEARNED_MODEL_LEN],
            "window": window,
            "source": source,
        }
        if request_id:
            fields["request_id"] = request_id
        log.info("model window learned", extra=fields)

    # --- measures -----------------------------------------------------------------

    def _learn(self, chat: Chat, reported: int | None, sent: TrimReport) -> None:
        """Fold the provider's count for the body ``sent`` into the model's calibration."""
        label = chat.label
        state = learned(
            self.calibration,
            label,
            chat.settings,
            reported,
            sent,
            shadow=chat.shadow,
            ratio=chat.policy.ratio,
        )
        if state is not None:
            self.calibration[label] = state
            self.metrics.set_calibration(label, state.ratio)

    def _overhead(self, route: Route, started: float, timer: _UpstreamTimer) -> None:
        overhead = time.perf_counter() - started - timer.spent
        self.metrics.for_upstream(route.name)[0].observe(max(0.0, overhead))

    def _count(self, route: Route, label: str, status: int, team: str | None = None) -> None:
        self.metrics.count_request(route.name, route.upstream.provider, label, status, team)


def _examine_failed(request_id: str, error_type: str, *, traceback: bool) -> tuple[None, str]:
    """A bug while examining (here, or in the examining process: its type only): logged,
    and the body forwarded untouched."""
    log.error(
        "examining the request failed; forwarding it untouched",
        exc_info=traceback,
        extra={"event": "examine_error", "request_id": request_id, "error_type": error_type},
    )
    return None, "internal-error"


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


# Where a client puts a credential: the admin token in any of them is never forwarded.
_CREDENTIAL_HEADERS = (
    "Authorization",
    "Proxy-Authorization",
    "x-api-key",
    "x-goog-api-key",
    "api-key",
    "Cookie",
)
# A credential value's pieces: "Bearer <t>", "a=b; admin=<t>" (split on the first "=" only:
# a token may end in base64 padding)
_PIECES = re.compile(rb"[\s,;]+")


def _carries(request: Incoming, token: bytes) -> bool:
    """Whether ``request`` carries the admin ``token`` as a credential, whatever the form:
    a credential header's value, its scheme's argument, one of its pieces (a cookie's
    value), either half of a decoded Basic user:password, or a query value. Each candidate
    is compared in constant time, and only whole ones: a short token never refuses an
    unrelated request whose own key merely contains it."""
    candidates: list[bytes] = []
    for name in _CREDENTIAL_HEADERS:
        for value in request.headers.getall(name, ()):
            given = value.encode("utf-8", "surrogateescape").strip()
            candidates.append(given)
            words = given.split(None, 1)
            if len(words) == 2:
                candidates.append(words[1].strip())
                if words[0].lower() == b"basic":
                    with contextlib.suppress(ValueError):  # binascii.Error: not base64
                        user, _, password = base64.b64decode(words[1].strip()).partition(b":")
                        candidates += (user, password)
            for piece in _PIECES.split(given):
                candidates += (piece, piece.partition(b"=")[2])
    query = request.raw_path.partition("?")[2]
    if query:
        candidates.extend(
            value.encode("utf-8", "surrogateescape")
            for _, value in parse_qsl(query, keep_blank_values=True)
        )
    size = len(token)
    found = False
    for candidate in candidates:
        if len(candidate) == size:
            found |= hmac.compare_digest(candidate, token)
    return found


def _unreadable_encodings(accept: str) -> bool:
    lowered = accept.lower()
    return "br" in lowered or "zstd" in lowered or "compress" in lowered
