"""Examine a chat request: body -> inflate -> decode -> policy -> plan -> body to send.

Rules of this module:
- No I/O of its own: bytes and headers in, a ``Chat`` (or the reason it is skipped) out.
- Nothing a client sends is lost: a body that cannot be read (unknown encoding, bad
  JSON, a shape the codec does not handle) is forwarded as it came, with the reason.
- When the plan changes nothing, the original bytes are sent, not a re-encoding.
- The parsed body and its conversation are freed before the send (``Chat``'s docstring).
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import orjson
from multidict import MultiMapping

from trimgate.config import Config
from trimgate.errors import DecodeError
from trimgate.history import Conversation
from trimgate.providers.base import Codec, Decoded, DecodeOptions
from trimgate.providers.catalog import Catalog, CatalogEntry, anthropic_beta_tokens
from trimgate.providers.registry import CODECS
from trimgate.proxy.routing import Route
from trimgate.trimming.estimate import Calibration
from trimgate.trimming.pipeline import Policy, TrimReport, plan
from trimgate.trimming.policy import Settings, make_policy, planning_ratio

MODES = ("enforce", "shadow", "off")
PROVIDER_MANAGED = "provider-managed"  # the x-trimgate-skipped reason of a deferred request
# A body with more JSON objects than this is not examined (``too-many-items``): parsing
# takes about 0.4 µs per object with the GIL held, so even in a worker thread a body of
# millions of tiny objects (a 58 MB one: 0.8 s) would hold every other request of the
# process; and it parses into ~19 times its size. Agents' real histories stay far below
# (a 1M-token session is some tens of thousands of objects). Objects are counted as the
# bytes '{"', which only an object opening with a key makes: inside a JSON string the
# quote is escaped, so code or JSON text in a message never counts. (A body spaced out
# as '{ "' is not counted: the guard is against the compact bodies clients send.)
MAX_EXAMINED_OBJECTS = 100_000


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
        if _too_many_objects(raw):
            raise DecodeError("too-many-items")
        decoded = codec.decode_raw(raw, path=path, options=options, tool_texts=tool_texts)
        if decoded is not None:
            return decoded, None
        try:
            parsed = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise DecodeError(_too_deep(exc) or "invalid-json") from None
        if not isinstance(parsed, dict):
            raise DecodeError("not-an-object")
    return codec.decode(parsed, path=path, options=options), parsed


def _too_many_objects(raw: bytes) -> bool:
    # the smallest object with a key ('{"":0}') is 6 bytes; the 1-byte count is the fast
    # one (about 3 ms per 10 MB), the 2-byte one runs only past it
    return (
        len(raw) > 6 * MAX_EXAMINED_OBJECTS
        and raw.count(b"{") > MAX_EXAMINED_OBJECTS
        and raw.count(b'{"') > MAX_EXAMINED_OBJECTS
    )


def encode_chat(codec: Codec, decoded: Decoded, trim_plan: Any, breadcrumb: str) -> bytes:
    """The body a plan forwards. Raises ``DecodeError("too-deep")`` when the kept items
    nest deeper than the JSON encoder goes (valid JSON a client may send: nothing to do
    with it but forward it as it came)."""
    try:
        return orjson.dumps(codec.encode(decoded, trim_plan, breadcrumb=breadcrumb))
    except TypeError as exc:
        reason = _too_deep(exc)
        if reason is None:
            raise
        raise DecodeError(reason) from None


def _too_deep(exc: Exception) -> str | None:
    """``too-deep`` when orjson gave up on nesting depth (over 254 levels to encode,
    over 1024 to decode), else None."""
    text = str(exc)
    return "too-deep" if "Recursion limit" in text or "depth limit" in text else None


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
    settings: Settings
    policy: Policy
    report: TrimReport  # of the first plan
    label: str
    shadow: bool
    model: str | None
    send_body: bytes  # what goes upstream first (the original bytes unless changed);
    # emptied once sent, so that it is not held while the answer is relayed
    body: bytes  # the request body as it came
    encoding: str  # its Content-Encoding, "" when none
    options: DecodeOptions
    tool_texts: bool  # tool-result capping is configured: a decode fills their texts
    # No window known for the model (no entry, no fallback, none learned): an overflow
    # that states one teaches it
    window_unknown: bool = False
    # count_tokens answered for the client's body: the estimate of the body trimgate
    # would have forwarded (the x-trimgate-tokens-after header); None otherwise
    counted_after: int | None = None
    # A Chat Completions request that set no output limit (or a Responses request with no
    # max_output_tokens): its first answer, stopped at "length" (left incomplete for
    # max_output_tokens) before producing anything, was stopped by the window
    # (``detect_unspent_stop``).
    # Cleared once that answer is read: a retry that stops so again goes back as it came,
    # so a gateway that caps the output itself (beside a model that reasons unseen) costs
    # one more call at most
    uncapped: bool = False

    def replan(self, policy: Policy, max_body: int) -> tuple[TrimReport, bytes]:
        """A retry's report and body, from the body decoded as ``examine`` decoded it
        (same items, same indices); what it decodes is freed on return, before the send."""
        raw = self.body
        if self.encoding:
            inflated = decompress(raw, self.encoding, max_body)
            if inflated is None:  # it inflated within the limit the first time
                raise ValueError("the body no longer inflates")
            raw = inflated
        decoded, _ = decode_chat(self.codec, raw, self.route.path, self.options, self.tool_texts)
        new_plan = plan(decoded.conversation, policy)
        body = encode_chat(self.codec, decoded, new_plan, self.settings.breadcrumb)
        return new_plan.report, body


class Examiner:
    """The config's trimming rules, resolved once: the catalog, each model's settings
    and the decode options they imply."""

    def __init__(self, config: Config) -> None:
        user = [
            CatalogEntry(name=m.name or m.match, match=m.match, context_window=m.context_window)
            for m in config.models
        ]
        self.catalog = Catalog(user)
        self.mode = config.trimming.mode
        self.max_body = config.server.max_body_bytes
        self.max_ratio = config.server.max_inflation_ratio
        self.settings = config.trimming.settings()
        self.overrides = {
            (m.name or m.match): config.for_model(m.trimming).settings()
            for m in config.models
            if m.trimming
        }
        s = self.settings
        self.options = DecodeOptions(breadcrumb=s.breadcrumb, media_tokens=s.media_tokens)
        # Tool-result capping anywhere: decodes fill the results' texts (decode_raw)
        self.caps = any(c.max_tool_result_chars > 0 for c in (s, *self.overrides.values()))
        self.defer = config.trimming.provider_managed == "defer"
        self.count_client = config.trimming.count_tokens == "client"

    def examine(
        self,
        headers: Mapping[str, str],
        route: Route,
        body: bytes,
        calibration: Mapping[str, Calibration],
        learned: Mapping[str, int] | None = None,
    ) -> tuple[Chat | None, str | None]:
        """The examined chat, or None, and why it is not trimmed up front (None: mode off).
        ``learned``: windows overflows taught for models nobody configured (``_window``)."""
        assert route.wire_format is not None
        mode = self._mode(headers)
        if mode == "off":
            return None, None
        encoding = headers.get("Content-Encoding", "").lower().strip()
        raw = self._inflated(body, encoding) if encoding else body
        if raw is None:
            return None, "compressed-body"
        codec = CODECS[route.wire_format]
        try:
            decoded, parsed = decode_chat(codec, raw, route.path, self.options, self.caps)
        except DecodeError as exc:
            return None, exc.reason
        if decoded.skip:
            return None, decoded.skip
        entry = self.catalog.lookup(decoded.model)
        label = entry.name if entry else "other"  # bounded: a catalog name or "other"
        settings = self.overrides.get(label, self.settings)
        options = self._options_for(settings)
        if options is not self.options:  # the model's own breadcrumb or media price
            decoded, _ = decode_chat(codec, raw, route.path, options, self.caps, parsed)
        window = self._window(entry, decoded.model, settings, headers, route, learned)
        policy = _policy(settings, window, decoded, headers, calibration, label, entry)
        shadow = mode == "shadow"
        try:  # DecodeError: the kept items nest deeper than the encoder goes
            report, settings, send_body, counted_after, skipped = self._outgoing(
                route, codec, decoded, policy, settings, shadow, body, window is None
            )
        except DecodeError as exc:
            return None, exc.reason
        # The parsed body, its conversation and the plan are freed on return (Chat's doc)
        chat = Chat(
            route=route,
            codec=codec,
            settings=settings,
            policy=policy,
            report=report,
            label=label,
            shadow=shadow,
            model=decoded.model,
            send_body=send_body,
            body=body,
            encoding=encoding,
            options=options,
            tool_texts=self.caps,
            window_unknown=window is None,
            counted_after=counted_after,
            uncapped=decoded.uncapped,
        )
        return chat, skipped

    def _inflated(self, body: bytes, encoding: str) -> bytes | None:
        """The body inflated; None when it cannot be (``InflatedTooLarge``: the caller's
        413)."""
        return inflate(body, encoding, min(self.max_body, max(1, len(body)) * self.max_ratio))

    def _outgoing(
        self,
        route: Route,
        codec: Codec,
        decoded: Decoded,
        policy: Policy,
        settings: Settings,
        shadow: bool,
        body: bytes,
        window_unknown: bool,
    ) -> tuple[TrimReport, Settings, bytes, int | None, str | None]:
        """The plan, and what goes upstream: the report, settings, body to send, the
        client body's token count (count_tokens only) and why it was not trimmed."""
        # No window and no other budget: no token trim on a guess (the other passes run)
        skipped: str | None = "unknown-window" if window_unknown and not policy.budget else None
        trim_plan = plan(decoded.conversation, policy)
        report = trim_plan.report
        send_body = body  # forwarded as it came unless the plan changes it
        counted_after: int | None = None
        if route.count_tokens and self.count_client:
            # the count of the client's own body: it decides its own compaction from it;
            # an overflow of that body is the answer, not a reason to trim and resend
            counted_after = report.tokens_after
            report = untouched(report, decoded.conversation)
            settings = replace(settings, reactive=False)
        elif decoded.provider_managed and self.defer:
            # the provider trims its own context: no preemptive trim (a reactive one
            # still follows an overflow)
            report = untouched(report, decoded.conversation)
            skipped = PROVIDER_MANAGED
        elif not shadow and trim_plan.changed:
            send_body = encode_chat(codec, decoded, trim_plan, settings.breadcrumb)
        return report, settings, send_body, counted_after, skipped

    @staticmethod
    def _window(
        entry: CatalogEntry | None,
        model: str | None,
        settings: Settings,
        headers: Mapping[str, str],
        route: Route,
        learned: Mapping[str, int] | None,
    ) -> int | None:
        """The model's window: its entry's (an Anthropic request's ``anthropic-beta``
        tokens may pick an opt-in one), else the configured fallback, else the one an
        overflow taught; None: unknown."""
        if entry is not None:
            if not entry.betas or route.wire_format != "anthropic":
                return entry.context_window
            values = (
                headers.getall("anthropic-beta", ())
                if isinstance(headers, MultiMapping)
                else (headers.get("anthropic-beta"),)
            )
            return entry.window_for(anthropic_beta_tokens(*values))
        if settings.max_context_tokens is not None:
            return settings.max_context_tokens
        if learned and model:
            return learned.get(model)
        return None

    def _mode(self, headers: Mapping[str, str]) -> str:
        """The request's ``x-trimgate-mode`` if it names a mode, else the configured one
        (``control_header_problem`` has refused other values before)."""
        mode = headers.get("x-trimgate-mode", "").lower() or self.mode
        return mode if mode in MODES else self.mode

    def _options_for(self, settings: Settings) -> DecodeOptions:
        options = self.options
        if settings.breadcrumb == options.breadcrumb and (
            settings.media_tokens == options.media_tokens
        ):
            return options
        return DecodeOptions(breadcrumb=settings.breadcrumb, media_tokens=settings.media_tokens)


