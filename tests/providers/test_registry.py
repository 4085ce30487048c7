"""The codec table is the one list of formats and providers: routing, the error answers,
the config and the CLI read it, and a codec added to it is routed with no other change."""

from __future__ import annotations

import ast
import re
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trimgate import cli
from trimgate.config import Config, UpstreamConfig, parse_config
from trimgate.errors import ConfigError
from trimgate.providers import anthropic, base, gemini, openai_chat, openai_responses
from trimgate.providers.base import ChatRoute, Codec, Decoded, DecodeOptions, StreamUsage, Usage
from trimgate.providers.overflow import Overflow, Patterns
from trimgate.providers.registry import CODECS, FORMATS, PROVIDERS, REGISTRY, Registry, error_body
from trimgate.proxy.answers import error_response
from trimgate.proxy.routing import NoUpstream, Router
from trimgate.trimming.pipeline import TrimPlan

# Checked by mypy: each codec module's CODEC has every member of the protocol.
_TYPED: tuple[Codec, ...] = (
    openai_chat.CODEC,
    openai_responses.CODEC,
    anthropic.CODEC,
    gemini.CODEC,
)


def _protocol_members() -> set[str]:
    """The members ``Codec`` declares, read from its source (compiled, the class is no
    longer a ``Protocol`` that ``isinstance`` could check)."""
    tree = ast.parse(Path(base.__file__).with_name("base.py").read_text(encoding="utf-8"))
    (codec,) = (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Codec")
    members = {n.name for n in codec.body if isinstance(n, ast.FunctionDef)}
    members |= {
        n.target.id
        for n in codec.body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
    }
    return members


def _satisfies_protocol(codec: object) -> bool:
    return all(hasattr(codec, name) for name in _protocol_members())


def test_the_registry_lists_each_codec_module_once_under_its_own_name() -> None:
    assert tuple(CODECS.values()) == _TYPED
    assert FORMATS == tuple(CODECS) == ("openai", "openai-responses", "anthropic", "gemini")
    assert all(name == codec.wire_format for name, codec in CODECS.items())
    assert PROVIDERS == ("openai", "anthropic", "gemini")


@pytest.mark.parametrize("codec", list(CODECS.values()), ids=list(CODECS))
def test_every_codec_satisfies_the_protocol(codec: Codec) -> None:
    assert _satisfies_protocol(codec)
    assert codec.provider in PROVIDERS
    assert codec.wire_format in FORMATS
    assert codec.default_base_url.startswith("https://")
    assert codec.chat_routes and all(isinstance(r, ChatRoute) for r in codec.chat_routes)
    assert codec.provider_paths is None or isinstance(codec.provider_paths, re.Pattern)
    assert codec.stream_usage_markers
    assert all(len(m) > 0 for m in codec.stream_usage_markers)
    body = codec.error_body(400, "bad", "req-1")
    assert "error" in body
    assert codec.guess({}) == 0  # an empty body has no format's shape
    # its own default path is one of its chat endpoints, and routes back to it
    path = codec.default_path.format(model="m-1")
    assert REGISTRY.chat_format("POST", path) == (codec.wire_format, False)


# --------------------------------------------------------------------------- one list


def test_the_config_accepts_exactly_the_registry_providers() -> None:
    field_type = UpstreamConfig.model_fields["provider"].annotation
    assert typing.get_args(field_type) == PROVIDERS
    defaults = Config().upstreams
    assert tuple(defaults) == PROVIDERS
    assert {name: up.provider for name, up in defaults.items()} == {p: p for p in PROVIDERS}
    assert {up.provider: up.base_url for up in defaults.values()} == REGISTRY.base_urls()
    with pytest.raises(ConfigError) as caught:
        parse_config({"upstreams": {"x": {"provider": "azure", "base_url": "https://a.b"}}})
    assert caught.value.problems == [
        "upstreams.x.provider: Input should be 'openai', 'anthropic' or 'gemini'"
    ]


def test_the_cli_offers_exactly_the_registry_formats(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["trim", "--format", "bogus", "-"])
    err = capsys.readouterr().err
    assert "invalid choice: 'bogus'" in err
    offered = re.search(r"\(choose from ([^)]*)\)", err)
    assert offered is not None
    assert tuple(c.strip(" '") for c in offered.group(1).split(",")) == FORMATS


def test_routing_sends_every_chat_route_to_its_codec() -> None:
    router = Router(Config())
    for codec in CODECS.values():
        for route in codec.chat_routes:
            path = route.path if isinstance(route.path, str) else codec.default_path
            if not isinstance(route.path, str) and route.count_tokens:
                path = "/v1beta/models/m-1:countTokens"
            found = router.route(route.method, path.format(model="m-1"))
            assert found.wire_format == codec.wire_format
            assert found.count_tokens == route.count_tokens
            assert found.upstream.provider == codec.provider


# Today's table: path -> (provider whose default upstream serves it, wire format of a
# POST to it, count_tokens).
PATHS = [
    ("/v1/chat/completions", "openai", "openai", False),
    ("/chat/completions", "openai", "openai", False),
    ("/v1/responses", "openai", "openai-responses", False),
    ("/responses", "openai", "openai-responses", False),
    ("/v1/messages", "anthropic", "anthropic", False),
    ("/v1/messages/count_tokens", "anthropic", "anthropic", True),
    ("/v1/messages/batches", "anthropic", None, False),
    ("/v1/messagesx", "openai", None, False),
    ("/v1beta/models/gemini-2.5-pro:generateContent", "gemini", "gemini", False),
    ("/v1beta/models/gemini-2.5-pro:streamGenerateContent", "gemini", "gemini", False),
    ("/v1beta/models/gemini-2.5-pro:countTokens", "gemini", "gemini", True),
    ("/v1/models/gemini-2.5-pro:generateContent", "gemini", "gemini", False),
    ("/v1/models/gemini-2.5-pro:countTokens", "gemini", "gemini", True),
    ("/v1alpha2/tunedModels/t-1:generateContent", "gemini", "gemini", False),
    ("/v1beta/models/gemini-2.5-pro:embedContent", "gemini", None, False),
    ("/v1beta/models", "gemini", None, False),
    ("/upload/v1beta/files", "gemini", None, False),
    ("/upload/v1/files", "gemini", None, False),
    ("/v1/models", "openai", None, False),
    ("/v1/embeddings", "openai", None, False),
    ("/v1/chat/completions/", "openai", None, False),
    ("/v1/responses/resp_1", "openai", None, False),
]


@pytest.mark.parametrize(("path", "provider", "wire_format", "count_tokens"), PATHS)
def test_routes_and_providers_of_paths(
    path: str, provider: str, wire_format: str | None, count_tokens: bool
) -> None:
    assert REGISTRY.provider_of(path) == provider
    assert REGISTRY.chat_format("POST", path) == (wire_format, count_tokens)
    assert REGISTRY.chat_format("GET", path) == (None, False)
    route = Router(Config()).route("POST", path)
    assert route.upstream.provider == provider
    assert (route.wire_format, route.count_tokens) == (wire_format, count_tokens)


# --------------------------------------------------------------------------- envelopes

ENVELOPES = {
    ("openai", 400): b'{"error":{"message":"m \\"x\\"","type":"trimgate_error","param":null,'
    b'"code":null}}',
    ("openai", 502): b'{"error":{"message":"m \\"x\\"","type":"trimgate_error","param":null,'
    b'"code":"upstream_unreachable"}}',
    ("openai", 504): b'{"error":{"message":"m \\"x\\"","type":"trimgate_error","param":null,'
    b'"code":"upstream_timeout"}}',
    ("anthropic", 400): b'{"type":"error","error":{"type":"invalid_request_error",'
    b'"message":"m \\"x\\""}}',
    (
        "anthropic",
        404,
    ): b'{"type":"error","error":{"type":"not_found_error","message":"m \\"x\\""}}',
    ("anthropic", 413): b'{"type":"error","error":{"type":"request_too_large",'
    b'"message":"m \\"x\\""}}',
    ("anthropic", 500): b'{"type":"error","error":{"type":"api_error","message":"m \\"x\\""}}',
    ("anthropic", 502): b'{"type":"error","error":{"type":"api_error","message":"m \\"x\\""}}',
    ("anthropic", 504): b'{"type":"error","error":{"type":"timeout_error","message":"m \\"x\\""}}',
    ("gemini", 400): b'{"error":{"code":400,"message":"m \\"x\\"","status":"INVALID_ARGUMENT"}}',
    ("gemini", 404): b'{"error":{"code":404,"message":"m \\"x\\"","status":"NOT_FOUND"}}',
    ("gemini", 413): b'{"error":{"code":413,"message":"m \\"x\\"","status":"INVALID_ARGUMENT"}}',
    ("gemini", 500): b'{"error":{"code":500,"message":"m \\"x\\"","status":"INTERNAL"}}',
    ("gemini", 502): b'{"error":{"code":502,"message":"m \\"x\\"","status":"UNAVAILABLE"}}',
    ("gemini", 504): b'{"error":{"code":504,"message":"m \\"x\\"","status":"DEADLINE_EXCEEDED"}}',
    # a provider the registry does not know answers in the first line's envelope
    ("nobody", 502): b'{"error":{"message":"m \\"x\\"","type":"trimgate_error","param":null,'
    b'"code":"upstream_unreachable"}}',
}


@pytest.mark.parametrize(("provider", "status"), list(ENVELOPES))
def test_error_envelopes_are_byte_for_byte_the_providers(provider: str, status: int) -> None:
    expected = ENVELOPES[provider, status]
    assert error_body(provider, status, 'm "x"', "req-1") == expected
    resp = error_response(provider, status, 'm "x"', "req-1")
    assert resp.body == expected and resp.status == status
    assert resp.content_type == "application/json"
    assert resp.headers["x-trimgate-request-id"] == "req-1"
    assert resp.headers["x-trimgate-error"] == "true"


def test_the_responses_format_answers_in_openais_envelope() -> None:
    for status in (400, 413, 502, 504):
        assert CODECS["openai-responses"].error_body(status, "m", "r") == CODECS[
            "openai"
        ].error_body(status, "m", "r")


# --------------------------------------------------------------------------- the guess


def _guess_as_before(body: dict[str, Any]) -> str:
    """The CLI's guess before the codecs held it, restated as the reference."""
    if "contents" in body or "generateContentRequest" in body:
        return "gemini"
    if "input" in body and "messages" not in body:
        return "openai-responses"
    messages = body.get("messages")
    if "system" in body or (
        isinstance(body.get("max_tokens"), int)
        and "anthropic" in str(body.get("model", "")).lower()
    ):
        return "anthropic"
    if isinstance(messages, list):
        for m in messages:
            if isinstance(m, dict) and isinstance(m.get("content"), list):
                for part in m["content"]:
                    if isinstance(part, dict) and part.get("type") in (
                        "tool_use",
                        "tool_result",
                        "thinking",
                    ):
                        return "anthropic"
    return "openai"


_parts = st.lists(
    st.fixed_dictionaries(
        {"type": st.sampled_from(["text", "tool_use", "tool_result", "thinking", "image"])}
    ),
    max_size=3,
)
_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant"])},
    optional={"content": st.one_of(st.text(max_size=5), _parts)},
)
_bodies = st.fixed_dictionaries(
    {},
    optional={
        "contents": st.just([]),
        "generateContentRequest": st.just({}),
        "input": st.one_of(st.just("hi"), st.just([])),
        "messages": st.one_of(st.lists(_message, max_size=3), st.just("x")),
        "system": st.just("s"),
        "max_tokens": st.one_of(st.integers(1, 9), st.just("9")),
        "model": st.sampled_from(["gpt-4o", "anthropic.claude-3", "claude-sonnet-4-5", 7]),
    },
)


