"""Every Prometheus collector (docs/reference.md, "Metrics"), in one place, on an injected registry.

Label values are bounded: ``upstream`` is a configured name, ``provider`` one
of three, ``model`` a catalog entry's name or ``other`` (on
``trimgate_learned_window_tokens``: one of the first 32 learned model names, or
``other``), ``status`` an HTTP status code, ``reason`` preemptive or reactive (or, on
``trimgate_trim_exhausted_total``, one of ``UNRESOLVED``), ``result`` one of ``PROBES``. With
``metrics.attribution`` on, the counters named in ``BY_TEAM`` carry one more label,
``team`` (bounded by the resolver in ``trimgate.attribution``); with it off they are
exactly as without it.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from trimgate.config import Config

TOKEN_BUCKETS = (
    1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 64_000, 128_000, 200_000, 400_000,
    1_000_000, 2_000_000,
)  # fmt: skip
RATIO_BUCKETS = (0.1, 0.25, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 1.0, 1.1, 1.5)
OVERHEAD_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
)  # fmt: skip
UPSTREAM_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)

# The counters that carry the ``team`` label when attribution is on: to add the label
# to a counter, add its name here (its children get the team in ``Metrics.child``).
BY_TEAM = frozenset(
    {
        "trimgate_requests_total",
        "trimgate_trims_total",
        "trimgate_dropped_turns_total",
        "trimgate_tokens_dropped_total",
        "trimgate_context_overflows_total",
        "trimgate_trim_exhausted_total",
        "trimgate_prompt_tokens_total",
        "trimgate_prompt_cache_read_tokens_total",
        "trimgate_trimmed_prompt_tokens_total",
        "trimgate_trimmed_prompt_cache_read_tokens_total",
    }
)
TEAM = "team"

_TRIM = ("upstream", "model", "reason")
# Why an overflow went back to the client (``trimgate_trim_exhausted_total{reason}``):
# one turn was left, the retries ran out with more left, or the error states an output
# reservation that alone fills the window.
UNRESOLVED = ("one-turn", "retries-spent", "output-reservation")
# How a probe of an error that only suspected an overflow went
# (``trimgate_overflow_probes_total{result}``): the trimmed resend went through, the
# error came back with its count moved down with the trim, or it proved no overflow.
PROBES = ("fixed", "confirmed", "refuted")
_UM = ("upstream", "model")


class Metrics:
    def __init__(self, registry: CollectorRegistry, *, teams: bool = False) -> None:
        self.teams = teams  # the BY_TEAM counters carry the ``team`` label
        self._by_team: set[int] = set()  # ids of the collectors that carry it
        self._registry = registry  # the one every collector is declared on
        # registration order is the /metrics order: keep the families in this order
        self._declare_trim_counters()
        self._declare_usage_counters()
        self._declare_histograms()
        self._declare_gauges()
        # The caches are bounded by the label values: configured upstreams, catalog
        # names and "other", HTTP status codes, and teams (bounded by their resolver).
        self._models: dict[tuple[str, str, str | None], ModelMetrics] = {}
        self._calibration: dict[str, Any] = {}
        self._requests: dict[tuple[str, str, str, int, str | None], Any] = {}
        self._upstream: dict[str, tuple[Any, Any]] = {}

    def _counter(self, name: str, doc: str, labels: tuple[str, ...]) -> Counter:
        """A counter, with the ``team`` label when attribution is on and it is BY_TEAM."""
        if self.teams and name in BY_TEAM:
            made = Counter(name, doc, (*labels, TEAM), registry=self._registry)
            self._by_team.add(id(made))
            return made
        return Counter(name, doc, labels, registry=self._registry)

    def _histogram(
        self, name: str, doc: str, labels: tuple[str, ...], buckets: tuple[float, ...]
    ) -> Histogram:
        return Histogram(name, doc, labels, buckets=buckets, registry=self._registry)

    def _declare_trim_counters(self) -> None:
        """Requests, and what trimming and the overflow retry did to them."""
        counter = self._counter
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
        self.probes = counter(
            "trimgate_overflow_probes_total",
            "Errors that only suspected an overflow, resent trimmed (in one or two steps), by "
            "result (fixed, confirmed, refuted).",
            (*_UM, "result"),
        )

    def _declare_usage_counters(self) -> None:
        """The provider's own usage.

        The trimmed pair counts answers to trimmed bodies only (a pair of its own, not a
        label: every series keeps upstream, model).
        """
        counter = self._counter
        self.prompt_tokens_total = counter(
            "trimgate_prompt_tokens_total", "Prompt tokens the provider reported.", _UM
        )
        self.prompt_cache_read = counter(
            "trimgate_prompt_cache_read_tokens_total",
            "Prompt tokens the provider reported read from its prompt cache.",
            _UM,
        )
        self.trimmed_prompt_tokens_total = counter(
            "trimgate_trimmed_prompt_tokens_total",
            "Prompt tokens the provider reported for trimmed bodies.",
            _UM,
        )
        self.trimmed_prompt_cache_read = counter(
            "trimgate_trimmed_prompt_cache_read_tokens_total",
            "Prompt tokens the provider reported read from its prompt cache, trimmed bodies.",
            _UM,
        )

    def _declare_histograms(self) -> None:
        """Sizes of forwarded prompts, and where a request's time goes."""
        histogram = self._histogram
        self.prompt_tokens = histogram(
            "trimgate_prompt_tokens_estimated",
            "Estimated prompt tokens of forwarded chat requests.",
            _UM,
            TOKEN_BUCKETS,
        )
        self.utilization = histogram(
            "trimgate_context_utilization_ratio",
            "Estimated prompt tokens of the forwarded body over the budget.",
            _UM,
            RATIO_BUCKETS,
        )
        self.overhead = histogram(
            "trimgate_overhead_seconds",
            "Time trimgate adds to a request, upstream time excluded.",
            ("upstream",),
            OVERHEAD_BUCKETS,
        )
        self.upstream_duration = histogram(
            "trimgate_upstream_duration_seconds",
            "Time from sending to the provider to the response headers.",
            ("upstream",),
            UPSTREAM_BUCKETS,
        )

    def _declare_gauges(self) -> None:
        """Learned per-model values, and the event stream's subscribers and losses."""
        registry = self._registry
        self.calibration = Gauge(
            "trimgate_estimate_calibration_ratio",
            "Provider-reported prompt tokens per estimated token, learned per model.",
            ("model",),
            registry=registry,
            multiprocess_mode="mostrecent",
        )
        self.learned_window = Gauge(
            "trimgate_learned_window_tokens",
            "Context windows learned from overflows, for models without a known window.",
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

    def child(self, metric: Any, values: tuple[str, ...], team: str | None) -> Any:
        """``metric``'s child for ``values``, and ``team`` where the metric carries it."""
        if id(metric) in self._by_team:
            return metric.labels(*values, team or "unattributed")
        return metric.labels(*values)

    def for_model(self, upstream: str, model: str, team: str | None = None) -> ModelMetrics:
        key = (upstream, model, team)
        found = self._models.get(key)
        if found is None:
            found = self._models[key] = ModelMetrics(self, upstream, model, team)
        return found

    def count_request(
        self, upstream: str, provider: str, model: str, status: int, team: str | None = None
    ) -> None:
        key = (upstream, provider, model, status, team)
        child = self._requests.get(key)
        if child is None:
            values = (upstream, provider, model, str(status))
            child = self._requests[key] = self.child(self.requests, values, team)
        child.inc()

    def set_calibration(self, model: str, ratio: float) -> None:
        # created on the first observation, not at zero: a ratio of 0 would be a lie
        child = self._calibration.get(model)
        if child is None:
            child = self._calibration[model] = self.calibration.labels(model)
        child.set(ratio)

    def set_learned_window(self, model: str, tokens: int) -> None:
        # ``model`` is bounded by proxy/windows.py: a few learned names and "other"
        self.learned_window.labels(model).set(tokens)

    def for_upstream(self, upstream: str) -> tuple[Any, Any]:
        """(overhead, upstream duration) histograms of one upstream."""
        found = self._upstream.get(upstream)
        if found is None:
            found = self._upstream[upstream] = (
                self.overhead.labels(upstream),
                self.upstream_duration.labels(upstream),
            )
        return found


def metrics_for(config: Config, registry: CollectorRegistry) -> Metrics:
    """The collectors ``config`` asks for: the ``team`` label iff attribution is on."""
    return Metrics(registry, teams=config.metrics.attribution is not None)


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
        "probes",
        "prompt_cache_read",
        "prompt_tokens",
        "prompt_tokens_total",
        "reactive_retries",
        "tokens_dropped",
        "tool_results_capped",
        "trim_exhausted",
        "trimmed_prompt_cache_read",
        "trimmed_prompt_tokens_total",
        "trims",
        "utilization",
    )

    def __init__(self, m: Metrics, upstream: str, model: str, team: str | None = None) -> None:
        um = (upstream, model)

        def child(metric: Any, *values: str) -> Any:
            return m.child(metric, values, team)

        self.prompt_tokens = child(m.prompt_tokens, *um)
        self.utilization = child(m.utilization, *um)
        self.context_overflows = child(m.context_overflows, *um)
        self.reactive_retries = child(m.reactive_retries, *um)
        self.trim_exhausted = {r: child(m.trim_exhausted, *um, r) for r in UNRESOLVED}
        self.probes = {r: child(m.probes, *um, r) for r in PROBES}
        self.capped_messages = child(m.capped_messages, *um)
        self.orphans_removed = child(m.orphans_removed, *um)
        self.tool_results_capped = child(m.tool_results_capped, *um)
        self.prompt_tokens_total = child(m.prompt_tokens_total, *um)
        self.prompt_cache_read = child(m.prompt_cache_read, *um)
        self.trimmed_prompt_tokens_total = child(m.trimmed_prompt_tokens_total, *um)
        self.trimmed_prompt_cache_read = child(m.trimmed_prompt_cache_read, *um)
        reasons = ("preemptive", "reactive")
        self.trims = {r: child(m.trims, *um, r) for r in reasons}
        self.dropped_turns = {r: child(m.dropped_turns, *um, r) for r in reasons}
        self.dropped_messages = {r: child(m.dropped_messages, *um, r) for r in reasons}
        self.tokens_dropped = {r: child(m.tokens_dropped, *um, r) for r in reasons}