def _policy(
    settings: Settings,
    window: int | None,
    decoded: Decoded,
    headers: Mapping[str, str],
    calibration: Mapping[str, Calibration],
    label: str,
    entry: CatalogEntry | None,
) -> Policy:
    """The model's policy for this request: its window (0: none), the request's own
    budget header and the learned estimate ratio."""
    return make_policy(
        settings,
        window or 0,
        output_limit=decoded.output_limit,
        hoistable=decoded.hoistable,
        request_budget=int_header(headers.get("x-trimgate-budget")),
        ratio=planning_ratio(calibration, label, settings),
        max_input=entry.max_input if entry else None,
    )


def untouched(report: TrimReport, conversation: Conversation) -> TrimReport:
    """The report of forwarding ``conversation`` as it came, from its plan's ``report``."""
    r = report
    changes = (r.dropped_messages, r.tool_results_capped, r.orphans_removed, r.hoisted)
    if not r.trimmed and not any(changes) and not r.capped_messages:
        return report  # the plan changed nothing
    return TrimReport(
        trimmed=False,
        dropped_turns=0,
        dropped_messages=0,
        kept_turns=sum(1 for m in conversation.messages if m.turn_start),
        tokens_before=report.tokens_before,
        tokens_after=report.tokens_before,
        budget=report.budget,
        # every unit is still there for a reactive retry to drop: those the plan kept
        # and those it would have dropped
        kept_units=report.kept_units + report.dropped_turns,
    )


