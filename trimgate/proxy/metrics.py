"""Every Prometheus collector (docs/reference.md, "Metrics"), in one place, on an injected registry.

Label values are bounded: ``upstream`` is a configured name, ``provider`` one
of three, ``model`` a catalog entry's name or ``other``, ``status`` an HTTP
status code, ``reason`` preemptive or reactive (or, on ``trimgate_trim_exhausted_total``,
one of ``UNRESOLVED``).
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

TOKEN_BUCKETS = (
    1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 64_000, 128_000, 200_000, 400_000,
    1_000_000, 2_000_000,
)  # fmt: skip
RATIO_BUCKETS = (0.1, 0.25, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 1.0, 1.1, 1.5)
OVERHEAD_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
)  # fmt: skip
UPSTREAM_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)

_TRIM = ("upstream", "model", "reason")
# Why an overflow went back to the client (``trimgate_trim_exhausted_total{reason}``):
# one turn was left, the retries ran out with more left, or the error states an output
# reservation that alone fills the window.
UNRESOLVED = ("one-turn", "retries-spent", "output-reservation")
_UM = ("upstream", "model")


class Metrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        def counter(name: str, doc: str, labels: tuple[str, ...]) -> Counter:
            return Counter(name, doc, labels, registry=registry)

        self.requests = counter(
            "trimgate_requests_total",
            "Requests answered, by upstream, provider, model and HTTP status.",
            ("upstream", "provider", "model", "status"),
        )
        self.trims = counter("trimgate_trims_total", "Requests whose history was trimmed.", _TRIM)
        self.dropped_turns = counter(
            "trimgate_dropped_turns_total", "Whole turns dropped from forwarded histories.", _TRIM
        )
        self.dropped_messages = counter(
            "trimgate_dropped_messages_total", "History items dropped by trimming.", _TRIM
        )
        self.tokens_dropped = counter(
            "trimgate_tokens_dropped_total", "Estimated prompt tokens removed by trimming.", _TRIM
        )
        self.capped_messages = counter(
            "trimgate_capped_messages_total", "Messages removed by the message-count cap.", _UM
        )
        self.orphans_removed = counter(
            "trimgate_orphans_removed_total", "Orphaned tool calls and results removed.", _UM
        )
        self.tool_results_capped = counter(
            "trimgate_tool_results_capped_total", "Tool results shortened to the char cap.", _UM
        )
        self.context_overflows = counter(
            "trimgate_context_overflows_total",
            "Context-window-exceeded answers received from the provider.",
            _UM,
        )
        self.reactive_retries = counter(
            "trimgate_reactive_retries_total", "Requests resent after an overflow.", _UM
        )
        self.trim_exhausted = counter(
            "trimgate_trim_exhausted_total",
            "Overflows returned to the client unresolved, by reason (one-turn, "
            "retries-spent, output-reservation).",
            _TRIM,
        )
        self.prompt_tokens = Histogram(
            "trimgate_prompt_tokens_estimated",
            "Estimated prompt tokens of forwarded chat requests.",
            _UM,
            buckets=TOKEN_BUCKETS,
            registry=registry,
        )
        self.utilization = Histogram(
            "trimgate_context_utilization_ratio",
            "Estimated prompt tokens of the forwarded body over the budget.",
            _UM,
            buckets=RATIO_BUCKETS,
            registry=registry,
        )
        self.overhead = Histogram(
            "trimgate_overhead_seconds",
            "Time trimgate adds to a request, upstream time excluded.",
            ("upstream",),
            buckets=OVERHEAD_BUCKETS,
            registry=registry,
        )
        self.upstream_duration = Histogram(
            "trimgate_upstream_duration_seconds",
            "Time from sending to the provider to the response headers.",
            ("upstream",),
            buckets=UPSTREAM_BUCKETS,
            registry=registry,
        )
        self.calibration = Gauge(
            "trimgate_estimate_calibration_ratio",
            "Provider-reported prompt tokens per estimated token, learned per model.",
            ("model",),
            registry=registry,
            multiprocess_mode="mostrecent",
        )
        self.event_subscribers = Gauge(
            "trimgate_event_subscribers",
            "Connected event-stream subscribers (SSE and WebSocket).",
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.events_dropped = Counter(
            "trimgate_events_dropped_total",
            "Events a slow subscriber did not receive.",
            registry=registry,
        )
        # The caches are bounded by the label values: configured upstreams, catalog
        # names and "other", and HTTP status codes.
        self._models: dict[tuple[str, str], ModelMetrics] = {}
        self._calibration: dict[str, Any] = {}
        self._requests: dict[tuple[str, str, str, int], Any] = {}
        self._upstream: dict[str, tuple[Any, Any]] = {}

    def for_model(self, upstream: str, model: str) -> ModelMetrics:
        found = self._models.get((upstream, model))
        if found is None:
            found = self._models[(upstream, model)] = ModelMetrics(self, upstream, model)
        return found

    def count_request(self, upstream: str, provider: str, model: str, status: int) -> None:
        key = (upstream, provider, model, status)
        child = self._requests.get(key)
        if child is None:
            child = self._requests[key] = self.requests.labels(
                upstream, provider, model, str(status)
            )
        child.inc()

    def set_calibration(self, model: str, ratio: float) -> None:
        # created on the first observation, not at zero: a ratio of 0 would be a lie
        child = self._calibration.get(model)
        if child is None:
            child = self._calibration[model] = self.calibration.labels(model)
        child.set(ratio)

    def for_upstream(self, upstream: str) -> tuple[Any, Any]:
        """(overhead, upstream duration) histograms of one upstream."""
        found = self._upstream.get(upstream)
        if found is None:
            found = self._upstream[upstream] = (
                self.overhead.labels(upstream),
                self.upstream_duration.labels(upstream),
            )
        return found


class ModelMetrics:
    """The labelled children of one (upstream, model), resolved once.

    Resolving a child (``labels(...)``) costs more than updating it, and doing
    it up front makes every series exist at zero before its first increase,
    so ``rate()`` and ``increase()`` see the first trim too.
    """

    __slots__ = (
        "capped_messages",
        "context_overflows",
        "dropped_messages",
        "dropped_turns",
        "orphans_removed",
        "prompt_tokens",
        "reactive_retries",
        "tokens_dropped",
        "tool_results_capped",
        "trim_exhausted",
        "trims",
        "utilization",
    )

    def __init__(self, m: Metrics, upstream: str, model: str) -> None:
        um = (upstream, model)
        self.prompt_tokens = m.prompt_tokens.labels(*um)
        self.utilization = m.utilization.labels(*um)
        self.context_overflows = m.context_overflows.labels(*um)
        self.reactive_retries = m.reactive_retries.labels(*um)
        self.trim_exhausted = {r: m.trim_exhausted.labels(*um, r) for r in UNRESOLVED}
        self.capped_messages = m.capped_messages.labels(*um)
        self.orphans_removed = m.orphans_removed.labels(*um)
        self.tool_results_capped = m.tool_results_capped.labels(*um)
        reasons = ("preemptive", "reactive")
        self.trims = {r: m.trims.labels(*um, r) for r in reasons}
        self.dropped_turns = {r: m.dropped_turns.labels(*um, r) for r in reasons}
        self.dropped_messages = {r: m.dropped_messages.labels(*um, r) for r in reasons}
        self.tokens_dropped = {r: m.tokens_dropped.labels(*um, r) for r in reasons}