@given(_bodies)
def test_the_guess_is_the_one_the_cli_made(body: dict[str, Any]) -> None:
    assert REGISTRY.guess_format(body) == _guess_as_before(body)


# --------------------------------------------------------------------------- one line


@dataclass
class FakeCodec:
    """A codec for a provider trimgate does not know, with a route of each kind. (Not a
    ``CodecBase``: compiled, that class takes no interpreted subclasses.)"""

    wire_format: str = "fake"
    provider: str = "fakeco"
    default_base_url: str = "https://api.fake.invalid"
    chat_routes: tuple[ChatRoute, ...] = (
        ChatRoute("/v2/talk"),
        ChatRoute("/v2/talk/count", count_tokens=True),
        ChatRoute(re.compile(r"^/v2/agents/[^/]+/talk$")),
    )
    provider_paths: re.Pattern[str] | None = re.compile(r"/v2/")
    default_path: str = "/v2/talk"
    stream_usage_markers: tuple[bytes, ...] = (b'"tokens_in"',)

    def error_body(self, status: int, message: str, request_id: str) -> dict[str, Any]:
        return {"fault": {"status": status, "text": message}}

    def guess(self, body: dict[str, Any]) -> int:
        return 9 if "utterances" in body else 0

    def decode(self, body: Any, *, path: str, options: DecodeOptions) -> Decoded:
        raise NotImplementedError

    def decode_raw(
        self, raw: bytes, *, path: str, options: DecodeOptions, tool_texts: bool
    ) -> Decoded | None:
        return None

    def detect_overflow(self, status: int, body: bytes, patterns: Patterns = ()) -> Overflow | None:
        return None

    def detect_stream_overflow(self, head: bytes, patterns: Patterns = ()) -> Overflow | None:
        return None

    def detect_stream_event_overflow(
        self, event: bytes, *, output_started: bool, patterns: Patterns = ()
    ) -> Overflow | None:
        return None

    def detect_bare_stream_overflow(self, data: bytes, patterns: Patterns = ()) -> Overflow | None:
        return None

    def encode(self, decoded: Decoded, plan: TrimPlan, *, breadcrumb: str) -> dict[str, Any]:
        raise NotImplementedError

    def usage(self, body: Any) -> int | None:
        return None

    def stream_usage(self, data: str) -> int | None:
        return None

    def prompt_usage(self, body: Any) -> Usage | None:
        return None

    def stream_prompt_usage(self, data: str) -> Usage | None:
        return None

    def output_usage(self, body: Any) -> int | None:
        return None

    def stream_usages(self, data: str) -> StreamUsage:
        return None, None


