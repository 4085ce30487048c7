"""The config file: pydantic models, defaults, loading and redaction.

Every key is described in docs/reference.md, "Config file".

This is the only module that reads environment variables (``TRIMGATE_CONFIG``).
Unknown keys are errors naming their path, so a typo never passes silently.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from trimgate.errors import ConfigError
from trimgate.providers.overflow import Patterns, compile_patterns
from trimgate.providers.registry import REGISTRY
from trimgate.trimming.policy import Settings, breadcrumb_tokens

CONFIG_ENV = "TRIMGATE_CONFIG"
DEFAULT_BREADCRUMB = "[earlier turns omitted to fit the context window]"
REDACTED = "<redacted>"

if TYPE_CHECKING:
    Provider = str
else:  # the registry's providers, checked (and listed in errors) as a Literal
    Provider = Literal[REGISTRY.providers]
Mode = Literal["enforce", "shadow", "off"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ServerConfig(_Strict):
    host: str = "127.0.0.1"
    port: int = Field(default=8788, ge=0, le=65535)
    admin_port: int | None = Field(default=None, ge=0, le=65535)
    admin_token: str | None = None
    max_body_bytes: int = Field(default=64 * 1024 * 1024, gt=0)
    # A compressed chat body may inflate to at most this many times its size (and to at
    # most max_body_bytes): a gzip bomb gets 413 before it is inflated further.
    max_inflation_ratio: int = Field(default=200, ge=1)
    # Request-body bytes all requests in flight may hold at once (per process): past it,
    # a new request gets 503 with Retry-After.
    max_buffered_bytes: int = Field(default=512 * 1024 * 1024, gt=0)
    connect_timeout: float = Field(default=10.0, gt=0)
    # Time allowed between two reads from the provider: generous, because a
    # long generation may think for minutes before its first byte.
    read_timeout: float = Field(default=600.0, gt=0)
    max_connections: int = Field(default=1000, ge=1)
    # On SIGTERM / SIGINT, how long the answers in flight get before they are cut
    shutdown_grace: float = Field(default=60.0, gt=0)
    # trimgate's own HTTP/1.1 client, or aiohttp's ClientSession as a fallback
    upstream_client: Literal["trimgate", "aiohttp"] = "trimgate"
    # trimgate's own HTTP/1.1 front for proxied requests, or aiohttp's server for all
    http_server: Literal["trimgate", "aiohttp"] = "trimgate"
    # Relayed WebSockets: the largest message either side may send, how long a
    # connection may carry no frame before both sides are closed, and how many bytes of
    # a Responses WebSocket's history are kept to rebuild a chain after an overflow
    max_ws_frame_bytes: int = Field(default=64 * 1024 * 1024, gt=0)
    ws_idle_timeout: float = Field(default=3600.0, gt=0)
    max_ws_history_bytes: int = Field(default=16 * 1024 * 1024, ge=0)
    # Bodies of very many JSON objects (and large compressed ones) examined in a worker
    # process, so that their parse does not hold up the other requests
    examine_process: bool = True


class UpstreamConfig(_Strict):
    provider: Provider
    base_url: str
    prefix: str | None = None
    # Regexes (case-insensitive) for this upstream's own "context window exceeded"
    # wordings, matched on error messages only; named groups real / max give the counts.
    overflow_patterns: tuple[str, ...] = ()
    _compiled_patterns: Patterns = PrivateAttr(default=())

    @field_validator("overflow_patterns")
    @classmethod
    def _patterns(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        compile_patterns(value)  # ValueError names the pattern that fails
        return value

    def model_post_init(self, context: Any, /) -> None:
        self._compiled_patterns = compile_patterns(self.overflow_patterns)

    @property
    def compiled_overflow_patterns(self) -> Patterns:
        """``overflow_patterns`` compiled once, for the overflow detectors' ``patterns``."""
        return self._compiled_patterns

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("not a URL")
        if parts.query or parts.fragment:
            raise ValueError("must not carry a query or fragment")
        return value.rstrip("/")

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.startswith("/") or value == "/" or "?" in value:
            raise ValueError("must start with '/' and name a path segment")
        return value.rstrip("/")


