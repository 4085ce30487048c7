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
        crumb = self.settings.breadcrumb
        body = orjson.dumps(self.codec.encode(decoded, new_plan, breadcrumb=crumb))
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
        """The examined chat, or None and why it is forwarded untouched (None: mode off).

        ``learned`` holds the windows overflows stated for models without one (model
        string -> window): used only when neither the config nor the catalog knows the
        model and ``trimming.max_context_tokens`` is not set. An examined chat with a
        reason (``provider-managed``, ``unknown-window``) was not trimmed up front."""
        assert route.wire_format is not None
        mode = self._mode(headers)
        if mode == "off":
            return None, None
        encoding = headers.get("Content-Encoding", "").lower().strip()
        raw = decompress(body, encoding, self.max_body) if encoding else body
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
        policy = make_policy(
            settings,
            window or 0,
            output_limit=decoded.output_limit,
            hoistable=decoded.hoistable,
            request_budget=int_header(headers.get("x-trimgate-budget")),
            ratio=planning_ratio(calibration, label, settings),
            max_input=entry.max_input if entry else None,
        )
        # No window and no other budget: no token trim on a guess (the other passes run)
        skipped: str | None = "unknown-window" if window is None and not policy.budget else None
        trim_plan = plan(decoded.conversation, policy)
        report = trim_plan.report
        shadow = mode == "shadow"
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
            crumb = settings.breadcrumb
            send_body = orjson.dumps(codec.encode(decoded, trim_plan, breadcrumb=crumb))
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
        )
        return chat, skipped

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
    """``body`` inflated (gzip / deflate), or None: another encoding, corrupt, or larger
    than ``limit`` once inflated (never inflated past it)."""
    if encoding not in ("gzip", "deflate", "x-gzip"):
        return None
    wbits = 16 + zlib.MAX_WBITS if encoding in ("gzip", "x-gzip") else zlib.MAX_WBITS
    try:
        d = zlib.decompressobj(wbits)
        out = d.decompress(body, limit + 1)
    except zlib.error:
        return None
    if len(out) > limit or d.unconsumed_tail or not d.eof:  # not eof: cut short, unverified
        return None
    return out
