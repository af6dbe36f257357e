"""Streamed replies through the gateway are accounted and judged at their END, not at the
start-check release (SPEC R9, R10, R11), over real HTTP: httpx -> gateway -> fleet."""

from __future__ import annotations

import asyncio
import inspect
import json
import sqlite3
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import httpx
import pytest
from starlette.requests import ClientDisconnect

from ground.settings import GatewayConfig
from routing.accounting import RequestState
from routing.breaker import BreakerBoard, BreakerConfig, CircuitStatus
from routing.events import EventLog
from routing.gateway import RelayResponse, create_app, relay
from routing.router import Router, RouterResult
from tests.fixtures.fleet import FleetHandle
from tests.fixtures.routing import (
    ServedApp,
    chat_body,
    ledger_rows,
    make_router,
    paced,
    routing_catalog,
    routing_scenario,
)

KEY = "gw-stream-key"
USAGE = {"include_usage": True}  # a stream ends with the usage when the client asks
LONG = "Write a long scene: the lantern flickers as Mara opens the door to the archive."


async def _stream(url: str, body: dict[str, object]) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        resp = await http.post(
            "/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {KEY}"}
        )
    return [json.loads(x[6:]) for x in resp.text.splitlines() if x.startswith("data: {")]


def _finish(chunks: list[dict[str, Any]]) -> str | None:
    return [c for c in chunks if c["choices"]][-1]["choices"][0]["finish_reason"]