class BreadcrumbConfig(_Strict):
    text: str = Field(default=DEFAULT_BREADCRUMB, min_length=1)
    placement: Literal["message", "merge", "none"] = "message"


class HistoryPruningConfig(_Strict):
    enabled: bool = False
    max_tokens: int = Field(default=0, ge=0)


class ReactiveConfig(_Strict):
    enabled: bool = True
    max_retries: int = Field(default=3, ge=0, le=10)
    # an error no reader recognises whose words suspect an overflow: resent, trimmed
    probe: bool = True
    # the probed error's wording (numbers, ids, quotes, addresses blanked) in the
    # overflow_probe log line
    log_wordings: bool = False


class TrimmingConfig(_Strict):
    mode: Mode = "enforce"
    # The window of models neither `models` nor the catalog knows; None: no preemptive
    # token trim for them until an overflow states their window.
    max_context_tokens: int | None = Field(default=None, ge=0)
    history_pruning: HistoryPruningConfig = HistoryPruningConfig()
    reserve_output_tokens: bool = True
    max_history_messages: int = Field(default=0, ge=0)
    max_tool_result_chars: int = Field(default=0, ge=0)
    orphan_sweep: bool = True
    system_messages: Literal["keep", "hoist"] = "keep"
    breadcrumb: BreadcrumbConfig = BreadcrumbConfig()
    media_tokens: int = Field(default=1600, ge=0)
    calibrate: bool = True
    reactive: ReactiveConfig = ReactiveConfig()
    # A request that asks the provider to manage its own context: forwarded without a
    # preemptive trim (defer), or trimmed as any request (trim)
    provider_managed: Literal["defer", "trim"] = "defer"
    # count_tokens / countTokens: count the body as the client sent it, or as trimmed
    count_tokens: Literal["client", "trimmed"] = "client"
    cut_step: float = Field(default=0.2, ge=0, lt=1)
    keep_anchor: bool = True
    anchor_max_share: float = Field(default=0.25, ge=0, le=1)

    def settings(self) -> Settings:
        """These keys as the plain values the trimming core reads."""
        crumb = self.breadcrumb
        return Settings(
            max_context_tokens=self.max_context_tokens,
            pruning_enabled=self.history_pruning.enabled,
            pruning_max_tokens=self.history_pruning.max_tokens,
            reserve_output=self.reserve_output_tokens,
            max_messages=self.max_history_messages,
            max_tool_result_chars=self.max_tool_result_chars,
            orphan_sweep=self.orphan_sweep,
            hoist=self.system_messages == "hoist",
            breadcrumb=crumb.text,
            placement=crumb.placement,
            breadcrumb_tokens=breadcrumb_tokens(crumb.text, crumb.placement),
            media_tokens=self.media_tokens,
            calibrate=self.calibrate,
            reactive=self.reactive.enabled,
            max_retries=self.reactive.max_retries,
            probe=self.reactive.probe,
            log_wordings=self.reactive.log_wordings,
            cut_step=self.cut_step,
            keep_anchor=self.keep_anchor,
            anchor_max_share=self.anchor_max_share,
        )


class TrimmingOverride(_Strict):
    """Per-model overrides: any trimming key except the mode."""

    max_context_tokens: int | None = Field(default=None, ge=0)
    history_pruning: HistoryPruningConfig | None = None
    reserve_output_tokens: bool | None = None
    max_history_messages: int | None = Field(default=None, ge=0)
    max_tool_result_chars: int | None = Field(default=None, ge=0)
    orphan_sweep: bool | None = None
    system_messages: Literal["keep", "hoist"] | None = None
    breadcrumb: BreadcrumbConfig | None = None
    media_tokens: int | None = Field(default=None, ge=0)
    calibrate: bool | None = None
    reactive: ReactiveConfig | None = None
    cut_step: float | None = Field(default=None, ge=0, lt=1)
    keep_anchor: bool | None = None
    anchor_max_share: float | None = Field(default=None, ge=0, le=1)


