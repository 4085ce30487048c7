"""OpenTelemetry end to end: the real OTLP/HTTP exporters send to a receiver on loopback.

The receiver decodes the protobuf bodies (opentelemetry-proto's export requests) and the
tests check names, units, attributes and trace ids as a collector would see them. The
stacks are closed before the checks: what trimgate exports at shutdown is what is read.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import Metric
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tests.fakes import FakeProvider, json_reply, openai_ok, sse_data, sse_reply
from tests.proxy.bodies import anthropic_messages, openai_chat
from tests.proxy.conftest import stacks
from trimgate import cli
from trimgate.config import parse_config, redacted
from trimgate.errors import ConfigError
from trimgate.proxy import otel

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
SECRET = "sk-do-not-export-0123456789"
CONTENT = "the-private-words-of-a-user"


@dataclass
class Receiver:
    spans: list[Span] = field(default_factory=list)
    metrics: list[Metric] = field(default_factory=list)
    raw: list[bytes] = field(default_factory=list)
    content_types: set[str] = field(default_factory=set)
    url: str = ""

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/traces", self._traces)
        app.router.add_post("/v1/metrics", self._metrics)
        return app

    async def _traces(self, request: web.Request) -> web.Response:
        body = await self._read(request)
        export = ExportTraceServiceRequest.FromString(body)
        for resource in export.resource_spans:
            for scope in resource.scope_spans:
                self.spans.extend(scope.spans)
        answer = ExportTraceServiceResponse().SerializeToString()
        return web.Response(body=answer, content_type="application/x-protobuf")

    async def _metrics(self, request: web.Request) -> web.Response:
        body = await self._read(request)
        export = ExportMetricsServiceRequest.FromString(body)
        for resource in export.resource_metrics:
            names = {a.key: value(a.value) for a in resource.resource.attributes}
            assert names["service.name"] == "trimgate-test"
            for scope in resource.scope_metrics:
                self.metrics.extend(scope.metrics)
        answer = ExportMetricsServiceResponse().SerializeToString()
        return web.Response(body=answer, content_type="application/x-protobuf")

    async def _read(self, request: web.Request) -> bytes:
        self.content_types.add(request.content_type)
        body = await request.read()
        self.raw.append(body)
        return body

    def metric(self, name: str) -> Metric:
        found = [m for m in self.metrics if m.name == name]
        assert found, f"no {name} in {[m.name for m in self.metrics]}"
        return found[-1]  # cumulative: the last export holds it all


def value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


def attrs(pairs: Any) -> dict[str, Any]:
    return {kv.key: value(kv.value) for kv in pairs if isinstance(kv, KeyValue)}


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    rec = Receiver()
    server = TestServer(rec.app(), host="127.0.0.1")
    await server.start_server()
    rec.url = str(server.make_url("")).rstrip("/")
    try:
        yield rec
    finally:
        await server.close()


def otel_section(rec: Receiver, **extra: Any) -> dict[str, Any]:
    return {
        "endpoint": rec.url,
        "service_name": "trimgate-test",
        "headers": {"x-collector-key": "k"},
        **extra,
    }


async def test_a_client_traceparent_is_continued_and_usage_is_measured(
    receiver: Receiver,
) -> None:
    fake = FakeProvider(lambda r: json_reply(openai_ok(1234)))
    async with stacks("trimgate", "trimgate") as make:
        stack = await make(fake, otel=otel_section(receiver))
        body = openai_chat(1, size=20, model="gpt-4o")
        body["messages"][-1]["content"] = CONTENT
        headers = {"traceparent": TRACEPARENT, "Authorization": f"Bearer {SECRET}"}
        async with stack.client.post("/v1/chat/completions", json=body, headers=headers) as r:
            assert r.status == 200
            await r.read()
        # no traceparent, start_traces off: metrics only
        async with stack.client.post("/v1/chat/completions", json=body) as r:
            assert r.status == 200
            await r.read()
    assert fake.requests[0].headers["traceparent"] == TRACEPARENT  # forwarded as it came
    # the stacks closed: trimgate flushed its spans and metrics on shutdown
    assert receiver.content_types == {"application/x-protobuf"}
    assert len(receiver.spans) == 1
    span = receiver.spans[0]
    assert span.trace_id.hex() == TRACE_ID
    assert span.parent_span_id.hex() == PARENT_ID
    assert span.name == "chat gpt-4o"
    assert span.kind == Span.SPAN_KIND_CLIENT
    assert span.end_time_unix_nano > span.start_time_unix_nano
    a = attrs(span.attributes)
    assert a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.system"] == a["gen_ai.provider.name"] == "openai"
    assert a["gen_ai.request.model"] == "gpt-4o"
    assert a["gen_ai.usage.input_tokens"] == 1234
    assert a["gen_ai.usage.output_tokens"] == 1
    assert a["trimgate.trimmed"] is False
    assert a["trimgate.dropped_turns"] == 0
    assert a["trimgate.tokens_before"] == a["trimgate.tokens_after"] > 0
    assert "trimgate.reason" not in a
    assert a["server.address"] == "127.0.0.1"
    assert a["http.response.status_code"] == 200

    usage = receiver.metric("gen_ai.client.token.usage")
    assert usage.unit == "{token}"
    points = {attrs(p.attributes)["gen_ai.token.type"]: p for p in usage.histogram.data_points}
    assert set(points) == {"input", "output"}
    assert (points["input"].count, points["input"].sum) == (2, 2468)
    assert (points["output"].count, points["output"].sum) == (2, 2)
    labels = attrs(points["input"].attributes)
    assert labels["gen_ai.operation.name"] == "chat"
    assert labels["gen_ai.provider.name"] == labels["gen_ai.system"] == "openai"
    assert labels["gen_ai.request.model"] == "gpt-4o"  # the catalog's entry
    assert list(points["input"].explicit_bounds)[:3] == [1, 4, 16]
    duration = receiver.metric("gen_ai.client.operation.duration")
    assert duration.unit == "s"
    (point,) = duration.histogram.data_points
    assert point.count == 2 and point.sum > 0
    assert list(point.explicit_bounds)[:2] == [0.01, 0.02]

    everything = b"".join(receiver.raw)
    assert SECRET.encode() not in everything and CONTENT.encode() not in everything


async def test_a_trimmed_stream_gets_a_new_trace_when_asked(receiver: Receiver) -> None:
    frames = sse_data(
        {
            "type": "message_start",
            "message": {"usage": {"input_tokens": 250, "output_tokens": 1}},
        },
        event="message_start",
    )
    frames += sse_data({"type": "content_block_delta"}, event="content_block_delta")
    frames += sse_data(
        {"type": "message_delta", "usage": {"output_tokens": 42}}, event="message_delta"
    )
    fake = FakeProvider(lambda r: sse_reply(frames))
    async with stacks("trimgate", "trimgate") as make:
        stack = await make(fake, otel=otel_section(receiver, start_traces=True))
        body = anthropic_messages(8, model="small-1", stream=True)
        async with stack.client.post("/v1/messages", json=body) as r:
            assert r.status == 200
            assert r.headers["x-trimgate-trimmed"] == "true"
            await r.read()
    (span,) = receiver.spans
    assert span.parent_span_id == b""  # a root: its own trace
    assert len(span.trace_id) == 16 and span.trace_id != bytes(16)
    assert span.name == "chat small-1"
    a = attrs(span.attributes)
    assert a["gen_ai.system"] == "anthropic"
    assert a["gen_ai.usage.input_tokens"] == 250
    assert a["gen_ai.usage.output_tokens"] == 42  # message_delta's, not message_start's
    assert a["trimgate.trimmed"] is True
    assert a["trimgate.reason"] == "preemptive"
    assert a["trimgate.dropped_turns"] > 0
    assert a["trimgate.tokens_after"] < a["trimgate.tokens_before"]
    usage = receiver.metric("gen_ai.client.token.usage")
    labels = {attrs(p.attributes)["gen_ai.token.type"]: p.sum for p in usage.histogram.data_points}
    assert labels == {"input": 250, "output": 42}


async def test_an_error_answer_is_a_failed_span_without_usage(receiver: Receiver) -> None:
    fake = FakeProvider(lambda r: json_reply({"error": {"message": "slow down"}}, status=429))
    async with stacks("trimgate", "trimgate") as make:
        stack = await make(fake, otel=otel_section(receiver))
        body = openai_chat(1, size=20, model="gpt-4o")
        headers = {"traceparent": TRACEPARENT}
        async with stack.client.post("/v1/chat/completions", json=body, headers=headers) as r:
            assert r.status == 429
            await r.read()
    (span,) = receiver.spans
    assert span.status.code == span.status.STATUS_CODE_ERROR
    a = attrs(span.attributes)
    assert a["error.type"] == "429"
    assert "gen_ai.usage.input_tokens" not in a
    assert not [m for m in receiver.metrics if m.name == "gen_ai.client.token.usage"]
    (point,) = receiver.metric("gen_ai.client.operation.duration").histogram.data_points
    assert attrs(point.attributes)["error.type"] == "429"


async def test_an_unsampled_or_broken_traceparent_makes_no_span(receiver: Receiver) -> None:
    async with stacks("trimgate", "trimgate") as make:
        stack = await make(FakeProvider(), otel=otel_section(receiver))
        body = openai_chat(1, size=20, model="no-such-model-" + "x" * 300)
        for traceparent in (f"00-{TRACE_ID}-{PARENT_ID}-00", "00-zz-yy-01", ""):
            headers = {"traceparent": traceparent}
            async with stack.client.post("/v1/chat/completions", json=body, headers=headers) as r:
                assert r.status == 200
                await r.read()
    assert receiver.spans == []
    (point,) = receiver.metric("gen_ai.client.operation.duration").histogram.data_points
    assert point.count == 3
    assert attrs(point.attributes)["gen_ai.request.model"] == "other"  # bounded


async def test_a_collector_that_is_down_breaks_nothing() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    async with stacks("trimgate", "trimgate") as make:
        stack = await make(
            FakeProvider(),
            otel={"endpoint": f"http://127.0.0.1:{port}", "start_traces": True},
        )
        body = openai_chat(1, size=20, model="gpt-4o")
        async with stack.client.post("/v1/chat/completions", json=body) as r:
            assert r.status == 200
            assert (await r.json())["usage"]["prompt_tokens"] == 10
        closing = time.perf_counter()
    # the exports gave up within their timeout, side by side
    assert time.perf_counter() - closing < 2 * otel.EXPORT_TIMEOUT + 2


def test_the_otel_section_is_validated() -> None:
    assert parse_config({}).otel.endpoint is None  # off by default
    config = parse_config({"otel": {"endpoint": "http://127.0.0.1:4318/", "headers": {"a": "b"}}})
    assert config.otel.endpoint == "http://127.0.0.1:4318"
    assert redacted(config)["otel"]["headers"] == {"a": "<redacted>"}
    cases = {
        "collector:4318": "otel.endpoint: not a URL",
        "http://u:p@collector:4318": "otel.endpoint: must not carry credentials",
        "http://collector:4318?x=1": "otel.endpoint: must not carry a query",
    }
    for endpoint, problem in cases.items():
        with pytest.raises(ConfigError) as err:
            parse_config({"otel": {"endpoint": endpoint}})
        assert err.value.problems[0].startswith(problem), err.value.problems
    with pytest.raises(ConfigError) as err:
        parse_config({"otel": {"endpont": "http://x"}})
    assert err.value.problems == ["otel.endpont: unknown key"]
    with pytest.raises(ConfigError):
        parse_config({"otel": {"metrics_interval": 0}})


def test_configured_but_not_installed_is_one_line_at_start_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(otel, "installed", lambda: False)
    path = tmp_path / "trimgate.yaml"
    path.write_text("otel:\n  endpoint: http://127.0.0.1:4318\n", encoding="utf-8")
    assert cli.main(["serve", "--config", str(path), "--port", "0"]) == 2
    assert capsys.readouterr().err.strip() == otel.MISSING


def test_trimgate_runs_without_the_extra() -> None:
    code = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "from trimgate.config import Config\n"
        "from trimgate.proxy import otel\n"
        "from trimgate.proxy.app import create_app\n"
        "create_app(Config())\n"
        "assert not otel.installed()\n"
        "assert not [m for m in sys.modules if m.startswith('opentelemetry.')]\n"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
