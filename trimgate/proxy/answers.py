"""trimgate's own answers: errors in the caller's provider envelope, and refusals.

Rules of this module:
- An error trimgate itself answers (no upstream, a body too large, an unreachable
  provider) comes in the provider's own error envelope, so SDKs raise their usual
  exceptions; it always says it is trimgate's (``x-trimgate-error``) and carries the
  request's id.
- A refusal (not an open proxy, an unsafe path) is a 400 before anything is routed.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web
from multidict import CIMultiDict

_GEMINI_STATUS = {
    400: "INVALID_ARGUMENT",
    404: "NOT_FOUND",
    413: "INVALID_ARGUMENT",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
_ANTHROPIC_TYPE = {
    400: "invalid_request_error",
    404: "not_found_error",
    413: "request_too_large",
    502: "api_error",
    503: "overloaded_error",
    504: "timeout_error",
}


def error_response(provider: str, status: int, message: str, request_id: str) -> web.Response:
    """An error in the provider's own envelope, so SDKs raise their usual exceptions."""
    body: dict[str, Any]
    if provider == "anthropic":
        body = {
            "type": "error",
            "error": {"type": _ANTHROPIC_TYPE.get(status, "api_error"), "message": message},
        }
    elif provider == "gemini":
        body = {
            "error": {
                "code": status,
                "message": message,
                "status": _GEMINI_STATUS.get(status, "INTERNAL"),
            }
        }
    else:
        body = {
            "error": {
                "message": message,
                "type": "trimgate_error",
                "param": None,
                "code": {
                    502: "upstream_unreachable",
                    503: "trimgate_busy",
                    504: "upstream_timeout",
                }.get(status),
            }
        }
    headers = CIMultiDict({"x-trimgate-request-id": request_id, "x-trimgate-error": "true"})
    return web.Response(
        body=orjson.dumps(body), status=status, content_type="application/json", headers=headers
    )


def refuse(request_id: str, why: str) -> web.Response:
    """A request refused before routing (``routing.refusal`` says why)."""
    return web.json_response(
        {"error": {"message": why, "type": "invalid_request_error"}},
        status=400,
        headers={"x-trimgate-request-id": request_id},
    )