class ModelEntry(_Strict):
    match: str = Field(min_length=1)
    context_window: int = Field(gt=0)
    name: str | None = None  # the `model` metric label; defaults to `match`
    trimming: TrimmingOverride | None = None


MAX_TEAM_LEN = 64
# Headers that carry a credential: never a team header (its value would be exported)
CREDENTIAL_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "x-api-key", "x-goog-api-key", "api-key", "cookie"}
)
_TOKEN_CHARS = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz")
_HEX = frozenset("0123456789abcdef")


def _team_name(value: str) -> str:
    if not value:
        raise ValueError("must not be empty")
    if len(value) > MAX_TEAM_LEN:
        raise ValueError(f"longer than {MAX_TEAM_LEN} characters")
    return value


class ApiKeyTeam(_Strict):
    """A credential's SHA-256 hex prefix and the team it is metered under."""

    sha256_prefix: str
    team: str

    @field_validator("sha256_prefix", mode="before")
    @classmethod
    def _prefix(cls, value: object) -> str:
        if not isinstance(value, str):
            raise ValueError("must be a quoted string of hex digits")
        value = value.strip().lower()
        if not value or set(value) - _HEX:
            raise ValueError("must be hex digits only (the start of a sha256 hex digest)")
        if len(value) < 8:
            raise ValueError("must be at least 8 hex digits")
        if len(value) > 64:
            raise ValueError("longer than a sha256 hex digest (64 digits)")
        return value

    @field_validator("team")
    @classmethod
    def _team(cls, value: str) -> str:
        return _team_name(value)


Source = Literal["header", "api_key"]


def _default_sources() -> list[Source]:
    return ["header", "api_key"]


class AttributionConfig(_Strict):
    """``metrics.attribution``: the bounded ``team`` label, from a header or a key hash."""

    from_: list[Source] = Field(default_factory=_default_sources, alias="from", min_length=1)
    header: str = "x-trimgate-agent"
    api_keys: list[ApiKeyTeam] = Field(default_factory=list)
    allow: list[str] | None = None
    max_values: int = Field(default=50, ge=1, le=1000)

    @field_validator("from_")
    @classmethod
    def _sources(cls, value: list[Source]) -> list[Source]:
        if len(set(value)) != len(value):
            raise ValueError("names a source twice")
        return value

    @field_validator("header")
    @classmethod
    def _header(cls, value: str) -> str:
        value = value.strip().lower()
        if not value or set(value) - _TOKEN_CHARS:
            raise ValueError("not a header name")
        if value in CREDENTIAL_HEADERS:
            raise ValueError("carries a credential: its value would be exported as a label")
        return value

    @field_validator("api_keys")
    @classmethod
    def _keys(cls, value: list[ApiKeyTeam]) -> list[ApiKeyTeam]:
        teams: dict[str, str] = {}
        for key in value:
            if teams.setdefault(key.sha256_prefix, key.team) != key.team:
                raise ValueError(f"prefix {key.sha256_prefix} is given two teams")
        return value

    @field_validator("allow")
    @classmethod
    def _allow(cls, value: list[str] | None, info: ValidationInfo) -> list[str] | None:
        if value is None:
            return None
        for team in value:
            _team_name(team)
        missing = {k.team for k in info.data.get("api_keys", [])} - set(value)
        if missing:
            raise ValueError(f"does not list the api_keys team(s) {', '.join(sorted(missing))}")
        return value

    @field_validator("max_values")
    @classmethod
    def _max_values(cls, value: int, info: ValidationInfo) -> int:
        teams = {k.team for k in info.data.get("api_keys", [])}
        if info.data.get("allow") is None and len(teams) > value:
            raise ValueError(f"below the {len(teams)} teams of api_keys")
        return value


