"""OpenTelemetry: GenAI metrics and a span per proxied chat request, over OTLP/HTTP.

An optional extra (``pip install 'trimgate[otel]'``), off unless ``otel.endpoint`` is
set. This is the only module that imports opentelemetry, and only inside ``OTel``: trimgate
imports and runs without the packages.

What it emits follows OpenTelemetry's semantic conventions for generative AI clients
(trimgate is the client of the provider, as the AI gateways that follow them are):
- ``gen_ai.client.token.usage`` (histogram, ``{token}``), ``gen_ai.token.type`` input /
  output, from the provider's own usage in the answer;
- ``gen_ai.client.operation.duration`` (histogram, ``s``): the request in trimgate, from
  its arrival to the answer's last byte relayed;
- a span of kind CLIENT named ``chat {model}`` that continues the client's W3C
  ``traceparent``; without one, no span unless ``otel.start_traces`` is on.

Metric attributes are bounded (the model is its catalog label or ``other``); spans and
metrics carry counts, ids and labels, never a message's content nor a credential.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from trimgate.config import Config
from trimgate.errors import ConfigError
from trimgate.proxy.signals import MAX_ATTRIBUTION_LEN, Outcome

if TYPE_CHECKING:
    from trimgate.proxy.usage import UsageSniffer

log = logging.getLogger("trimgate")

MISSING = (
    "otel.endpoint: set, but the OpenTelemetry packages are not installed "
    "(pip install 'trimgate[otel]')"
)
PACKAGES = (
    "opentelemetry.sdk",
    "opentelemetry.exporter.otlp.proto.http",
)
# The conventions' advised bucket boundaries
TOKEN_BUCKETS = tuple(float(4**n) for n in range(14))  # 1, 4, 16, ... 67108864
DURATION_BUCKETS = tuple(0.01 * 2**n for n in range(14))  # 0.01, 0.02, ... 81.92
# One export's time, retries included: bounds how long a shutdown waits on a collector down
EXPORT_TIMEOUT = 5.0
# Wire provider -> the conventions' gen_ai.provider.name (and older gen_ai.system)
SYSTEMS = {"openai": "openai", "anthropic": "anthropic", "gemini": "gcp.gemini"}


def installed() -> bool:
    try:
        return all(importlib.util.find_spec(name) is not None for name in PACKAGES)
    except ModuleNotFoundError:  # a parent package is missing
        return False


def require(config: Config) -> None:
    """Refuse to start when ``otel.endpoint`` is set but the extra is not installed."""
    if config.otel.endpoint is not None and not installed():
        raise ConfigError([MISSING])


def start(config: Config) -> OTel | None:
    """The exporters of ``config.otel``, running; None when OpenTelemetry is off."""
    if config.otel.endpoint is None:
        return None
    require(config)
    return OTel(config)


class OTel:
    """The providers, instruments and propagator; ``chat`` records one request."""

    def __init__(self, config: Config) -> None:
        from opentelemetry.context import Context
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.trace import SpanKind, Status, StatusCode, get_current_span
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        import trimgate  # the version, for the resource and the instruments

        settings = config.otel
        endpoint, headers = settings.endpoint or "", dict(settings.headers)
        self.start_traces = settings.start_traces
        resource = Resource.create(  # each worker process: its own cumulative metrics
            {
                "service.name": settings.service_name,
                "service.version": trimgate.__version__,
                "service.instance.id": uuid.uuid4().hex,
            }
        )
        self._tracer_provider = TracerProvider(resource=resource)  # sampler: parent-based
        self._tracer_provider.add_span_processor(
            BatchSpanProcessor(
                OTLPSpanExporter(
                    endpoint=f"{endpoint}/v1/traces", headers=headers, timeout=EXPORT_TIMEOUT
                )
            )
        )
        self._tracer = self._tracer_provider.get_tracer("trimgate", trimgate.__version__)
        reader = PeriodicExportingMetricReader(
            OTLPMetricExporter(
                endpoint=f"{endpoint}/v1/metrics", headers=headers, timeout=EXPORT_TIMEOUT
            ),
            export_interval_millis=settings.metrics_interval * 1000,
        )
        self._meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
        meter = self._meter_provider.get_meter("trimgate", trimgate.__version__)
        self._tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
        )
        self._duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self._propagator = TraceContextTextMapPropagator()
        self._root = Context
        self._current_span = get_current_span
        self._kind = SpanKind.CLIENT
        self._error = Status(StatusCode.ERROR)
        # server.address / server.port of each upstream: bounded by the config
        self._servers = _servers(config)

    def chat(
        self,
        o: Outcome,
        headers: Mapping[str, str],
        started: float,
        status: int,
        sniffer: UsageSniffer | None,
    ) -> None:
        """Record one relayed chat request; ``started``: its ``time.perf_counter()``."""
        try:
            self._chat(o, headers, started, status, sniffer)
        except Exception as exc:  # telemetry must never break a request
            log.exception(
                "recording OpenTelemetry signals failed",
                extra={
                    "event": "otel_error",
                    "request_id": o.request_id,
                    "error_type": type(exc).__name__,
                },
            )

    def _chat(
        self,
        o: Outcome,
        headers: Mapping[str, str],
        started: float,
        status: int,
        sniffer: UsageSniffer | None,
    ) -> None:
        elapsed = max(0.0, time.perf_counter() - started)
        end_ns = time.time_ns()
        system = SYSTEMS.get(o.provider, o.provider)
        usage = sniffer.usage if sniffer is not None else None
        output = sniffer.output_tokens if sniffer is not None else None
        base: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": system,
            "gen_ai.system": system,
            **self._servers.get(o.upstream, {}),
        }
        labels = {**base, "gen_ai.request.model": o.model_label}  # bounded
        error = str(status) if status >= 400 else None
        if error is None:
            if usage is not None:
                self._tokens.record(usage[0], {**labels, "gen_ai.token.type": "input"})
            if output is not None:
                self._tokens.record(output, {**labels, "gen_ai.token.type": "output"})
            self._duration.record(elapsed, labels)
        else:
            self._duration.record(elapsed, {**labels, "error.type": error})
        context = self._context(headers)
        if context is None:
            return
        model = (o.model or "")[:MAX_ATTRIBUTION_LEN]
        attributes = _span_attributes(o, base, model, status, usage, output, error)
        span = self._tracer.start_span(
            f"chat {model}" if model else "chat",
            context=context,
            kind=self._kind,
            attributes=attributes,
            start_time=end_ns - int(elapsed * 1e9),
        )
        if error is not None:
            span.set_status(self._error)
        span.end(end_time=end_ns)

    def _context(self, headers: Mapping[str, str]) -> Any:
        """The client's trace context; a new root when asked for; None: no span."""
        traceparent = headers.get("traceparent")
        if traceparent:
            carrier = {"traceparent": traceparent}
            state = headers.get("tracestate")
            if state:
                carrier["tracestate"] = state
            context = self._propagator.extract(carrier)
            if self._current_span(context).get_span_context().is_valid:
                return context
        return self._root() if self.start_traces else None

    def shutdown(self) -> None:
        """Export what is pending (the spans, and a last collection of the metrics, side
        by side); blocks, about ``EXPORT_TIMEOUT`` at most when the collector is down."""
        spans = threading.Thread(target=self._tracer_provider.shutdown, name="otel-shutdown")
        spans.start()
        self._meter_provider.shutdown()
        spans.join()


