"""trimgate's own answers: errors in the caller's provider envelope, and refusals.

Rules of this module:
- An error trimgate itself answers (no upstream, a body too large, an unreachable
  provider) comes in the provider's own error envelope, so SDKs raise their usual
  exceptions; it always says it is trimgate's (``x-trimgate-error``) and carries the
  request's id.
- A refusal (not an open proxy, an unsafe path) is a 400 before anything is routed.
"""

from __future__ import annotations

from aiohttp import web
from multidict import CIMultiDict

from trimgate.providers.registry import error_body


def error_response(provider: str, status: int, message: str, request_id: str) -> web.Response:
    """An error in the provider's own envelope, so SDKs raise their usual exceptions."""
    body = error_body(provider, status, message, request_id)
    headers = CIMultiDict({"x-trimgate-request-id": request_id, "x-trimgate-error": "true"})
    return web.Response(body=body, status=status, content_type="application/json", headers=headers)


def refuse(request_id: str, why: str) -> web.Response:
    """A request refused before routing (``routing.refusal`` says why)."""
    return web.json_response(
        {"error": {"message": why, "type": "invalid_request_error"}},
        status=400,
        headers={"x-trimgate-request-id": request_id},
    )
