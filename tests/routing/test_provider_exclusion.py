"""One bad provider behind a good model (SPEC R9, R13, Q4): the provider that served a failed
attempt is excluded for the request's following attempts, its own circuit opens, and the
model's route stays closed. Real HTTP to the fleet, its endpoints listing read by the router.

    acme/alpha   alpha-a (cheapest: the fleet serves it first; corrupts every start),
                 alpha-b, alpha-c (healthy)
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

from ground.settings import GatewayConfig
from routing.breaker import BreakerBoard, BreakerConfig, CircuitStatus
from routing.gateway import create_app
from routing.providers import provider_key
from tests.fixtures.fleet import FleetHandle
from tests.fixtures.routing import (
    FAST,
    ServedApp,
    chat_body,
    make_router,
    routing_catalog,
    routing_scenario,
)

KEY = "gw-exclusion-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
STRAY = [{"kind": "stray_start", "rate": 1.0}]


def _three_providers(defects: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    scenario = routing_scenario(defects=defects)
    alpha = scenario["models"][0]
    alpha["endpoints"].append(
        {"tag": "alpha-c", "provider_name": "AlphaC", "timing": dict(FAST), "faults": [],
         "defects": [], "pricing": {"prompt": "0.0000003", "completion": "0.0000004"}}
    )  # fmt: skip
    return scenario


def _ignored(req: dict[str, Any]) -> list[str]:
    return list((req.get("body") or {}).get("provider", {}).get("ignore", []))


async def _stream(http: httpx.AsyncClient) -> tuple[httpx.Response, str]:
    async with http.stream(
        "POST", "/v1/chat/completions", json=chat_body(stream=True), headers=AUTH
    ) as resp:
        lines = [line async for line in resp.aiter_lines() if line.startswith("data: {")]
    text = "".join(
        (json.loads(line[6:]).get("choices") or [{}])[0].get("delta", {}).get("content") or ""
        for line in lines
    )
    return resp, text


async def test_r13_the_provider_that_corrupted_the_start_is_excluded_and_its_circuit_opens(
    fleet: FleetHandle,
) -> None:
    """AlphaA corrupts every start: each request's first attempt on alpha (served by AlphaA)
    is retried on alpha without it and AlphaB answers; after two failures AlphaA's circuit
    is open and the next request leaves it out from the start, while alpha's own circuit and
    the client's replies stay clean (R9, R13)."""
    fleet.load(_three_providers({"alpha-a": STRAY}))
    board = BreakerBoard(BreakerConfig(consecutive_failures=2, open_for_s=60))
    router = make_router(fleet.base_url, fleet.key, breakers=board, listed=True,
                         catalog=routing_catalog(chat={"route_groups": ["text"]}))  # fmt: skip
    app = create_app(router, GatewayConfig(keys=[KEY], events_flush_s=0.05))
    async with ServedApp(app) as s, httpx.AsyncClient(base_url=s.url) as http:
        replies = [await _stream(http) for _ in range(3)]
    assert [r.headers["x-route"] for r, _ in replies] == ["alpha"] * 3
    assert [r.headers["x-attempts"] for r, _ in replies] == ["2", "2", "1"]
    assert all(text and text.lstrip()[0] not in ",;:)]}.!?|" for _, text in replies)
    served = [(r["tag"], _ignored(r)) for r in fleet.requests()]
    assert served == [
        ("alpha-a", []), ("alpha-b", ["alpha-a"]),  # excluded for the request's next attempt
        ("alpha-a", []), ("alpha-b", ["alpha-a"]),
        ("alpha-b", ["alpha-a"]),  # AlphaA's circuit is open: left out from the start
    ]  # fmt: skip
    now = time.monotonic()
    assert board.status(provider_key("alpha", "AlphaA"), now, "chat") is CircuitStatus.OPEN
    assert board.status("alpha", now, "chat") is CircuitStatus.CLOSED
    assert board.status(provider_key("alpha", "AlphaB"), now, "chat") is CircuitStatus.CLOSED
    text = router.metrics.render().decode()
    assert 'provider="AlphaA",result="invalid_response"' in text


