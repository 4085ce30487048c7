"""The config file: pydantic models, defaults, loading and redaction.

Every key is described in docs/reference.md, "Config file".

This is the only module that reads environment variables (``TRIMGATE_CONFIG``).
Unknown keys are errors naming their path, so a typo never passes silently.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from trimgate.errors import ConfigError
from trimgate.providers.overflow import Patterns, compile_patterns
from trimgate.trimming.policy import Settings, breadcrumb_tokens

CONFIG_ENV = "TRIMGATE_CONFIG"
DEFAULT_BREADCRUMB = "[earlier turns omitted to fit the context window]"
REDACTED = "<redacted>"

Provider = Literal["openai", "anthropic", "gemini"]
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


class TrimmingConfig(_Strict):
    mode: Mode = "enforce"
    max_context_tokens: int = Field(default=128_000, ge=0)
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


class ModelEntry(_Strict):
    match: str = Field(min_length=1)
    context_window: int = Field(gt=0)
    name: str | None = None  # the `model` metric label; defaults to `match`
    trimming: TrimmingOverride | None = None


def _default_upstreams() -> dict[str, UpstreamConfig]:
    return {
        "openai": UpstreamConfig(provider="openai", base_url="https://api.openai.com"),
        "anthropic": UpstreamConfig(provider="anthropic", base_url="https://api.anthropic.com"),
        "gemini": UpstreamConfig(
            provider="gemini", base_url="https://generativelanguage.googleapis.com"
        ),
    }


class Config(_Strict):
    server: ServerConfig = ServerConfig()
    upstreams: dict[str, UpstreamConfig] = Field(default_factory=_default_upstreams)
    models: list[ModelEntry] = Field(default_factory=list)
    trimming: TrimmingConfig = TrimmingConfig()

    @model_validator(mode="after")
    def _check(self) -> Config:
        prefixes: dict[str, str] = {}
        for name, up in self.upstreams.items():
            if up.prefix is None:
                continue
            if up.prefix in prefixes:
                raise ValueError(
                    f"upstreams.{name}.prefix: same prefix as upstreams.{prefixes[up.prefix]}"
                )
            prefixes[up.prefix] = name
        if self.server.admin_port is not None and self.server.admin_port == self.server.port:
            raise ValueError("server.admin_port: must differ from server.port")
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


def parse_config(data: object) -> Config:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(["(top level): must be a mapping"])
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError([_problem(e) for e in exc.errors()]) from exc


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
    data = config.model_dump(mode="json")
    if data["server"].get("admin_token"):
        data["server"]["admin_token"] = REDACTED
    for up in data["upstreams"].values():
        parts = urlsplit(up["base_url"])
        if parts.username or parts.password:
            up["base_url"] = parts._replace(netloc=f"{REDACTED}@{parts.hostname}").geturl()
    return data
