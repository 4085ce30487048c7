"""What the front copies from aiohttp or reaches into: an aiohttp upgrade that changes
any of it fails here, not in production.

The front (front.py) hands live connections to aiohttp's request handler, registers
its own listener as an aiohttp site, and mirrors aiohttp's defaults and limits so that
a request reads the same whichever of the two serves it. pyproject.toml pins aiohttp
below its next minor release; moving the pin means running these first.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import tomllib
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import http_parser, web, web_protocol, web_runner, web_server

from trimgate.proxy import front, http11

pytestmark = pytest.mark.shell

ROOT = Path(__file__).resolve().parents[2]


def _default(func: Any, name: str) -> Any:
    return inspect.signature(func).parameters[name].default


def test_aiohttp_is_pinned_below_its_next_minor_release() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (spec,) = [dep for dep in project["dependencies"] if re.match(r"aiohttp\b", dep)]
    found = re.fullmatch(r"aiohttp>=3\.\d+,<3\.(\d+)", spec)
    assert found is not None, spec
    major, minor = (int(part) for part in aiohttp.__version__.split(".")[:2])
    assert (major, minor + 1) == (3, int(found[1]))  # the installed one is the tested one


def test_the_defaults_the_front_copies_are_aiohttps() -> None:
    handler = web_protocol.RequestHandler.__init__
    assert _default(handler, "keepalive_timeout") == front.KEEPALIVE
    assert _default(web_runner.BaseRunner.__init__, "shutdown_timeout") == front.SHUTDOWN_TIMEOUT
    backlog = _default(front.FrontSite.__init__, "backlog")
    assert backlog == _default(web.TCPSite.__init__, "backlog")
    assert backlog == _default(web_runner.BaseSite.__init__, "backlog")


def test_the_limits_the_front_leaves_to_aiohttp_are_within_aiohttps() -> None:
    handler = web_protocol.RequestHandler.__init__
    # a head the front reads, aiohttp would read too: never a longer line, more fields
    assert _default(handler, "max_line_size") >= http11.MAX_REQUEST_LINE
    assert _default(handler, "max_field_size") >= http11.MAX_REQUEST_LINE
    assert _default(handler, "max_headers") == http11.MAX_FIELDS
    # and the fields aiohttp refuses to see twice are the ones the front leaves to it
    singletons = {name.lower() for name in http_parser.SINGLETON_HEADERS}
    assert {name.lower() for name in http11.SINGLETONS} == singletons


def test_the_aiohttp_internals_the_front_uses_are_there() -> None:
    # FrontSite is a BaseSite whose start() sets the listener BaseSite.stop() closes
    assert "_server" in web_runner.BaseSite.__slots__
    assert "self._server.close()" in inspect.getsource(web_runner.BaseSite.stop)
    assert "_reg_site" in inspect.getsource(web_runner.BaseSite.start)
    assert isinstance(inspect.getattr_static(web.BaseRunner, "server"), property)
    assert set(inspect.signature(web_runner.BaseSite.__init__).parameters) >= {"runner", "backlog"}
    # a hand-over: Server() gives a RequestHandler, fed a live transport and the bytes read
    assert inspect.signature(web_server.Server.__call__).return_annotation in (
        "RequestHandler",
        web_protocol.RequestHandler,
    )
    for name in ("connection_made", "data_received", "connection_lost", "eof_received"):
        assert callable(getattr(web_protocol.RequestHandler, name))
    assert "timeout" in inspect.signature(web_server.Server.shutdown).parameters
    assert callable(asyncio.Transport.set_protocol)
    # headwatch.WatchedSite starts as TCPSite.start does, from these
    for name in ("_host", "_port", "_bound_port", "_reuse_address", "_reuse_port"):
        assert name in web_runner.TCPSite.__slots__
    assert {"_runner", "_backlog", "_server"} <= set(web_runner.BaseSite.__slots__)
    assert "create_server(" in inspect.getsource(web_runner.TCPSite.start)
    # what FrontRequest.send reads of a whole answer
    response = web.Response(body=b"x", status=418, reason="Teapot", headers={"X-A": "1"})
    assert (response.body, response.status, response.reason) == (b"x", 418, "Teapot")
    assert response.headers["X-A"] == "1" and not response.prepared


async def test_a_handed_over_connection_is_served_by_aiohttp() -> None:
    async def hello(request: web.BaseRequest) -> web.Response:
        return web.Response(text="hi")

    server = web.Server(hello)
    handler = server()
    assert isinstance(handler, web_protocol.RequestHandler)
    written: list[bytes] = []

    class Transport(asyncio.Transport):
        def write(self, data: bytes | bytearray | memoryview) -> None:
            written.append(bytes(data))

        def is_closing(self) -> bool:
            return False

        def get_extra_info(self, name: str, default: Any = None) -> Any:
            return default

        def close(self) -> None:
            pass

    handler.connection_made(Transport())
    # headwatch.HeadWatch: a handler counts the heads it has read, and waits on _waiter
    assert handler._request_count == 0 and not handler._messages
    handler.data_received(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert handler._request_count == 1
    for _ in range(20):  # served, then waiting for the next head
        await asyncio.sleep(0.01)
        if handler._waiter is not None:
            break
    assert handler._waiter is not None and not handler._waiter.done()
    for _ in range(20):
        await asyncio.sleep(0.01)
        if b"hi" in b"".join(written):
            break
    assert b"".join(written).startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"".join(written).endswith(b"\r\n\r\nhi")
    handler.connection_lost(None)
    await server.shutdown(0.1)


def test_the_aiohttp_client_internals_the_fallback_client_uses_are_there() -> None:
    # upstream._StrictConnector: which pooled connection is reused, and how it is made
    from aiohttp import client_proto, connector

    get = inspect.signature(connector.BaseConnector._get)
    assert list(get.parameters) == ["self", "key", "traces"]
    release = inspect.signature(connector.BaseConnector._release)
    assert list(release.parameters)[:3] == ["self", "key", "protocol"]
    assert "should_close" in release.parameters
    assert "self._factory = functools.partial(ResponseHandler" in inspect.getsource(
        connector.BaseConnector.__init__
    )
    assert isinstance(
        inspect.getattr_static(client_proto.ResponseHandler, "should_close"), property
    )
    assert isinstance(inspect.getattr_static(connector.Connection, "protocol"), property)
