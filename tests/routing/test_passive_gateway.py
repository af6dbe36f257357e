"""Production traffic as evidence through a real gateway (SPEC O8): real HTTP to the fleet
(four providers of one model, load-balanced by price as OpenRouter does), streaming chat
traffic, the fleet switched at runtime so one provider starts corrupting 30% of its reply
starts (below what its circuit breaker opens for). The gateway marks it suspect and ejects
it within a stated number of requests; later requests leave it out; /metrics and the ledger
show it. Under clean traffic no provider is ever suspect.

    acme/alpha   alpha-a .. alpha-d (one price: the fleet spreads them evenly)
    acme/beta    beta-a (the contract's fallback route)
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
from sqlalchemy import select

from ground.db import open_engine
from ground.settings import GatewayConfig, RoutingConfig
from routing.events import AttemptEvent, EventLog, SuspectEvent
from routing.gateway import create_app
from routing.router import Router
from tests.fixtures.fleet import FleetHandle
from tests.fixtures.routing import FAST, ServedApp, chat_body, make_router, routing_catalog

KEY = "gw-passive-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
MODEL = "acme/alpha"
TAGS = ("alpha-a", "alpha-b", "alpha-c", "alpha-d")
# the defect starts, then the gateway ejects within this many requests (issue 25, measured:
# 60-110 on an idle two-core machine, AlphaB serving a quarter of them; more on a busy one)
EJECT_WITHIN = 400
# These tests count the replies the passive window judges, not the attempt budgets: a first
# token is never cut before 5 s (the default floor, 1 s, cut about half of the clean test's
# first tokens on a busy two-core machine, and those requests fell back to beta unjudged).
PATIENT = RoutingConfig(ttft_floor_s=5.0)


def _endpoint(tag: str, defects: list[dict[str, Any]]) -> dict[str, Any]:
    name = "".join(part.title() for part in tag.split("-"))
    return {"tag": tag, "provider_name": name, "timing": dict(FAST), "faults": [],
            "defects": defects, "pricing": {"prompt": "0.0000002", "completion": "0.0000004"}}  # fmt: skip


def spread_scenario(defects: dict[str, list[dict[str, Any]]] | None = None) -> dict[str, Any]:
    """Four equal providers of acme/alpha behind the fleet's price balancing, and beta."""
    d = defects or {}
    alpha = [_endpoint(t, d.get(t, [])) for t in TAGS]
    return {
        "name": "passive", "seed": 5, "time_scale": 0.1,
        "models": [
            {"id": MODEL, "context_length": 8192, "load_balance": "price", "endpoints": alpha},
            {"id": "acme/beta", "context_length": 131072, "endpoints": [_endpoint("beta-a", [])]},
        ],
    }  # fmt: skip


async def _one(http: httpx.AsyncClient) -> None:
    async with http.stream(
        "POST", "/v1/chat/completions", json=chat_body(stream=True), headers=AUTH
    ) as resp:
        assert resp.status_code == 200
        async for _ in resp.aiter_lines():
            pass


async def load(http: httpx.AsyncClient, n: int, concurrency: int = 4) -> None:
    """`n` streaming chat requests through the gateway, `concurrency` at a time."""
    queue = list(range(n))

    async def worker() -> None:
        while queue:
            queue.pop()
            await _one(http)

    await asyncio.gather(*(worker() for _ in range(concurrency)))


def _router(fleet: FleetHandle, ledger_url: str) -> Router:
    return make_router(
        fleet.base_url, fleet.key, listed=True, events=EventLog(ledger_url),
        catalog=routing_catalog(chat={"route_groups": ["text"]}), config=PATIENT,
    )  # fmt: skip


def _ejected(router: Router) -> list[str]:
    return [e.provider for e in router.passive.ejections.ejected(MODEL, time.monotonic())]