class MetricsConfig(_Strict):
    attribution: AttributionConfig | None = None  # absent: no team label (off)


class OtelConfig(_Strict):
    # OTLP/HTTP receiver (a collector), e.g. http://127.0.0.1:4318: traces go to
    # {endpoint}/v1/traces, metrics to {endpoint}/v1/metrics. None: OpenTelemetry is off.
    endpoint: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)  # sent with each export (auth)
    service_name: str = Field(default="trimgate", min_length=1)
    # A request without a traceparent gets a span (a new trace) only when this is on
    start_traces: bool = False
    metrics_interval: float = Field(default=60.0, gt=0)  # seconds between metric exports

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("not a URL")
        if parts.query or parts.fragment:
            raise ValueError("must not carry a query or fragment")
        if parts.username or parts.password:
            raise ValueError("must not carry credentials: put them in otel.headers")
        return value.rstrip("/")


def _default_upstreams() -> dict[str, UpstreamConfig]:
    """One upstream per provider, named after it, at the provider's own API."""
    return {
        provider: UpstreamConfig(provider=provider, base_url=url)
        for provider, url in REGISTRY.base_urls().items()
    }


class Config(_Strict):
    server: ServerConfig = ServerConfig()
    upstreams: dict[str, UpstreamConfig] = Field(default_factory=_default_upstreams)
    models: list[ModelEntry] = Field(default_factory=list)
    trimming: TrimmingConfig = TrimmingConfig()
    metrics: MetricsConfig = MetricsConfig()
    otel: OtelConfig = OtelConfig()

    @model_validator(mode="after")
    def _check(self) -> Config:
        problems = config_wide_problems(self.model_dump())
        if problems:  # parse_config reports them one per line, with the others
            raise ValueError("\n".join(problems))
        return self

    def for_model(self, override: TrimmingOverride | None) -> TrimmingConfig:
        """The trimming settings of one model: its overrides over the global ones."""
        if override is None:
            return self.trimming
        update = {
            k: getattr(override, k)
            for k in TrimmingOverride.model_fields
            if getattr(override, k) is not None
        }
        return self.trimming.model_copy(update=update)


def config_wide_problems(data: dict[str, Any]) -> list[str]:
    """Problems between keys (a prefix used twice, ``admin_port`` equal to ``port``),
    each on its own line. Read from the raw data too, so that they are reported
    alongside the problems of single keys rather than after they are fixed."""
    problems: list[str] = []
    upstreams = data.get("upstreams")
    if isinstance(upstreams, dict):
        seen: dict[str, str] = {}
        for name, up in upstreams.items():
            prefix = up.get("prefix") if isinstance(up, dict) else None
            if not isinstance(prefix, str) or not prefix.startswith("/"):
                continue
            prefix = prefix.rstrip("/")
            if prefix in seen:
                problems.append(f"upstreams.{name}.prefix: same prefix as upstreams.{seen[prefix]}")
            elif prefix:
                seen[prefix] = name
    server = data.get("server")
    if isinstance(server, dict):
        port = server.get("port", ServerConfig.model_fields["port"].default)
        admin = server.get("admin_port")
        if isinstance(admin, int) and admin == port:
            problems.append("server.admin_port: must differ from server.port")
    return problems


def parse_config(data: object) -> Config:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(["(top level): must be a mapping"])
    wide = config_wide_problems(data)
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        problems = [_problem(e) for e in exc.errors() if e["loc"]]
        for e in exc.errors():  # the model's own check: the same lines as ``wide``
            if not e["loc"]:
                wide += _problem(e).split("\n")
        problems += dict.fromkeys(wide)  # each once, in order
        raise ConfigError(problems) from exc
    return config