def _span_attributes(
    o: Outcome,
    base: dict[str, Any],
    model: str,
    status: int,
    usage: tuple[int, int] | None,
    output: int | None,
    error: str | None,
) -> dict[str, Any]:
    """A chat span's attributes: the GenAI conventions' and trimgate's own (no content)."""
    r = o.report
    attributes: dict[str, Any] = {
        **base,
        "gen_ai.request.model": model,
        "http.response.status_code": status,
        "trimgate.request_id": o.request_id,
        "trimgate.upstream": o.upstream,
        "trimgate.trimmed": r.trimmed,
        "trimgate.dropped_turns": r.dropped_turns,
        "trimgate.tokens_before": r.tokens_before,
        "trimgate.tokens_after": r.tokens_after,
        "trimgate.retries": o.retries,
    }
    if r.trimmed and o.reason:
        attributes["trimgate.reason"] = o.reason
    if o.shadow:
        attributes["trimgate.shadow"] = True
    if usage is not None:
        attributes["gen_ai.usage.input_tokens"] = usage[0]
    if output is not None:
        attributes["gen_ai.usage.output_tokens"] = output
    if error is not None:
        attributes["error.type"] = error
    return attributes


def _servers(config: Config) -> dict[str, dict[str, Any]]:
    """``server.address`` / ``server.port`` of each configured upstream."""
    servers: dict[str, dict[str, Any]] = {}
    for name, up in config.upstreams.items():
        parts = urlsplit(up.base_url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        servers[name] = {"server.address": parts.hostname or "", "server.port": port}
    return servers
