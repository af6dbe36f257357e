"""The capacity floor through a real gateway (issue 31, SPEC O8, Q4, R9, R13): what a request
may use is decided in one place (`routing.providers.allowance`), an ejection the floor
prevents is told as *suspect, kept for capacity*, a provider the floor keeps is avoided per
request while its failures stay its own, and a route pinned to one provider is never retried
without it. Real HTTP: the `openai` client -> the gateway -> the fleet, its endpoints listing
read by the router.

    acme/alpha   alpha-a (excluded by the operator: the quarantine's runtime layer),
                 alpha-b (cheapest of the two left: the fleet serves it first; defective),
                 alpha-c (healthy)
    acme/beta    beta-a
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import openai
import pytest

from ground.settings import GatewayConfig, PassiveConfig, RoutingConfig
from routing.breaker import BreakerBoard, BreakerConfig, CircuitOpened, CircuitStatus
from routing.events import EventLog
from routing.exclusions import static_source
from routing.gateway import create_app
from routing.providers import provider_key
from routing.records import SuspectRecord
from routing.router import Router
from tests.fixtures.fleet import FleetHandle
from tests.fixtures.routing import (
    FAST,
    ServedApp,
    ledger_rows,
    make_router,
    routes_table,
    routing_catalog,
    routing_scenario,
)

KEY = "gw-floor-key"
MODEL = "acme/alpha"
OPERATOR = static_source({MODEL: ["alpha-a"]})  # the merged quarantine list: a runtime exclusion
# These tests count answers, not attempt budgets: a first token is never cut before 5 s, and
# an attempt's total budget is twenty times its measured need (at the default two, a 300 ms
# budget cut a reply now and then on a busy two-core machine, and alpha had no fallback).
PATIENT = RoutingConfig(ttft_floor_s=5.0, budget_headroom=20.0)


def _scenario(defects: dict[str, list[dict[str, Any]]], *, spread: bool = False) -> dict[str, Any]:
    """acme/alpha with three providers, alpha-b cheaper than alpha-c (so served first), or,
    `spread`, priced alike and balanced by price as OpenRouter does (both serve first)."""
    scenario = routing_scenario(defects=defects)
    alpha = scenario["models"][0]
    price = "0.0000002" if spread else "0.0000003"
    alpha["endpoints"].append(
        {"tag": "alpha-c", "provider_name": "AlphaC", "timing": dict(FAST), "faults": [],
         "defects": defects.get("alpha-c", []),
         "pricing": {"prompt": price, "completion": "0.0000004"}}
    )  # fmt: skip
    if spread:
        alpha["load_balance"] = "price"
    return scenario


def _alpha_only() -> dict[str, Any]:
    """The route table with alpha alone in the chat workload's group: no other route to
    fall back to, so a request is answered only if alpha answers it."""
    groups = {"text": ["alpha"], "schema": ["alpha"], "tools": ["alpha"],
              "vision": ["vision"], "long_context": ["vision"]}  # fmt: skip
    return routes_table(groups=groups)


def _alpha_gateway(fleet: FleetHandle, board: BreakerBoard) -> Any:
    """The gateway over a router with alpha alone for chat (`_alpha_only`) and `board`."""
    router = _router(
        fleet, breakers=board,
        catalog=routing_catalog(_alpha_only(), chat={"route_groups": ["text"]}),
    )  # fmt: skip
    return create_app(router, GatewayConfig(keys=[KEY], events_flush_s=0.05))


async def _stream(client: openai.AsyncOpenAI) -> str:
    stream = await client.chat.completions.create(
        model="chat",
        messages=[{"role": "user", "content": "Continue the scene: the lantern flickers."}],
        stream=True,
    )
    return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])


async def _load(client: openai.AsyncOpenAI, n: int, concurrency: int = 4) -> list[str | Exception]:
    """`n` streaming chat requests, `concurrency` at a time: each reply's text, or the error."""
    out: list[str | Exception] = []
    left = list(range(n))

    async def worker() -> None:
        while left:
            left.pop()
            try:
                out.append(await _stream(client))
            except openai.APIError as exc:
                out.append(exc)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return out


def _router(fleet: FleetHandle, **kw: Any) -> Router:
    return make_router(
        fleet.base_url, fleet.key, listed=True, ignore_source=OPERATOR, config=PATIENT, **kw
    )


