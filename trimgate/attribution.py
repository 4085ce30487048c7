"""Which team a request is metered under: the bounded ``team`` metric label.

Pure: ``metrics.attribution`` in, a resolver out; a request's headers in, a label value
out. The value comes from a configured request header, or from the credential the agent
sends (``Authorization: Bearer``, ``x-api-key`` or ``x-goog-api-key``), hashed with
SHA-256 and matched by its hex prefix against ``api_keys``. The credential is hashed
where it is read and never kept, logged or returned; only the configured team name is.

Bounded: with ``allow``, a value outside it is ``other``; without it the first
``max_values`` distinct values are kept (configured teams first) and later ones are
``other``. No value at all is ``unattributed``. So a resolver gives at most
``max_values + 2`` distinct values (or the allow list's size + 2), whatever it is sent,
and holds at most ``max_values`` strings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from hashlib import sha256

from trimgate.config import MAX_TEAM_LEN, AttributionConfig

OTHER = "other"
UNATTRIBUTED = "unattributed"
# Where an agent's credential is read from, in this order (the first present is hashed)
KEY_HEADERS = ("x-api-key", "x-goog-api-key")

Headers = Mapping[str, str]  # case-insensitive in practice (aiohttp's, the front's)


class TeamResolver:
    """``resolver(headers) -> team``: one bounded label value per request."""

    __slots__ = ("_allow", "_header", "_max", "_prefixes", "_seen", "_steps")

    def __init__(self, config: AttributionConfig) -> None:
        self._header = config.header
        by_length: dict[int, dict[str, str]] = {}
        for key in config.api_keys:
            by_length.setdefault(len(key.sha256_prefix), {})[key.sha256_prefix] = key.team
        # the longest (most specific) prefix first
        self._prefixes = tuple(sorted(by_length.items(), reverse=True))
        steps: list[Callable[[Headers], str | None]] = []
        for source in config.from_:
            if source == "header":
                steps.append(self._from_header)
            elif self._prefixes:  # no api_keys: nothing to match, nothing is hashed
                steps.append(self._from_key)
        self._steps = tuple(steps)
        self._allow = frozenset(config.allow) if config.allow is not None else None
        self._max = config.max_values
        # configured teams hold their places before any header value can take them
        self._seen: set[str] = set()
        if self._allow is None:
            for key in config.api_keys:
                if len(self._seen) < self._max:
                    self._seen.add(key.team)

    def __call__(self, headers: Headers) -> str:
        for step in self._steps:
            value = step(headers)
            if value is not None:
                return self._bound(value)
        return UNATTRIBUTED

    def _from_header(self, headers: Headers) -> str | None:
        value = headers.get(self._header)
        if not value:
            return None
        value = value.strip()
        if not value:
            return None
        if len(value) > MAX_TEAM_LEN:
            return OTHER
        if not value.isascii():
            # undecodable bytes arrive as surrogates, which neither JSON nor the
            # exposition format can carry
            value = value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        return value

    def _from_key(self, headers: Headers) -> str | None:
        digest = credential_digest(headers)
        if digest is None:
            return None
        for length, teams in self._prefixes:
            team = teams.get(digest[:length])
            if team is not None:
                return team
        return None

    def _bound(self, value: str) -> str:
        if value in (OTHER, UNATTRIBUTED):
            return value
        allow = self._allow
        if allow is not None:
            return value if value in allow else OTHER
        seen = self._seen
        if value in seen:
            return value
        if len(seen) < self._max:
            seen.add(value)
            return value
        return OTHER

    @property
    def distinct(self) -> int:
        """Distinct values admitted so far (without ``other`` and ``unattributed``)."""
        return len(self._allow) if self._allow is not None else len(self._seen)


def credential_digest(headers: Headers) -> str | None:
    """The SHA-256 hex digest of the credential as sent, or None when there is none.

    ``Authorization`` counts only as ``Bearer <value>`` (the value is hashed, without
    the scheme); then ``x-api-key``, then ``x-goog-api-key``."""
    credential = None
    auth = headers.get("authorization")
    if auth:
        scheme, _, rest = auth.strip().partition(" ")
        if scheme.lower() == "bearer":
            credential = rest.strip() or None
    if credential is None:
        for name in KEY_HEADERS:
            value = headers.get(name)
            if value and value.strip():
                credential = value.strip()
                break
    if credential is None:
        return None
    return sha256(credential.encode("utf-8", "surrogateescape")).hexdigest()


def team_resolver(config: AttributionConfig | None) -> TeamResolver | None:
    """The resolver of ``metrics.attribution``; None when attribution is off."""
    return None if config is None else TeamResolver(config)
