"""Streamed replies through the gateway are accounted and judged at their END, not at the
start-check release (SPEC R9, R10, R11), over real HTTP: httpx -> gateway -> fleet."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx

from ground.settings import GatewayConfig
from routing.breaker import BreakerBoard, BreakerConfig, CircuitStatus
from routing.events import EventLog
from routing.gateway import RelayResponse, create_app, relay
from tests.fixtures.fleet import FleetHandle
from tests.fixtures.routing import (
    ServedApp,
    chat_body,
    make_router,
    routing_catalog,
    routing_scenario,
)

KEY = "gw-stream-key"
LONG = "Write a long scene: the lantern flickers as Mara opens the door to the archive."


async def _stream(url: str, body: dict[str, object]) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        resp = await http.post(
            "/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {KEY}"}
        )
    return [json.loads(x[6:]) for x in resp.text.splitlines() if x.startswith("data: {")]


def _finish(chunks: list[dict[str, Any]]) -> str | None:
    return [c for c in chunks if c["choices"]][-1]["choices"][0]["finish_reason"]  # type: ignore[no-any-return]


async def test_r10_r11_streamed_cost_and_tokens_are_the_final_usage(
    fleet: FleetHandle, ledger_url: str
) -> None:
    """The ledger's attempt and request of a streamed chat carry the whole reply's tokens and cost, as the client's usage chunk says (R10, R11)."""
    fleet.load(routing_scenario())
    router = make_router(fleet.base_url, fleet.key, events=EventLog(ledger_url))
    async with ServedApp(create_app(router, GatewayConfig(keys=[KEY], events_flush_s=0.05))) as s:
        chunks = await _stream(s.url, chat_body(LONG, stream=True))
    usage = [c["usage"] for c in chunks if c.get("usage")][-1]
    assert isinstance(usage, dict)
    await router.events.aflush()  # type: ignore[union-attr]
    with sqlite3.connect(ledger_url.removeprefix("sqlite:///")) as db:
        attempts = db.execute(
            "select completion_tokens, cost_usd, validation from routing_attempts"
        ).fetchall()
        requests = db.execute("select outcome, cost_usd, attempts from routing_requests").fetchall()
    assert len(attempts) == 1 and attempts[0][2] == "accepted"
    assert attempts[0][0] == usage["completion_tokens"] > 20
    assert requests == [("accepted", attempts[0][1], 1)]
    assert router.metrics.snapshot()["attempts_per_completed_request"] == 1.0


async def test_r7_a_paced_stream_reaches_the_client_piece_by_piece_as_it_arrives(
    fleet: FleetHandle,
) -> None:
    """Content goes out per network read (scrubbed and checked once per read, not per chunk),
    so a paced upstream still reaches the client incrementally: several pieces, the first
    long before the last (R7)."""
    scenario = routing_scenario()
    for model in scenario["models"]:
        for ep in model["endpoints"]:
            ep["timing"] = {"ttft_s": 0.5, "tokens_per_s": 15.0, "jitter": 0.0}  # x0.1
    fleet.load(scenario)
    router = make_router(fleet.base_url, fleet.key)
    arrivals: list[tuple[float, str]] = []
    async with (
        ServedApp(create_app(router, GatewayConfig(keys=[KEY]))) as s,
        httpx.AsyncClient(base_url=s.url, timeout=30) as http,
        http.stream(
            "POST", "/v1/chat/completions", json=chat_body(LONG, stream=True),
            headers={"Authorization": f"Bearer {KEY}"},
        ) as resp,
    ):  # fmt: skip
        async for line in resp.aiter_lines():
            if line.startswith("data: {"):
                chunk = json.loads(line[6:])
                if chunk["choices"] and chunk["choices"][0]["delta"].get("content"):
                    arrivals.append((time.monotonic(), chunk["choices"][0]["delta"]["content"]))
        ended = time.monotonic()
    text = "".join(piece for _, piece in arrivals)
    assert len(text) > 100 and len(arrivals) >= 4, arrivals
    assert ended - arrivals[0][0] > 0.2  # the first piece did not wait for the whole reply