async def test_issue31_an_ejection_the_floor_prevents_is_told_as_kept_for_capacity(
    fleet: FleetHandle, ledger_url: str
) -> None:
    """The operator excludes AlphaA; AlphaB corrupts half its starts and becomes suspect.
    Ejecting it would leave AlphaC alone, below the floor of two: today the ejection book
    counted the other ejections only and said "ejected" (ledger, event, /metrics) while
    every request kept reaching AlphaB, because the per-request check counts the operator's
    exclusion and skipped the ejection. Now one decision: AlphaB is recorded as suspect,
    kept for capacity, everywhere, the alert for it fires, and it does serve."""
    fleet.load(_scenario({"alpha-b": [{"kind": "stray_start", "rate": 0.5}]}, spread=True))
    catalog = routing_catalog(_alpha_only(), chat={"route_groups": ["text"]})
    router = _router(fleet, events=EventLog(ledger_url), catalog=catalog)
    told: list[SuspectRecord] = []
    router.passive.announce = lambda record, reasons: told.append(record)
    app = create_app(router, GatewayConfig(keys=[KEY], events_flush_s=0.05))
    async with ServedApp(app) as s:
        client = openai.AsyncOpenAI(base_url=f"{s.url}/v1", api_key=KEY, max_retries=0)
        sent = 0
        while not told and sent < 200:
            await _load(client, 8)
            sent += 8
        assert told, f"AlphaB not suspect after {sent} requests"
        fleet.clear_requests()
        replies = await _load(client, 12)
        async with httpx.AsyncClient(base_url=s.url) as http:
            metrics = (await http.get("/metrics")).text
        await client.close()
    assert router.events is not None
    await router.events.aflush()
    rows = ledger_rows(ledger_url, "select provider, action from routing_suspects")
    served = [r["tag"] for r in fleet.requests()]
    assert rows and set(rows) == {("AlphaB", "kept_for_capacity")}, (
        f"ledger says {rows}; AlphaB served {served.count('alpha-b')} of the {len(served)}"
        " upstream requests after"
    )
    assert [(r.provider, r.action) for r in told] == [("AlphaB", "kept_for_capacity")]
    assert router.passive.ejections.ejected(MODEL, time.monotonic()) == []
    assert "alpha-b" in served and "alpha-a" not in served, f"served after: {served}"
    labels = f'model="{MODEL}",provider="AlphaB"'
    assert f"canary_router_provider_ejected{{{labels}}} 0.0" in metrics
    assert f"canary_router_provider_kept_for_capacity{{{labels}}} 1.0" in metrics
    assert f"canary_router_provider_ejections_total{{{labels}" not in metrics
    assert all(isinstance(r, str) and r.strip() for r in replies), replies


async def test_issue31_the_floor_never_drives_a_workload_dark(fleet: FleetHandle) -> None:
    """The operator excludes AlphaA, AlphaB fails a third of its starts, AlphaC is healthy,
    and alpha is the workload's only route. The floor keeps AlphaB allowed (leaving it out
    would leave one endpoint); each request it fails is retried on alpha without it, AlphaC
    answers, and its failures stay its own: every request is answered and alpha's circuit
    never opens (today a third of the requests failed and the route's circuit counted
    AlphaB's failures as the route's, 503 all_circuits_open)."""
    fleet.load(_scenario({"alpha-b": [{"kind": "stray_start", "rate": 0.34}]}))
    board = BreakerBoard()  # the production breaker settings
    app = _alpha_gateway(fleet, board)
    async with ServedApp(app) as s:
        client = openai.AsyncOpenAI(base_url=f"{s.url}/v1", api_key=KEY, max_retries=0)
        replies = await _load(client, 90)
        await client.close()
    failed = [r for r in replies if not isinstance(r, str)]
    assert not failed, f"{len(failed)} of {len(replies)} requests failed: {failed[:3]}"
    assert all(
        r.strip() and r.lstrip()[0] not in ",;:)]}.!?|" for r in replies if isinstance(r, str)
    )
    served = [r["tag"] for r in fleet.requests()]
    assert "alpha-a" not in served and served.count("alpha-b") >= 30, served
    retried = [r for r in fleet.requests() if r["tag"] == "alpha-c"]
    assert retried and all("alpha-b" in r["body"]["provider"]["ignore"] for r in retried)
    now = time.monotonic()
    assert board.status("alpha", now, "chat") is CircuitStatus.CLOSED
    assert not [
        e for e in board.log if e.route_id == "alpha" and isinstance(e.event, CircuitOpened)
    ]


