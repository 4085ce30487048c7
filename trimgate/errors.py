"""One exception tree for trimgate.

    TrimgateError
    ├── ConfigError              the config file is invalid (one line per problem)
    ├── DecodeError(ValueError)  a request body is not the shape a codec expects;
    │                            the shell forwards such a body untouched
    └── UpstreamError            the provider could not be reached or answered
        ├── UpstreamConnectError(ConnectionError)   -> 502
        └── UpstreamTimeout(TimeoutError)           -> 504

Lower layers (aiohttp, pydantic, orjson) are translated into this tree at one
boundary each, with ``raise ... from exc``.
"""

from __future__ import annotations


class TrimgateError(Exception):
    """Base of every error trimgate raises on purpose."""


class ConfigError(TrimgateError):
    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


class DecodeError(TrimgateError, ValueError):
    """The body is valid JSON but not the shape this endpoint expects.

    ``reason`` is short and safe to put in the ``x-trimgate-skipped`` header:
    it never contains message contents.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class UpstreamError(TrimgateError):
    status = 502


class UpstreamConnectError(UpstreamError, ConnectionError):
    status = 502


class UpstreamTimeout(UpstreamError, TimeoutError):
    status = 504
