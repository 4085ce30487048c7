"""Path -> (upstream, wire format) (docs/reference.md, "Routing").

1. An upstream whose ``prefix`` starts the path wins; the prefix is stripped.
2. Otherwise the path's shape picks the default (first configured) upstream of
   its provider: ``/v1/messages...`` anthropic, Gemini model methods and
   ``/v1beta/...`` gemini, everything else openai (each codec's
   ``provider_paths``; the registry's first line takes the rest).

Which paths are chat endpoints of which wire format is each codec's
``chat_routes``, read through the registry.

The upstream URL is always ``base_url + path + query``: nothing from the
request chooses the host. Path safety (``refusal``) comes first: trimgate is not an open
proxy (no CONNECT, no absolute-form target), and no path may climb out of an upstream's
base path once decoded.
"""

from __future__ import annotations

import re
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


NOT_AN_OPEN_PROXY = "trimgate is not an open proxy"
_DOT_SEGMENT = re.compile(r"(?:^|/)(?:\.|%2e){1,2}(?:/|$)", re.IGNORECASE)


def refusal(method: str, raw_path: str, path: str) -> str | None:
    """Why a request is refused before routing, or None. ``raw_path`` is the target as
    sent (without its query), ``path`` the same decoded."""
    if method == "CONNECT" or not raw_path.startswith("/"):
        return NOT_AN_OPEN_PROXY
    if unsafe_path(raw_path, path):
        return "dot segments and empty segments are not forwarded"
    return None


def unsafe_path(raw: str, decoded: str) -> bool:
    """A path that could climb out of an upstream's base path once decoded."""
    if "." not in raw and "%" not in raw and "//" not in raw and "\\" not in decoded:
        return False  # the common path: nothing a dot segment could be made of
    return (
        "//" in raw
        or _DOT_SEGMENT.search(raw) is not None
        or _DOT_SEGMENT.search(decoded) is not None
        or "\\" in decoded
    )