async def test_r13_q4_the_capacity_floor_keeps_a_two_provider_model_whole(
    fleet: FleetHandle,
) -> None:
    """With two providers, leaving one out of every request would leave one (below the floor
    of two): AlphaA's open circuit does not take it from the model, the floor keeps it
    allowed. Each request it fails goes on without it on the same route (AlphaB answers),
    and its failures stay its own: alpha's circuit stays closed while AlphaB serves (R9, Q4,
    issue 31)."""
    fleet.load(routing_scenario(defects={"alpha-a": STRAY}))
    board = BreakerBoard(BreakerConfig(consecutive_failures=1, open_for_s=60))
    router = make_router(fleet.base_url, fleet.key, breakers=board, listed=True,
                         catalog=routing_catalog(chat={"route_groups": ["text"]}))  # fmt: skip
    assert router.listings is not None
    await router.listings.refresh(["acme/alpha", "acme/beta"])
    for _ in range(2):
        result = await router.stream(chat_body(), workload="chat")
        await result.close()
        assert [a.provider for a in result.attempts] == ["AlphaA", "AlphaB"]
        assert [a.route_id for a in result.attempts] == ["alpha", "alpha"]
    assert [(r["tag"], _ignored(r)) for r in fleet.requests()] == [
        ("alpha-a", []), ("alpha-b", ["alpha-a"]),
        ("alpha-a", []), ("alpha-b", ["alpha-a"]),  # its circuit is open: the floor keeps it
    ]  # fmt: skip
    now = time.monotonic()
    assert board.status(provider_key("alpha", "AlphaA"), now, "chat") is CircuitStatus.OPEN
    assert board.status("alpha", now, "chat") is CircuitStatus.CLOSED


async def test_r13_without_a_listing_nothing_is_excluded(fleet: FleetHandle) -> None:
    """A router that has no listing of the model cannot name the provider's slug nor count
    the floor: it falls back by route, as before (R13)."""
    fleet.load(_three_providers({"alpha-a": STRAY}))
    router = make_router(fleet.base_url, fleet.key,
                         catalog=routing_catalog(chat={"route_groups": ["text"]}))  # fmt: skip
    result = await router.stream(chat_body(), workload="chat")
    await result.close()
    assert [a.route_id for a in result.attempts] == ["alpha", "beta"]
    assert result.attempts[0].provider == "AlphaA" and result.attempts[0].provider_tag is None


async def test_r9_r13_an_open_provider_circuit_is_probed_again_and_closes(
    fleet: FleetHandle,
) -> None:
    """After its open time, the provider's circuit lets one request reach it again (a
    half-open probe); the provider, fixed meanwhile, answers and its circuit closes (R9, R13)."""
    import asyncio

    fleet.load(_three_providers({"alpha-a": STRAY}))
    board = BreakerBoard(BreakerConfig(consecutive_failures=1, open_for_s=0.3))
    router = make_router(fleet.base_url, fleet.key, breakers=board, listed=True,
                         catalog=routing_catalog(chat={"route_groups": ["text"]}))  # fmt: skip
    assert router.listings is not None
    await router.listings.refresh(["acme/alpha", "acme/beta"])
    key = provider_key("alpha", "AlphaA")

    async def one() -> list[str]:
        result = await router.stream(chat_body(), workload="chat")
        # released and relayed to its end, or (whole before its start settled) judged whole
        if result.rest is not None:
            _ = [p async for p in result.rest]
        await result.close()
        from routing.outcomes import StreamEnd

        if result.finish is not None:
            await result.finish(StreamEnd.accepted())
        return [a.provider or "" for a in result.attempts]

    assert await one() == ["AlphaA", "AlphaB"]
    assert board.status(key, time.monotonic(), "chat") is CircuitStatus.OPEN
    assert await one() == ["AlphaB"]  # open: left out from the start
    fleet.load(_three_providers({}))  # AlphaA fixed
    await asyncio.sleep(0.35)
    fleet.clear_requests()
    assert await one() == ["AlphaA"]  # the half-open probe reached it
    assert [_ignored(r) for r in fleet.requests()] == [[]]
    assert board.status(key, time.monotonic(), "chat") is CircuitStatus.CLOSED
