"""trimgate is not an open proxy: only configured upstreams are ever contacted."""

from __future__ import annotations

import pytest

from tests.proxy.conftest import MakeStack, raw_request


async def test_absolute_form_target_is_refused(make_stack: MakeStack) -> None:
    stack = await make_stack()
    port = stack.server.port
    assert port is not None
    answer = await raw_request(
        port,
        b"GET http://169.254.169.254/latest/meta-data/ HTTP/1.1\r\n"
        b"Host: 169.254.169.254\r\nConnection: close\r\n\r\n",
    )
    assert answer.startswith(b"HTTP/1.1 4")
    assert stack.fake.requests == []


@pytest.mark.parametrize("http_server", ["trimgate", "aiohttp"])
@pytest.mark.parametrize("target", [b"example.com:443", b"/v1/chat/completions"])
async def test_connect_is_refused_with_400(
    make_stack: MakeStack, http_server: str, target: bytes
) -> None:
    stack = await make_stack(server={"http_server": http_server})
    port = stack.server.port
    assert port is not None
    answer = await raw_request(
        port, b"CONNECT " + target + b" HTTP/1.1\r\nHost: example.com:443\r\n\r\n"
    )
    assert answer.startswith(b"HTTP/1.1 400 ")
    assert answer.endswith(
        b'{"error": {"message": "trimgate is not an open proxy", "type": "invalid_request_error"}}'
    )
    assert stack.fake.requests == []


async def test_host_and_forwarding_headers_never_choose_the_destination(
    make_stack: MakeStack,
) -> None:
    stack = await make_stack()
    resp = await stack.client.get(
        "/v1/models",
        headers={
            "Host": "evil.example",
            "X-Forwarded-Host": "evil.example",
            "Forwarded": "host=evil.example",
            "X-Forwarded-For": "10.0.0.1",
        },
    )
    assert resp.status == 200
    (rec,) = stack.fake.requests
    assert rec.headers["Host"] == f"127.0.0.1:{stack.fake_server.port}"
    for name in ("X-Forwarded-Host", "Forwarded", "X-Forwarded-For"):
        assert name not in rec.headers


async def test_path_cannot_smuggle_a_host(make_stack: MakeStack) -> None:
    stack = await make_stack()
    port = stack.server.port
    assert port is not None
    answer = await raw_request(
        port, b"GET //evil.example/v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    # either refused or sent to the configured upstream: never to evil.example
    assert answer.startswith(b"HTTP/1.1")
    for rec in stack.fake.requests:
        assert rec.headers["Host"] == f"127.0.0.1:{stack.fake_server.port}"