def _problem(error: Any) -> str:
    path = ".".join(str(p) for p in error["loc"]) or "(top level)"
    message = str(error["msg"])
    if error["type"] == "extra_forbidden":
        message = "unknown key"
    for lead in ("Value error, ", "Assertion failed, "):
        if message.startswith(lead):
            message = message[len(lead) :]
    if path == "(top level)" and ": " in message and message.split(": ", 1)[0].count(".") >= 1:
        return message  # a model-level check already names its key path
    return f"{path}: {message}"


_VERSION_TAIL = re.compile(r"/(v1(?:(?:beta|alpha)\d*)?)$")


def _resolvable_name(host: str) -> bool:
    try:
        host.encode("idna")  # what a connection needs of it: labels of 1 to 63 bytes
    except UnicodeError:
        return False
    return True


def config_warnings(config: Config) -> list[str]:
    """Settings that validate but probably do not do what was meant: one line each.

    A ``base_url`` ending in the API version doubles it: SDKs already send ``/v1/...``
    (Anthropic always, OpenAI when pointed at a base URL ending in ``/v1``, Gemini its
    ``/v1beta/...``), so the provider would be asked for ``/v1/v1/...`` and answer 404.
    An OpenAI-format upstream may take clients that send ``/chat/completions`` without
    the version (docs/reference.md, "Routing"): its warning says when the doubling applies.
    """
    problems: list[str] = []
    listen = f"http://{config.server.host}:{config.server.port}"
    for name, up in config.upstreams.items():
        parts = urlsplit(up.base_url)
        if not _resolvable_name(parts.hostname or ""):
            problems.append(
                f"upstreams.{name}.base_url: the host name has a label that is empty or over"
                " 63 bytes; no resolver takes it, so every request to it will get a 502"
            )
        found = _VERSION_TAIL.search(parts.path)
        if found is None:
            continue
        tail = "/" + found.group(1)
        fix = up.base_url[: -len(tail)]
        key = f"upstreams.{name}.base_url: ends in {tail}"
        if up.provider == "openai":
            if tail != "/v1":
                continue
            at = listen + (up.prefix or "")
            problems.append(
                f"{key}; a request that already carries /v1 (an SDK pointed at {at}/v1) "
                f"would reach the provider as /v1/v1/... — use {fix}, "
                f"or point SDKs at {at} without /v1"
            )
        else:
            sent = "/v1" if up.provider == "anthropic" else "/v1beta"
            problems.append(
                f"{key}; requests already carry {sent}, so the provider would get "
                f"{tail}{sent}/... — use {fix}"
            )
    return problems


def load_config(path: str | os.PathLike[str] | None = None) -> Config:
    """The config from ``path``, else from ``$TRIMGATE_CONFIG``, else the defaults."""
    if path is None:
        path = os.environ.get(CONFIG_ENV) or None
    if path is None:
        return Config()
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([f"{path}: cannot read ({exc.strerror})"]) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError([f"{path}: not UTF-8 text (byte {exc.start})"]) from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError([f"{path}: not valid YAML ({_yaml_where(exc)})"]) from exc
    return parse_config(data)


def _yaml_where(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    if mark is None:
        return "syntax error"
    return f"line {mark.line + 1}, column {mark.column + 1}"


def redacted(config: Config) -> dict[str, Any]:
    """The effective config as plain data, secrets replaced."""
    data = config.model_dump(mode="json", by_alias=True)
    if data["server"].get("admin_token"):
        data["server"]["admin_token"] = REDACTED
    otel = data["otel"]
    otel["headers"] = dict.fromkeys(otel["headers"], REDACTED)
    for up in data["upstreams"].values():
        parts = urlsplit(up["base_url"])
        if parts.username or parts.password:
            up["base_url"] = parts._replace(netloc=f"{REDACTED}@{parts.hostname}").geturl()
    return data