async def test_r9_stream_failing_after_release_counts_against_the_route(
    fleet: FleetHandle,
) -> None:
    """A stream cut after the checked head reached the client is the route's failure: its circuit opens (threshold 1) (R9)."""
    fleet.load(
        routing_scenario(
            faults={"alpha-a": [{"kind": "stream_cut", "after_fraction": 0.9, "rate": 1.0}]}
        )
    )
    board = BreakerBoard(BreakerConfig(consecutive_failures=1, open_for_s=60))
    router = make_router(
        fleet.base_url,
        fleet.key,
        breakers=board,
        catalog=routing_catalog(chat={"route_groups": ["text"]}),
    )
    async with ServedApp(create_app(router, GatewayConfig(keys=[KEY]))) as s:
        chunks = await _stream(s.url, chat_body(LONG, stream=True))
        assert _finish(chunks) == "error"
        assert board.status("alpha", time.monotonic()) is CircuitStatus.OPEN
        chunks = await _stream(s.url, chat_body(LONG, stream=True))
    assert _finish(chunks) == "stop"
    assert router.health.at(time.monotonic())["alpha"].success_rate < 1.0


async def test_r7_released_stream_passes_the_contract_checks_at_its_end(
    fleet: FleetHandle, ledger_url: str
) -> None:
    """A streamed reply shorter than the contract's min_output_chars ends with an in-band error and is recorded as a validation rejection, not accepted (R7, R10)."""
    fleet.load(routing_scenario())
    catalog = routing_catalog(
        chat={"constraints": {"complete_output_required": False, "min_output_chars": 100_000}}
    )
    router = make_router(fleet.base_url, fleet.key, catalog=catalog, events=EventLog(ledger_url))
    async with ServedApp(create_app(router, GatewayConfig(keys=[KEY], events_flush_s=0.05))) as s:
        chunks = await _stream(s.url, chat_body(LONG, stream=True))
    assert _finish(chunks) == "error"
    assert chunks[-1]["error"]["metadata"]["error_type"] == "invalid_response"
    await router.events.aflush()  # type: ignore[union-attr]
    with sqlite3.connect(ledger_url.removeprefix("sqlite:///")) as db:
        assert db.execute("select outcome, reason from routing_requests").fetchall() == [
            ("invalid_response", "output_too_short")
        ]
        assert db.execute("select validation from routing_attempts").fetchall() == [
            ("output_too_short",)
        ]


async def _chunks() -> AsyncIterator[bytes]:
    for _ in range(4):
        yield b" " * 4096


async def test_r2_oversized_body_gets_413_in_the_openai_error_shape(fleet: FleetHandle) -> None:
    """A body over max_body_bytes is refused with 413 in OpenAI's error shape, before any upstream call (R2)."""
    fleet.load(routing_scenario())
    router = make_router(fleet.base_url, fleet.key)
    app = create_app(router, GatewayConfig(keys=[KEY], max_body_bytes=10_000))
    async with ServedApp(app) as s, httpx.AsyncClient(base_url=s.url) as http:
        big = chat_body("x" * 20_000)
        resp = await http.post(
            "/v1/chat/completions", json=big, headers={"Authorization": f"Bearer {KEY}"}
        )
        chunked = await http.post(
            "/v1/chat/completions",
            content=_chunks(),  # no Content-Length: counted as read
            headers={"Authorization": f"Bearer {KEY}"},
        )
        ok = await http.post(
            "/v1/chat/completions", json=chat_body(), headers={"Authorization": f"Bearer {KEY}"}
        )
    for r in (resp, chunked):
        assert r.status_code == 413
        err = r.json()["error"]
        assert err["type"] == "permanent_request" and err["reason"] == "body_too_large"
    assert ok.status_code == 200
    assert len(fleet.requests()) == 1


async def test_r9_client_gone_before_the_first_byte_still_finishes_the_stream(
    fleet: FleetHandle,
) -> None:
    """A released stream whose client vanished before the relay ever ran still closes the upstream and gives back alpha's half-open probe slot (R9)."""
    fleet.load(
        routing_scenario(faults={"alpha-a": [{"kind": "http_error", "status": 502, "first_n": 1}]})
    )
    board = BreakerBoard(BreakerConfig(consecutive_failures=1, open_for_s=0.2))
    router = make_router(
        fleet.base_url,
        fleet.key,
        breakers=board,
        catalog=routing_catalog(chat={"route_groups": ["text"]}),
    )
    assert (await router.complete(chat_body(), workload="chat")).route.id == "beta"
    await asyncio.sleep(0.25)
    result = await router.stream(chat_body(LONG, stream=True), workload="chat")
    assert result.route.id == "alpha" and not board.admit("alpha", time.monotonic())

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        raise OSError("client gone")

    response = RelayResponse(result, relay(result, router, time.monotonic() + 30))
    with contextlib.suppress(Exception):
        await response({"type": "http", "asgi": {"spec_version": "2.4"}}, receive, send)
    assert board.admit("alpha", time.monotonic())  # the probe slot came back
    assert router.metrics.snapshot()["requests"] == 2
