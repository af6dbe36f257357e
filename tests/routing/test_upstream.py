"""The gateway's upstream client (routing/upstream.py) over real HTTP to the hostile fixture on
loopback: what it sends, and that one `Upstream` serves every event loop it is used in."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from pydantic import SecretStr

from routing.classify import classify
from routing.deadline import AttemptBudget
from routing.errors import FailureClass
from routing.upstream import ConnectError, Upstream
from tests.fixtures.hostile import Hostile, hello_stream

KEY = "sk-or-v1-upstream-test-key-0123456789"
BODY = {"model": "m", "messages": [{"role": "user", "content": "Mara's lantern: é ✓"}], "n": 1}


async def _read(upstream: Upstream) -> str:
    async with upstream.call(BODY, AttemptBudget(2.0, 5.0)) as call:
        assert await call.start() is None
        return "".join([piece async for piece in call.content()])


def test_one_upstream_serves_each_event_loop_it_is_used_in(hostile: Hostile) -> None:
    """An Upstream made outside any loop works in one loop, in the next, and after aclose()
    (its pool is made lazily in the running loop, as aiohttp requires)."""
    upstream = Upstream(hostile.base_url, SecretStr(KEY))

    async def twice() -> list[str]:
        return [await _read(upstream), await _read(upstream)]

    first = asyncio.run(twice())
    second = asyncio.run(twice())  # a new loop: a new pool, the old one let go

    async def after_close() -> str:
        await upstream.aclose()
        text = await _read(upstream)
        await upstream.aclose()
        return text

    third = asyncio.run(after_close())
    assert first == second == [third, third] and "lantern" in third
    assert len(hostile.requests) == 5


ASKED = {"stream": True, "stream_options": {"include_usage": True}}


async def test_the_request_is_what_httpx_sent(hostile: Hostile) -> None:
    """POST <base>/chat/completions with the body encoded as httpx encoded `json=` (compact
    UTF-8) plus `stream: true` and `stream_options.include_usage` (the usage always asked
    for: issue 32), the key as a bearer header, gzip/deflate offered, no cookie
    and no proxy headers."""
    hostile.handler = lambda req: hello_stream()
    upstream = Upstream(hostile.base_url + "/", SecretStr(KEY))
    try:
        await _read(upstream)
    finally:
        await upstream.aclose()
    (req,) = hostile.requests
    assert (req.method, req.path) == ("POST", "/api/v1/chat/completions")
    expected = httpx.Request("POST", "http://x", json={**BODY, **ASKED}).read()
    assert req.body == expected and json.loads(req.body)["stream"] is True
    h = req.headers
    assert h["authorization"] == f"Bearer {KEY}" and h["content-type"] == "application/json"
    assert h["accept-encoding"] == "gzip, deflate" and h["x-title"] == "provider-canary gateway"
    assert not {"cookie", "proxy-authorization", "expect"} & set(h)


async def test_a_refused_connection_is_an_early_transient_connect_error() -> None:
    """Nothing listening: ConnectError (translated from aiohttp's), transient and early, its
    message free of the key."""
    upstream = Upstream("http://127.0.0.1:9/api/v1", SecretStr(KEY))
    try:
        async with upstream.call(BODY, AttemptBudget(1.0, 2.0)) as call:
            await call.start()
    except ConnectError as exc:
        c = classify(exc)
        assert (c.failure_class, c.reason, c.early) == (
            FailureClass.TRANSIENT,
            "connect_error",
            True,
        )
        assert KEY[10:18] not in str(exc)
    else:
        raise AssertionError("no ConnectError")
    finally:
        await upstream.aclose()


async def test_the_environments_proxy_is_used_and_no_proxy_honoured(
    hostile: Hostile, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HTTP_PROXY names the proxy for an http upstream (read once, when the Upstream is
    made, as httpx's trust_env did): the request goes to the proxy in absolute form; with
    the upstream's host in NO_PROXY it goes direct."""
    hostile.handler = lambda req: hello_stream()
    proxy_root = hostile.base_url.removesuffix("/api/v1")
    monkeypatch.setenv("HTTP_PROXY", proxy_root)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    upstream = Upstream("http://upstream.invalid/api/v1", SecretStr(KEY))
    try:
        assert upstream.proxy == proxy_root
        assert "lantern" in await _read(upstream)
    finally:
        await upstream.aclose()
    assert [r.path for r in hostile.requests] == ["http://upstream.invalid/api/v1/chat/completions"]
    monkeypatch.setenv("NO_PROXY", "upstream.invalid")
    assert Upstream("http://upstream.invalid/api/v1", SecretStr(KEY)).proxy is None
    monkeypatch.delenv("HTTP_PROXY")
    assert Upstream(hostile.base_url, SecretStr(KEY)).proxy is None