async def test_o8_a_provider_that_starts_corrupting_starts_is_ejected_within_the_stated_requests(
    fleet: FleetHandle, ledger_url: str
) -> None:
    """Clean traffic first; then AlphaB corrupts 30% of its starts. The gateway's start check
    keeps every reply clean for the client (the request goes to another provider), AlphaB's
    circuit stays closed, and within EJECT_WITHIN requests AlphaB is suspect and ejected:
    the next requests carry alpha-b in provider.ignore and none reaches it; /metrics shows
    the failures by reason, the ejection and the states; the ledger holds the ejection with
    its numbers and each attempt's verdict as evidence."""
    fleet.load(spread_scenario())
    router = _router(fleet, ledger_url)
    app = create_app(router, GatewayConfig(keys=[KEY], events_flush_s=0.05))
    async with ServedApp(app) as s, httpx.AsyncClient(base_url=s.url, timeout=30) as http:
        await load(http, 40)
        assert _ejected(router) == []
        fleet.load(spread_scenario({"alpha-b": [{"kind": "stray_start", "rate": 0.3}]}))
        sent = 0
        while not _ejected(router) and sent < EJECT_WITHIN:
            await load(http, 4)
            sent += 4
        assert _ejected(router) == ["AlphaB"], f"not ejected after {sent} requests"
        fleet.clear_requests()
        await load(http, 20)
        metrics = (await http.get("/metrics")).text
    served = fleet.requests()
    assert served and all(r["tag"] != "alpha-b" for r in served)
    assert all("alpha-b" in r["body"]["provider"]["ignore"] for r in served)
    labels = f'model="{MODEL}",provider="AlphaB"'
    assert f"canary_router_provider_ejected{{{labels}}} 1.0" in metrics
    assert f"canary_router_provider_suspect{{{labels}}} 1.0" in metrics
    assert f'canary_router_provider_ejections_total{{{labels},reason="start"}} 1.0' in metrics
    assert f'canary_router_passive_failures_total{{{labels},reason="start"}}' in metrics
    assert f'canary_router_provider_suspect{{model="{MODEL}",provider="AlphaA"}} 0.0' in metrics
    engine = open_engine(ledger_url)
    with engine.connect() as conn:
        rows = list(conn.execute(select(SuspectEvent.__table__)))  # type: ignore[attr-defined]
        a = AttemptEvent.__table__.c  # type: ignore[attr-defined]
        verdicts = list(conn.execute(select(a.provider, a.passive).where(a.provider == "AlphaB")))
    engine.dispose()
    assert [(r.provider, r.provider_tag, r.reason, r.action, r.times) for r in rows] == [
        ("AlphaB", "alpha-b", "start", "ejected", 1)
    ]
    row = rows[0]
    assert row.host_n >= 20 and row.host_k / row.host_n >= 0.15 and row.peers_k == 0
    assert row.until is not None and row.evidence.endswith(f"peers 0 of {row.peers_n}")
    assert {v.passive for v in verdicts} == {"ok", "start"}
    print(f"\nejected after {sent} requests since the defect started: {row.evidence}")


async def test_o8_clean_traffic_marks_no_provider_suspect(
    fleet: FleetHandle, ledger_url: str
) -> None:
    """600 clean streaming requests spread over four providers: no suspect, no ejection,
    every provider's suspect gauge 0 (the real-gateway half of the false-positive count;
    the 10,000-request simulation is in test_passive_simulation.py)."""
    fleet.load(spread_scenario())
    router = _router(fleet, ledger_url)
    app = create_app(router, GatewayConfig(keys=[KEY], events_flush_s=0.05))
    async with ServedApp(app) as s, httpx.AsyncClient(base_url=s.url, timeout=30) as http:
        await load(http, 600, concurrency=8)
        metrics = (await http.get("/metrics")).text
    now = time.monotonic()
    figures = router.passive.book.figures(MODEL, now)
    assert set(figures) == {"AlphaA", "AlphaB", "AlphaC", "AlphaD"}
    # every reply judged (a reply the start check refused went to another provider, judged too)
    assert sum(f.replies for f in figures.values()) >= 500
    assert router.passive.book.suspects(MODEL, now) == {} and _ejected(router) == []
    assert "canary_router_provider_suspect" in metrics and " 1.0" not in "\n".join(
        line for line in metrics.splitlines() if line.startswith("canary_router_provider_suspect")
    )