def int_header(value: str | None) -> int | None:
    """A positive integer control header (``x-trimgate-budget``); anything else: None."""
    if not value:
        return None
    try:
        n = int(value.strip())
    except ValueError:
        return None
    return n if n > 0 else None


class InflatedTooLarge(Exception):
    """A compressed body inflates past ``server.max_body_bytes`` or past
    ``server.max_inflation_ratio`` times its size: the request gets 413."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the request body inflates past {limit} bytes")
        self.limit = limit


def control_header_problem(headers: Mapping[str, str]) -> str | None:
    """Why the request's ``x-trimgate-budget`` or ``x-trimgate-mode`` cannot be obeyed
    (the 400's message, naming the header), or None. An empty value counts as absent."""
    budget = headers.get("x-trimgate-budget", "").strip()
    if budget and int_header(budget) is None:
        return (
            f"x-trimgate-budget: must be a whole number of tokens, at least 1 (got {budget[:40]!r})"
        )
    mode = headers.get("x-trimgate-mode", "").strip()
    if mode and mode.lower() not in MODES:
        return f"x-trimgate-mode: must be one of {', '.join(MODES)} (got {mode[:40]!r})"
    return None


def decompress(body: bytes, encoding: str, limit: int) -> bytes | None:
    """``body`` inflated (gzip / deflate), or None: another encoding, corrupt or cut
    short, or larger than ``limit`` once inflated (never inflated past it)."""
    try:
        return inflate(body, encoding, limit)
    except InflatedTooLarge:
        return None


def inflate(body: bytes, encoding: str, limit: int) -> bytes | None:
    """``body`` inflated (gzip / deflate), or None: another encoding, corrupt or cut
    short. Raises ``InflatedTooLarge`` past ``limit`` bytes (never inflated further)."""
    d = _inflater(encoding)
    if d is None:
        return None
    try:
        out = d.decompress(body, limit + 1)
    except zlib.error:
        return None
    if len(out) > limit or d.unconsumed_tail:
        raise InflatedTooLarge(limit)
    return out if d.eof else None


def _inflater(encoding: str) -> Any:
    if encoding not in ("gzip", "deflate", "x-gzip"):
        return None
    wbits = 16 + zlib.MAX_WBITS if encoding in ("gzip", "x-gzip") else zlib.MAX_WBITS
    return zlib.decompressobj(wbits)
