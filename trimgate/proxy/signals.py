"""Turn a request's outcome into headers, metrics, an event and log lines.

Log records carry counts, ids and labels only: never a credential, never a
message's content.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from trimgate import logs
from trimgate.proxy.events import EventHub
from trimgate.proxy.metrics import Metrics, ModelMetrics
from trimgate.trimming.pipeline import TrimReport

log = logging.getLogger("trimgate")

ATTRIBUTION = {
    "x-trimgate-agent": "agent_alias",
    "x-trimgate-channel": "channel",
    "x-trimgate-turn-id": "turn_id",
    "x-trimgate-session": "session_id",
}
MAX_ATTRIBUTION_LEN = 200


@dataclass(slots=True)
class Outcome:
    """What happened to one examined chat request."""

    request_id: str
    upstream: str
    provider: str
    wire_format: str
    model: str | None  # the request's model
    model_label: str  # bounded: catalog entry name or "other"
    report: TrimReport
    reason: str | None  # "preemptive" | "reactive" when trimmed
    retries: int = 0
    overflows: int = 0
    # why an overflow went back unresolved: "one-turn", "retries-spent",
    # "output-reservation" (metrics.UNRESOLVED), None when it did not
    unresolved: str | None = None
    shadow: bool = False
    # how a probe of a suspected overflow went: "fixed", "confirmed", "refuted"
    # (metrics.PROBES), None when none was made
    probe: str | None = None
    # the probed wording, for the log line only (reactive.log_wordings), else None
    probe_wording: str | None = None
    attribution: dict[str, str] = field(default_factory=dict)
    team: str | None = None  # the bounded ``team`` label; None: attribution is off


def attribution(headers: Mapping[str, str], team: str | None = None) -> dict[str, str]:
    """Attribution fields from the request's x-trimgate-* headers (case-insensitive),
    and ``team`` when metering by team is on (a resolved, bounded value)."""
    out = {"team": team} if team is not None else {}
    for header, key in ATTRIBUTION.items():
        value = headers.get(header)
        if value:
            # undecodable bytes arrive as surrogates, which JSON cannot carry
            cut = value[:MAX_ATTRIBUTION_LEN]
            out[key] = cut.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return out


def response_headers(o: Outcome) -> dict[str, str]:
    r = o.report
    h = {
        "x-trimgate-request-id": o.request_id,
        "x-trimgate-trimmed": "true" if r.trimmed else "false",
        "x-trimgate-dropped-turns": str(r.dropped_turns),
        "x-trimgate-dropped-messages": str(r.dropped_messages),
        "x-trimgate-kept-turns": str(r.kept_turns),
        "x-trimgate-tokens-before": str(r.tokens_before),
        "x-trimgate-tokens-after": str(r.tokens_after),
        "x-trimgate-budget": str(r.budget),
        "x-trimgate-retries": str(o.retries),
    }
    if r.trimmed and o.reason:
        h["x-trimgate-reason"] = o.reason
    if r.capped_messages:
        h["x-trimgate-capped-messages"] = str(r.capped_messages)
    if r.orphans_removed:
        h["x-trimgate-orphans-removed"] = str(r.orphans_removed)
    if r.tool_results_capped:
        h["x-trimgate-tool-results-capped"] = str(r.tool_results_capped)
    if r.anchor_tokens:
        h["x-trimgate-anchor-tokens"] = str(r.anchor_tokens)
    if o.unresolved == "one-turn":
        h["x-trimgate-exhausted"] = "true"
    elif o.unresolved == "retries-spent":
        h["x-trimgate-retries-spent"] = "true"
    elif o.unresolved == "output-reservation":
        h["x-trimgate-unfixable"] = "output-reservation"
    if o.probe:
        h["x-trimgate-probe"] = o.probe
    if o.shadow:
        h["x-trimgate-shadow"] = "true"
    return h


def record(o: Outcome, metrics: Metrics, hub: EventHub, *, status: int) -> None:
    """Metrics, the event and the log lines of an examined request."""
    r = o.report
    mm = metrics.for_model(o.upstream, o.model_label, o.team)
    _observe(o, mm)
    base = {
        "request_id": o.request_id,
        "upstream": o.upstream,
        "provider": o.provider,
        "format": o.wire_format,
        "model": o.model_label,
        **o.attribution,
    }
    if r.trimmed and o.reason:
        mm.trims[o.reason].inc()
        mm.dropped_turns[o.reason].inc(r.dropped_turns)
        mm.dropped_messages[o.reason].inc(r.dropped_messages)
        mm.tokens_dropped[o.reason].inc(r.tokens_dropped)
        hub.publish(event_payload(o))
        log.info(
            "history trimmed",
            extra={
                "event": "history_trimmed",
                **base,
                "reason": o.reason,
                "dropped_turns": r.dropped_turns,
                "dropped_messages": r.dropped_messages,
                "kept_turns": r.kept_turns,
                "tokens_before": r.tokens_before,
                "tokens_after": r.tokens_after,
                "budget": r.budget,
                "anchor_tokens": r.anchor_tokens,
                "shadow": o.shadow,
            },
        )
    _warn(o, base)
    if log.isEnabledFor(logging.INFO):  # one line per request: the hot path of logging
        fields = {
            "event": "request",
            **base,
            "status": status,
            "trimmed": r.trimmed,
            "tokens_before": r.tokens_before,
            "tokens_after": r.tokens_after,
            "budget": r.budget,
            "retries": o.retries,
            "shadow": o.shadow,
        }
        logs.line(log, logging.INFO, "request", fields)


def record_usage(o: Outcome, metrics: Metrics, prompt: int, cached: int) -> None:
    """The provider's prompt usage of an answer: all traffic, and trimmed bodies apart."""
    mm = metrics.for_model(o.upstream, o.model_label, o.team)
    cached = min(max(cached, 0), prompt)
    if prompt <= 0:
        return
    mm.prompt_tokens_total.inc(prompt)
    mm.prompt_cache_read.inc(cached)
    if o.report.trimmed and not o.shadow:
        mm.trimmed_prompt_tokens_total.inc(prompt)
        mm.trimmed_prompt_cache_read.inc(cached)