async def test_r10_r11_streamed_cost_and_tokens_are_the_final_usage(
    fleet: FleetHandle, ledger_url: str
) -> None:
    """The ledger's attempt and request of a streamed chat carry the whole reply's tokens and cost, as the client's usage chunk says (R10, R11)."""
    fleet.load(routing_scenario())
    router = make_router(fleet.base_url, fleet.key, events=EventLog(ledger_url))
    async with ServedApp(create_app(router, GatewayConfig(keys=[KEY], events_flush_s=0.05))) as s:
        chunks = await _stream(s.url, chat_body(LONG, stream=True, stream_options=USAGE))
    usage = [c["usage"] for c in chunks if c.get("usage")][-1]
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
    fleet.load(paced(routing_scenario()))
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
    """A streamed reply shorter than the contract's min_output_chars ends with an in-band error and is recorded as a validation rejection, not accepted (R7, R10). Paced, so its start settles and is released before the reply ends."""
    fleet.load(paced(routing_scenario()))
    catalog = routing_catalog(
        chat={"constraints": {"complete_output_required": False, "min_output_chars": 100_000}}
    )
    router = make_router(fleet.base_url, fleet.key, catalog=catalog, events=EventLog(ledger_url))
    async with ServedApp(create_app(router, GatewayConfig(keys=[KEY], events_flush_s=0.05))) as s:
        chunks = await _stream(s.url, chat_body(LONG, stream=True))
    assert _finish(chunks) == "error"
    assert chunks[-1]["error"]["metadata"]["error_type"] == "invalid_response"
    await router.events.aflush()  # type: ignore[union-attr]
    assert ledger_rows(ledger_url, "select outcome, reason from routing_requests") == [
        ("invalid_response", "output_too_short")
    ]
    assert ledger_rows(ledger_url, "select validation from routing_attempts") == [
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


def _frames(sent: list[bytes]) -> list[dict[str, Any]]:
    text = b"".join(sent).decode()
    return [json.loads(x[6:]) for x in text.split("\n\n") if x.startswith("data: {")]


async def _released(router: Router) -> tuple[RouterResult, RequestState]:
    """A streaming chat admitted and routed: its start checked, the rest not yet read."""
    req = router.admit(chat_body(LONG, stream=True), "chat", None, stream=True)
    result = await router.run(req)
    assert result.rest is not None  # released: the relay owns the rest
    return result, req


async def _respond(response: RelayResponse, send_ok: int) -> list[bytes]:
    """Serve `response` to a client that takes `send_ok` ASGI messages, then is gone (its
    next send fails); the bodies it received."""
    bodies: list[bytes] = []

    async def receive() -> dict[str, Any]:
        await (
            asyncio.Event().wait()
        )  # the client never sends: spec 2.4 learns of a disconnect by send
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if len(bodies) + 1 > send_ok:  # the response start counts as one
            raise OSError("client gone")
        bodies.append(message.get("body", b""))

    with pytest.raises(ClientDisconnect):
        await response({"type": "http", "asgi": {"spec_version": "2.4"}}, receive, send)
    return bodies[1:]


async def test_r7_the_relay_sends_the_checked_head_then_the_rest_and_judges_the_end(
    fleet: FleetHandle, ledger_url: str
) -> None:
    """Driven to its end, the relay sends the checked head first, then every other piece
    of the reply, the finish reason and [DONE]; the whole reply passed acceptance and is
    recorded once as accepted (R7, R10)."""
    fleet.load(paced(routing_scenario()))  # released before its end (issue 31's hold)
    router = make_router(fleet.base_url, fleet.key, events=EventLog(ledger_url))
    result, req = await _released(router)
    sent = [frame async for frame in relay(result, router, req)]
    frames = _frames(sent)
    assert frames[0]["choices"][0]["delta"] == {"role": "assistant", "content": result.head}
    text = "".join(f["choices"][0]["delta"].get("content", "") for f in frames if f["choices"])
    assert text == result.completion.content and len(text) > len(result.head)
    assert _finish(frames) == "stop" and sent[-1] == b"data: [DONE]\n\n"
    await router.events.aflush()  # type: ignore[union-attr]
    assert ledger_rows(ledger_url, "select outcome from routing_requests") == [("accepted",)]
    assert ledger_rows(ledger_url, "select validation from routing_attempts") == [("accepted",)]


async def test_r9_client_gone_mid_stream_records_a_cancelled_request_once(
    fleet: FleetHandle, ledger_url: str
) -> None:
    """A client that took the head and went away: the relay ran (the head reached it), the
    upstream call is closed and the request is recorded once, as cancelled, with no verdict
    on the route (R9, R10)."""
    fleet.load(paced(routing_scenario()))  # released before its end (issue 31's hold)
    router = make_router(fleet.base_url, fleet.key, events=EventLog(ledger_url))
    result, req = await _released(router)
    bodies = await _respond(RelayResponse(result, relay(result, router, req)), send_ok=2)
    assert _frames(bodies)[0]["choices"][0]["delta"]["content"] == result.head
    await router.events.aflush()  # type: ignore[union-attr]
    assert ledger_rows(ledger_url, "select outcome from routing_requests") == [("cancelled",)]
    assert ledger_rows(ledger_url, "select cancelled from routing_attempts") == [(1,)]
    assert router.health.at(time.monotonic()) == {}  # a client's going is no verdict on alpha


async def test_r9_client_gone_before_the_first_byte_still_finishes_the_stream(
    fleet: FleetHandle, ledger_url: str
) -> None:
    """A released stream whose client vanished before the relay ever ran still closes the upstream, records the request as cancelled and gives back alpha's half-open probe slot (R9)."""
    fleet.load(
        paced(
            routing_scenario(
                faults={"alpha-a": [{"kind": "http_error", "status": 502, "first_n": 1}]}
            )
        )
    )
    board = BreakerBoard(BreakerConfig(consecutive_failures=1, open_for_s=0.2))
    router = make_router(
        fleet.base_url,
        fleet.key,
        breakers=board,
        catalog=routing_catalog(chat={"route_groups": ["text"]}),
        events=EventLog(ledger_url),
    )
    assert (await router.complete(chat_body(), workload="chat")).route.id == "beta"
    await asyncio.sleep(0.25)
    result, req = await _released(router)
    assert result.route.id == "alpha" and not board.admit("alpha", time.monotonic())
    stream = relay(result, router, req)
    assert await _respond(RelayResponse(result, stream), send_ok=0) == []
    assert isinstance(stream, AsyncGenerator)  # relay() is one (typed as an AsyncIterator)
    assert inspect.getasyncgenstate(stream) == inspect.AGEN_CREATED  # the relay never ran
    assert board.admit("alpha", time.monotonic())  # the probe slot came back
    await router.events.aflush()  # type: ignore[union-attr]
    outcomes = ledger_rows(ledger_url, "select outcome from routing_requests order by id")
    assert outcomes == [("accepted",), ("cancelled",)]
