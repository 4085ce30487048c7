"""Path -> (upstream, wire format) (SPEC §2).

1. An upstream whose ``prefix`` starts the path wins; the prefix is stripped.
2. Otherwise the path's shape picks the default (first configured) upstream of
   its provider: ``/v1/messages...`` anthropic, Gemini model methods and
   ``/v1beta/...`` gemini, everything else openai (each codec's
   ``provider_paths``; the registry's first line takes the rest).

Which paths are chat endpoints of which wire format is each codec's
``chat_routes``, read through the registry.

The upstream URL is always ``base_url + path + query``: nothing from the
request chooses the host.
"""

from __future__ import annotations

from dataclasses import dataclass

from trimgate.config import Config, UpstreamConfig
from trimgate.providers.registry import REGISTRY, Registry


@dataclass(frozen=True, slots=True)
class Route:
    name: str  # the upstream's config name: the `upstream` metric label
    upstream: UpstreamConfig
    path: str  # the raw (still percent-encoded) path forwarded, prefix stripped
    wire_format: str | None  # set on chat endpoints that trimgate examines
    count_tokens: bool = False

    def url(self, raw_query: str) -> str:
        """The upstream URL, still percent-encoded as the client sent it."""
        return self.upstream.base_url + self.path + (f"?{raw_query}" if raw_query else "")


class NoUpstream(Exception):
    def __init__(self, provider: str) -> None:
        super().__init__(provider)
        self.provider = provider


class Router:
    def __init__(self, config: Config, registry: Registry = REGISTRY) -> None:
        self._registry = registry
        self._prefixed = sorted(
            ((up.prefix, name, up) for name, up in config.upstreams.items() if up.prefix),
            key=lambda t: -len(t[0]),
        )
        self._default: dict[str, tuple[str, UpstreamConfig]] = {}
        for name, up in config.upstreams.items():
            if up.prefix is None:
                self._default.setdefault(up.provider, (name, up))
        for name, up in config.upstreams.items():
            self._default.setdefault(up.provider, (name, up))

    def route(self, method: str, path: str) -> Route:
        """Raise ``NoUpstream`` when no upstream serves this path's provider."""
        for prefix, name, up in self._prefixed:
            if path == prefix or path.startswith(prefix + "/"):
                rest = path[len(prefix) :] or "/"
                return Route(name, up, rest, *self._registry.chat_format(method, rest))
        provider = self._registry.provider_of(path)
        found = self._default.get(provider)
        if found is None:
            raise NoUpstream(provider)
        name, up = found
        return Route(name, up, path, *self._registry.chat_format(method, path))
