"""What a provider or a client can make the gateway hold (issue 10; README: Security).

- Memory: a real `canary gateway serve` subprocess relays requests whose upstream answers
  with a 200 MB error body and a 30 MB SSE line; its peak RSS (VmHWM from /proc) stays under
  RSS_BOUND_MB, and each request is answered, not 500.
- Slow clients: a request head trickled byte by byte is cut after the header timeout, a body
  trickled past the body timeout gets 408, an idle connection is closed after keep-alive.
- The caps are settings, wired from `build_router`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ground.settings import GatewayConfig, load_settings
from routing.compose import build_router
from routing.exclusions import CachedIgnoreSource, static_source
from routing.gateway import create_app
from routing.moves import LoopBudget
from routing.serving import gateway_config
from tests.fixtures.hostile import (
    Hostile,
    Reply,
    Request,
    endpoints_listing,
    head,
    huge_error_reply,
    json_reply,
)
from tests.fixtures.routing import ServedApp, chat_body, make_router

# The gateway process starts at ~80-110 MB (Python, Starlette, httpx, jsonschema, pydantic,
# lingua's detector tables are not loaded by the gateway). Without the caps one 200 MB error
# body took it past 1.3 GB; with them it must stay under this peak.
RSS_BOUND_MB = 250
ROOT = Path(__file__).resolve().parents[2]
GW = "gw-bounds-key"
_URL = re.compile(r"at (http://[\d.]+:\d+)/v1")


def _status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"{field} not in /proc/{pid}/status")


def _huge_sse_line(total_bytes: int) -> Reply:
    hdrs = head(200, {"Content-Type": "text/event-stream"})

    def parts() -> Iterator[bytes]:
        yield hdrs + b'data: {"choices": [{"delta": {"content": "'
        block = b"y" * (1 << 20)
        for _ in range(total_bytes // len(block)):
            yield block
        yield b'"}}]}\n\ndata: [DONE]\n\n'

    return Reply(parts())


@pytest.fixture
def gateway_process(hostile: Hostile, tmp_path: Path) -> Iterator[tuple[str, int]]:
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "CANARY_BASE_URL": hostile.base_url,
        "CANARY_API_KEY": "sk-or-v1-bounds-test-key-0000",
        "CANARY_GATEWAY__KEYS": GW,
        "CANARY_HOME": str(tmp_path / "home"),
    }
    log = tmp_path / "gateway.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "canary.cli", "gateway", "serve", "--port", "0",
             "--no-quarantine", "--no-events"],
            cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            match = _URL.search(log.read_text(errors="replace"))
            if match:
                break
            assert proc.poll() is None, log.read_text(errors="replace")
            time.sleep(0.1)
        else:
            raise AssertionError(f"gateway did not start: {log.read_text(errors='replace')}")
        yield match.group(1), proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.mark.slow
def test_r12_gateway_rss_stays_bounded_relaying_a_200_mb_error_body(
    hostile: Hostile, gateway_process: tuple[str, int]
) -> None:
    """Every upstream answer is a 200 MB error body (made as it is written) or a 30 MB SSE
    line: each request is answered (502/503, OpenAI's shape, no 500), and the gateway's peak
    RSS stays under RSS_BOUND_MB (R12)."""
    url, pid = gateway_process

    def handle(req: Request) -> Reply:
        if req.method == "GET":
            return json_reply(200, endpoints_listing("m/x", [("a/fp8", "A")]))
        if req.json().get("model", "").startswith("qwen"):
            return _huge_sse_line(30 << 20)
        return huge_error_reply(502, 200 << 20)

    hostile.handler = handle
    start_kb = _status_kb(pid, "VmRSS")
    with httpx.Client(base_url=url, timeout=120) as http:
        for stream in (False, True, False):
            r = http.post(
                "/v1/chat/completions",
                json=chat_body(stream=stream),
                headers={"Authorization": f"Bearer {GW}"},
            )
            assert r.status_code in (502, 503), r.text[:300]
            assert r.json()["error"]["type"] in ("capacity", "invalid_response"), r.text[:300]
    peak_mb = _status_kb(pid, "VmHWM") / 1024
    print(f"gateway RSS: start {start_kb / 1024:.0f} MB, peak {peak_mb:.0f} MB")
    assert len([r for r in hostile.requests if r.method == "POST"]) >= 6  # every attempt seen
    assert peak_mb < RSS_BOUND_MB, f"peak RSS {peak_mb:.0f} MB >= {RSS_BOUND_MB} MB"


def test_r12_caps_are_settings_wired_by_build_router() -> None:
    """CANARY_ROUTING__MAX_*_BYTES reach the upstream client the gateway is built with."""
    settings = load_settings(
        routing={"max_line_bytes": 5_000, "max_reply_bytes": 50_000, "max_error_body_bytes": 2_000}
    )
    router = build_router(settings, ignore_source=static_source(), events=False)
    up = router.upstream
    assert (up.max_line_bytes, up.max_reply_bytes, up.max_error_bytes) == (5_000, 50_000, 2_000)


def test_r3_r5_the_router_takes_the_routing_settings_whole() -> None:
    """build_router hands settings.routing and settings.allowances to the router as they are:
    a same-route retry count of 0, a connect bound and an ignore-list cache set in the
    settings are the ones the router runs with (R3-R5)."""
    settings = load_settings(
        routing={"same_route_retries": 0, "connect_timeout_s": 1.5, "ignore_ttl_s": 7.0},
        allowances={"connect_s": 0.3},
    )
    router = build_router(settings, ignore_source=static_source(), events=False)
    assert router.config == settings.routing and router.allowances == settings.allowances
    assert LoopBudget.start(router.config).same_route_left == 0
    source = router.ignore_source
    assert isinstance(source, CachedIgnoreSource) and source.ttl_s == 7.0
    assert source.fetch_timeout_s == settings.routing.ignore_fetch_timeout_s


async def _served(hostile: Hostile) -> ServedApp:
    router = make_router(hostile.base_url, "sk-unused")
    bounds = GatewayConfig(keys=[GW], body_timeout_s=0.5, keep_alive_s=1, header_timeout_s=0.5)
    app = create_app(router, bounds)
    config = gateway_config(app, bounds, host="127.0.0.1", port=0)
    return ServedApp(app, config)


async def _closed_within(reader: asyncio.StreamReader, seconds: float) -> bytes:
    """What the server sent before closing the connection; fails if it stays open."""
    data = b""
    async with asyncio.timeout(seconds):
        while chunk := await reader.read(65536):
            data += chunk
    return data


async def test_r12_slow_request_head_is_cut_after_the_header_timeout(hostile: Hostile) -> None:
    """A client trickling its request head one byte every 0.1 s is disconnected after the
    header timeout (0.5 s here), although it never stopped sending (R12)."""
    async with await _served(hostile) as s:
        host, port = s.url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        head_bytes = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200

        async def trickle() -> None:
            for byte in head_bytes:
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(0.1)

        sender = asyncio.create_task(trickle())
        started = time.monotonic()
        try:
            await _closed_within(reader, 5.0)
        finally:
            sender.cancel()
            writer.close()
        assert 0.4 < time.monotonic() - started < 5.0


async def test_r12_slow_body_gets_408_and_idle_connection_is_closed(hostile: Hostile) -> None:
    """A body still arriving after the body timeout gets 408 in OpenAI's shape; after a
    response, an idle keep-alive connection is closed by the server (R12)."""
    async with await _served(hostile) as s:
        host, port = s.url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + GW.encode() + b"\r\nContent-Length: 1000\r\n\r\n{"
        )
        await writer.drain()

        async def trickle() -> None:  # a body that never completes, until we are cut off
            with contextlib.suppress(ConnectionError):
                for _ in range(50):
                    writer.write(b" ")
                    await writer.drain()
                    await asyncio.sleep(0.1)

        sender = asyncio.create_task(trickle())
        started = time.monotonic()
        data = await _closed_within(reader, 4.0)  # answered at 0.5 s, cut soon after
        sender.cancel()
        writer.close()
        assert time.monotonic() - started < 4.0
        assert data.startswith(b"HTTP/1.1 408"), data[:200]
        assert b'"reason":"request_timeout"' in data
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        await writer.drain()
        started = time.monotonic()
        data = await _closed_within(reader, 5.0)  # keep-alive 1 s (or the 0.5 s head timeout)
        writer.close()
        assert data.startswith(b"HTTP/1.1 200") and time.monotonic() - started < 5.0