async def test_issue31_the_route_circuit_opens_when_every_allowed_provider_fails(
    fleet: FleetHandle,
) -> None:
    """The other side of the rule: when AlphaB and AlphaC (every provider allowed) corrupt
    every start, their circuits open and then alpha's own circuit opens too."""
    stray = [{"kind": "stray_start", "rate": 1.0}]
    fleet.load(_scenario({"alpha-b": stray, "alpha-c": stray}))
    board = BreakerBoard(BreakerConfig(consecutive_failures=2, open_for_s=60))
    app = _alpha_gateway(fleet, board)
    async with ServedApp(app) as s:
        client = openai.AsyncOpenAI(base_url=f"{s.url}/v1", api_key=KEY, max_retries=0)
        replies = [r for _ in range(5) for r in await _load(client, 1, 1)]
        await client.close()
    now = time.monotonic()
    for name in ("AlphaB", "AlphaC"):
        assert board.status(provider_key("alpha", name), now, "chat") is CircuitStatus.OPEN
    assert board.status("alpha", now, "chat") is CircuitStatus.OPEN
    assert isinstance(replies[-1], openai.APIStatusError) and replies[-1].status_code == 503


@pytest.mark.parametrize(
    "pin", [{"only": ["alpha-a"]}, {"order": ["alpha-a"]}], ids=["only", "order"]
)
async def test_issue31_a_pinned_route_is_not_retried_without_its_provider(
    fleet: FleetHandle, pin: dict[str, Any]
) -> None:
    """A route pinned to AlphaA (`provider.only`, or `order` without fallbacks) whose start
    AlphaA corrupts: the next move is another route (beta), never the same route with its
    one provider in provider.ignore (today: the upstream answered 404, an attempt wasted)."""
    fleet.load(_scenario({"alpha-a": [{"kind": "stray_start", "rate": 1.0}]}))
    pinned = {"id": "alpha-pin", "model": MODEL, "provider": pin, "context_length": 8192,
              "latency_p50_ms": 50, "tools": True, "schema_modes": ["json_schema"]}  # fmt: skip
    groups = {"text": ["alpha-pin", "beta"], "schema": ["alpha"], "tools": ["alpha"],
              "vision": ["vision"], "long_context": ["vision"]}  # fmt: skip
    router = make_router(
        fleet.base_url, fleet.key, listed=True, config=PATIENT,
        catalog=routing_catalog(routes_table([pinned], groups), chat={"route_groups": ["text"]}),
    )  # fmt: skip
    app = create_app(router, GatewayConfig(keys=[KEY], events_flush_s=0.05))
    async with ServedApp(app) as s:
        client = openai.AsyncOpenAI(base_url=f"{s.url}/v1", api_key=KEY, max_retries=0)
        raw = await client.chat.completions.with_raw_response.create(
            model="chat", messages=[{"role": "user", "content": "Go on."}], stream=True
        )
        _ = [c async for c in raw.parse()]
        await client.close()
    assert (raw.headers["x-route"], raw.headers["x-attempts"]) == ("beta", "2")
    seen = [(r["tag"], r["status"]) for r in fleet.requests()]
    assert seen == [("alpha-a", 200), ("beta-a", 200)], f"upstream attempts: {seen}"


def test_issue31_one_allowance_decides_every_layer_and_the_floor() -> None:
    """The pure decision: the quarantine's list always; an ejection and an open circuit only
    above the floor (counted with the quarantine's list), else kept and named; the request's
    own exclusion whenever the route keeps a provider, never emptying a pinned route; and
    the ejection book asks the same function (so it says kept where a request would)."""
    from routing.ejection import EjectionBook, Held
    from routing.providers import ListedEndpoint, allowance

    eps = [ListedEndpoint(f"alpha-{x}", f"Alpha{x.upper()}") for x in "abc"]
    free = allowance(eps, fixed=[], floor=2, ejected=["AlphaB"], excluded=["alpha-c"])
    assert free.ignore == ("alpha-b", "alpha-c") and free.providers == ("AlphaA", "AlphaC")
    assert free.kept == () and free.taken == (("ejected", "AlphaB", ("alpha-b",)),)
    operator = allowance(
        eps, fixed=["alpha-a"], floor=2, ejected=["AlphaB"], open_circuits=["AlphaC"],
        excluded=["alpha-b"],
    )  # fmt: skip
    assert operator.kept == (("ejected", "AlphaB"), ("circuit_open", "AlphaC"))
    assert operator.ignore == ("alpha-a", "alpha-b")  # the request's own exclusion only
    assert operator.providers == ("AlphaB", "AlphaC")
    pin = allowance(eps, fixed=[], floor=2, route={"only": ["alpha-a"]}, excluded=["alpha-a"])
    assert pin.ignore == ()  # never the route's one provider
    book = EjectionBook(PassiveConfig(max_ejected_share=1.0), floor=2)
    assert book.decide(MODEL, "AlphaB", "start", eps, 0.0, fixed=["alpha-a"]) is Held.FLOOR
    assert book.kept(MODEL) == {"alphab"} and book.ejected(MODEL, 0.0) == []