def test_one_registry_line_routes_a_new_codec() -> None:
    fake = FakeCodec()
    assert _satisfies_protocol(fake)
    assert not _satisfies_protocol(object())
    registry = REGISTRY.with_codec(fake)
    assert registry.formats == (*FORMATS, "fake")
    assert registry.providers == (*PROVIDERS, "fakeco")
    assert registry.codecs["fake"] is fake
    assert registry.chat_format("POST", "/v2/talk") == ("fake", False)
    assert registry.chat_format("POST", "/v2/talk/count") == ("fake", True)
    assert registry.chat_format("POST", "/v2/agents/a1/talk") == ("fake", False)
    assert registry.chat_format("POST", "/v2/agents/a1/talk/x") == (None, False)
    assert registry.provider_of("/v2/files") == "fakeco"
    assert registry.guess_format({"utterances": [], "contents": []}) == "fake"
    assert registry.error_body("fakeco", 502, "m", "r") == b'{"fault":{"status":502,"text":"m"}}'
    assert registry.base_urls()["fakeco"] == "https://api.fake.invalid"
    # the existing lines are untouched
    for path, provider, wire_format, count_tokens in PATHS:
        assert registry.provider_of(path) == provider
        assert registry.chat_format("POST", path) == (wire_format, count_tokens)
    assert REGISTRY.chat_format("POST", "/v2/talk") == (None, False)  # the original is as it was

    # A router reading the copy sends the new endpoint to the new provider's upstream.
    # (The config's provider list is the module registry's, fixed at import: the
    # upstream is built without validation here.)
    fake_up = UpstreamConfig.model_construct(
        provider="fakeco", base_url="https://api.fake.invalid", prefix=None
    )
    config = Config().model_copy(update={"upstreams": {**Config().upstreams, "fake": fake_up}})
    route = Router(config, registry).route("POST", "/v2/agents/a1/talk")
    assert (route.name, route.wire_format, route.count_tokens) == ("fake", "fake", False)
    assert route.url("") == "https://api.fake.invalid/v2/agents/a1/talk"
    with pytest.raises(NoUpstream):
        Router(Config(), registry).route("POST", "/v2/talk")


def test_two_codecs_of_one_format_or_endpoint_are_refused() -> None:
    with pytest.raises(ValueError, match="two codecs"):
        REGISTRY.with_codec(FakeCodec(wire_format="openai"))
    with pytest.raises(ValueError, match="two codecs for POST /v1/messages"):
        REGISTRY.with_codec(FakeCodec(chat_routes=(ChatRoute("/v1/messages"),)))
    with pytest.raises(ValueError, match="no codecs"):
        Registry([])