def _observe(o: Outcome, mm: ModelMetrics) -> None:
    """The model's histograms and the counters of every request, trimmed or not."""
    r = o.report
    mm.prompt_tokens.observe(r.tokens_after)
    if r.budget > 0:
        mm.utilization.observe(r.tokens_after / r.budget)
    if o.overflows:
        mm.context_overflows.inc(o.overflows)
    if o.retries:
        mm.reactive_retries.inc(o.retries)
    if o.unresolved:
        mm.trim_exhausted[o.unresolved].inc()
    if o.probe:
        mm.probes[o.probe].inc()
    if r.capped_messages:
        mm.capped_messages.inc(r.capped_messages)
    if r.orphans_removed:
        mm.orphans_removed.inc(r.orphans_removed)
    if r.tool_results_capped:
        mm.tool_results_capped.inc(r.tool_results_capped)


def _warn(o: Outcome, base: Mapping[str, object]) -> None:
    """A log line for each rule beyond the trim that fired, and for an exhausted retry."""
    r = o.report
    if r.capped_messages:
        log.warning(
            "message cap fired",
            extra={"event": "message_cap", **base, "capped_messages": r.capped_messages},
        )
    if r.orphans_removed:
        log.warning(
            "orphan tool calls or results removed",
            extra={"event": "orphan_sweep", **base, "orphans_removed": r.orphans_removed},
        )
    if r.tool_results_capped:
        log.info(
            "tool results capped",
            extra={"event": "tool_result_cap", **base, "count": r.tool_results_capped},
        )
    if o.probe:
        fields = {"event": "overflow_probe", **base, "result": o.probe, "retries": o.retries}
        if o.probe_wording is not None:
            fields["wording"] = logged_wording(o.probe_wording)
        log.log(
            logging.WARNING if o.probe == "refuted" else logging.INFO,
            _PROBE_LOG[o.probe],
            extra=fields,
        )
    if o.unresolved:
        log.error(
            _UNRESOLVED_LOG[o.unresolved],
            extra={
                "event": "trim_exhausted",
                **base,
                "reason": o.unresolved,
                "retries": o.retries,
                "kept_turns": r.kept_turns,
            },
        )


_UNRESOLVED_LOG = {
    "one-turn": "context overflow persisted with one turn left: nothing more to drop",
    "retries-spent": "context overflow persisted when the retries ran out",
    "output-reservation": "context overflow no trim can fix: the output reservation fills "
    "the window",
}


# a probed wording in the overflow_probe log line (reactive.log_wordings) is cut to this
WORDING_LOG_CHARS = 300
# ... after what may quote a request or name someone is blanked too: quoted text, e-mail
# addresses, URLs and long unbroken tokens (keys, hashes), beyond the ids and numbers the
# wording's key already blanks
_QUOTED_RE = re.compile(r"'[^'\n]{0,200}'|\"[^\"\n]{0,200}\"|`[^`\n]{0,200}`|«[^»\n]{0,200}»")
_PERSONAL_RE = re.compile(r"\S+@\S+|\b[a-z][a-z0-9+.-]*://\S+|[\w+/=.-]{20,}", re.IGNORECASE)


def logged_wording(wording: str) -> str:
    """A probed wording as the log line carries it (``reactive.log_wordings``)."""
    return _PERSONAL_RE.sub("#", _QUOTED_RE.sub("'…'", wording))[:WORDING_LOG_CHARS]


_PROBE_LOG = {
    "fixed": "an error that suspected an overflow was one: the trimmed resend went through",
    "confirmed": "an error that suspected an overflow was one: its counts moved with the trim",
    "refuted": "an error that suspected an overflow was not one: the provider's first answer "
    "goes back",
}


def event_payload(o: Outcome) -> dict[str, object]:
    r = o.report
    payload: dict[str, object] = {
        "type": "history_trimmed",
        "dropped_messages": r.dropped_messages,
        "dropped_turns": r.dropped_turns,
        "kept_turns": r.kept_turns,
        "tokens_before": r.tokens_before,
        "tokens_after": r.tokens_after,
        "budget": r.budget,
        "reason": o.reason,
        "provider": o.provider,
        "upstream": o.upstream,
        "model": o.model[:MAX_ATTRIBUTION_LEN] if o.model else o.model,
        "request_id": o.request_id,
        "timestamp": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "shadow": o.shadow,
    }
    payload.update(o.attribution)
    return payload
