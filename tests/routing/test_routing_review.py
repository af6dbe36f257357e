"""Regression tests for the routing review findings, against the real fleet over loopback
(SPEC R2, R5, R6, R9): each one failed before its fix."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime

import httpx
import pytest

from ground.settings import GatewayConfig, RoutingConfig
from routing.breaker import BreakerBoard, BreakerConfig, CircuitStatus
from routing.capability import contract_misfit, estimate_needs
from routing.errors import DeadlineExhaustedError, PermanentRequestError, QuarantineNotLoadedError
from routing.exclusions import CachedIgnoreSource
from routing.gateway import create_app
from tests.fixtures.fleet import FleetHandle
from tests.fixtures.routing import (
    ServedApp,
    SleepRecorder,
    chat_body,
    make_router,
    routing_catalog,
    routing_scenario,
    served_tags,
)

TEXT_ONLY = {"route_groups": ["text"]}
CLASSIFY = {"messages": [{"role": "user", "content": "My card was charged twice, please help."}]}
TOOLS = {"messages": [{"role": "user", "content": "Open a ticket: the printer is on fire."}]}


async def _open_then_half_open(fleet: FleetHandle, board: BreakerBoard) -> None:
    """alpha fails once (circuit opens, threshold 1), then its open period elapses."""
    fleet.load(
        routing_scenario(faults={"alpha-a": [{"kind": "http_error", "status": 502, "first_n": 1}]})
    )
    router = make_router(
        fleet.base_url, fleet.key, breakers=board, catalog=routing_catalog(chat=TEXT_ONLY)
    )
    assert (await router.complete(chat_body(), workload="chat")).route.id == "beta"
    await asyncio.sleep(0.25)
    assert board.status("alpha", time.monotonic()) is CircuitStatus.HALF_OPEN


def _board() -> BreakerBoard:
    return BreakerBoard(
        BreakerConfig(consecutive_failures=1, open_for_s=0.2, half_open_max_probes=1)
    )


async def test_r9_r4_deadline_exhausted_request_does_not_keep_the_half_open_probe_slot(
    fleet: FleetHandle,
) -> None:
    """A request whose deadline cannot fit an attempt takes no probe slot, so the next request probes and closes alpha (R4, R9)."""
    board = _board()
    await _open_then_half_open(fleet, board)
    late = make_router(
        fleet.base_url,
        fleet.key,
        breakers=board,
        catalog=routing_catalog(chat={**TEXT_ONLY, "deadline_ms": 100}),
    )
    with pytest.raises(DeadlineExhaustedError):
        await late.complete(chat_body(), workload="chat")
    router = make_router(
        fleet.base_url, fleet.key, breakers=board, catalog=routing_catalog(chat=TEXT_ONLY)
    )
    assert (await router.complete(chat_body(), workload="chat")).route.id == "alpha"
    assert board.status("alpha", time.monotonic()) is CircuitStatus.CLOSED


async def test_r9_failing_or_cancelled_ignore_source_gives_the_probe_slot_back(
    fleet: FleetHandle,
) -> None:
    """An ignore source that raises, or a request cancelled while it waits, releases alpha's probe slot (R9)."""
    board = _board()
    await _open_then_half_open(fleet, board)

    async def broken(model: str, now: datetime) -> list[str]:
        raise RuntimeError("quarantine store down")

    hang = asyncio.Event()

    async def hanging(model: str, now: datetime) -> list[str]:
        await hang.wait()
        return []

    catalog = routing_catalog(chat=TEXT_ONLY)
    with pytest.raises(RuntimeError):
        await make_router(
            fleet.base_url, fleet.key, breakers=board, catalog=catalog, ignore_source=broken
        ).complete(chat_body(), workload="chat")
    task = asyncio.create_task(
        make_router(
            fleet.base_url, fleet.key, breakers=board, catalog=catalog, ignore_source=hanging
        ).complete(chat_body(), workload="chat")
    )
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    fleet.clear_requests()
    router = make_router(fleet.base_url, fleet.key, breakers=board, catalog=catalog)
    assert (await router.complete(chat_body(), workload="chat")).route.id == "alpha"
    assert served_tags(fleet.requests()) == ["alpha-a"]
    assert board.status("alpha", time.monotonic()) is CircuitStatus.CLOSED


async def test_r5_retry_after_honoured_once_per_route_then_fallback(fleet: FleetHandle) -> None:
    """A route that answers 429 + Retry-After every time gets one wait, then the healthy fallback serves (R2, R5)."""
    fleet.load(
        routing_scenario(
            faults={
                "alpha-a": [{"kind": "http_error", "status": 429, "retry_after_s": 1, "rate": 1.0}]
            }
        )
    )
    sleep = SleepRecorder()
    router = make_router(
        fleet.base_url, fleet.key, sleep=sleep, catalog=routing_catalog(chat=TEXT_ONLY)
    )
    result = await router.complete(chat_body(), workload="chat")
    assert result.route.id == "beta"
    assert sleep.waits == [1.0]
    assert served_tags(fleet.requests()) == ["alpha-a", "alpha-a", "beta-a"]
    assert result.attempts[-1].fallback_reason == "retry_after_repeated:rate_limit_exceeded"


async def test_r9_client_max_tokens_truncation_is_the_clients_and_opens_no_circuit(
    fleet: FleetHandle,
) -> None:
    """A reply cut by the client's own max_tokens is a permanent request failure: one upstream call, no circuit opens (R2, R9)."""
    fleet.load(routing_scenario())
    board = BreakerBoard(BreakerConfig(consecutive_failures=2))
    router = make_router(fleet.base_url, fleet.key, breakers=board)
    for _ in range(3):
        with pytest.raises(PermanentRequestError) as err:
            await router.complete({**CLASSIFY, "max_tokens": 1}, workload="classify")
        assert err.value.reason == "max_tokens_too_small"
    assert len(fleet.requests()) == 3
    now = time.monotonic()
    assert board.status("alpha", now) is board.status("beta", now) is CircuitStatus.CLOSED
    assert (await router.complete(CLASSIFY, workload="classify")).route.id == "alpha"


@pytest.mark.parametrize(
    ("workload", "extra"),
    [
        ("chat", {"tools": [{"type": "function", "function": {"name": "x", "parameters": {}}}],
                  "tool_choice": "required"}),
        ("tool_agent", {"tool_choice": "none"}),
        ("chat", {"functions": [{"name": "x"}], "function_call": "auto"}),
    ],
)  # fmt: skip
async def test_r9_r6_contract_owned_keys_refused_before_any_route_is_tried(
    fleet: FleetHandle, workload: str, extra: dict[str, object]
) -> None:
    """tools / tool_choice / functions / function_call belong to the contract: refused with a clear permanent error, no upstream call, no circuit touched (R6, R9); `n` other than 1: tests/routing/test_gateway_params.py."""
    fleet.load(routing_scenario())
    board = BreakerBoard(BreakerConfig(consecutive_failures=1))
    router = make_router(fleet.base_url, fleet.key, breakers=board)
    body = {**(TOOLS if workload == "tool_agent" else CLASSIFY), **extra}
    with pytest.raises(PermanentRequestError) as err:
        await router.complete(body, workload=workload)
    assert err.value.reason == "contract_owned_parameter"
    assert sorted(extra)[0] in err.value.message
    assert fleet.requests() == []
    assert board.states == {}


async def test_r6_tool_agent_always_sends_the_contracts_registered_tools(
    fleet: FleetHandle,
) -> None:
    """The upstream body of a tool workload carries exactly the contract's tools, never a client's (R6, R7)."""
    fleet.load(routing_scenario())
    catalog = routing_catalog()
    router = make_router(fleet.base_url, fleet.key, catalog=catalog)
    await router.complete(dict(TOOLS), workload="tool_agent")
    names = [t["function"]["name"] for t in fleet.requests()[0]["body"]["tools"]]
    assert names == [t.name for t in catalog.contract("tool_agent").tools]


@pytest.mark.parametrize("failure", ["raises", "hangs"])
async def test_r14_q7_unreadable_exclusion_store_refuses_rather_than_routes_without_it(
    fleet: FleetHandle, failure: str
) -> None:
    """A quarantine store that errors or hangs on the first fetch neither stalls the request
    nor lets it out with the built-in layer alone: it is refused (503 quarantine_not_loaded)
    within the wait, nothing reaches the upstream; once the store answers, its list is sent
    (R4, R6, R14, Q7)."""
    fleet.load(routing_scenario())
    up = asyncio.Event()

    async def store(model: str, now: datetime) -> list[str]:
        if up.is_set():
            return ["alpha-a"]
        if failure == "raises":
            raise ConnectionError("prefect api down")
        await asyncio.Event().wait()
        return []

    source = CachedIgnoreSource(store, RoutingConfig(ignore_fetch_timeout_s=0.1, ignore_wait_s=0.5))
    router = make_router(
        fleet.base_url, fleet.key, ignore_source=source, catalog=routing_catalog(chat=TEXT_ONLY)
    )
    async with asyncio.timeout(5):
        with pytest.raises(QuarantineNotLoadedError) as refused:
            await router.complete(chat_body(), workload="chat")
    assert refused.value.reason == "quarantine_not_loaded" and refused.value.http_status == 503
    assert "acme/alpha" in refused.value.message, refused.value.message
    assert fleet.requests() == [], "a request went upstream without the quarantine"
    up.set()
    async with asyncio.timeout(5):
        result = await router.complete(chat_body(), workload="chat")
    assert result.route.id == "alpha" and result.completion.provider == "AlphaB"
    assert fleet.requests()[0]["body"]["provider"]["ignore"] == ["alpha-a"]
    await source.aclose()


IMAGE_MSG = {
    "role": "user",
    "content": [
        {"type": "text", "text": "What is in this picture?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
    ],
}


def test_r1_contract_misfit_names_the_modality_outside_the_contract() -> None:
    """An image request against the text-only chat contract is a misfit naming 'modality'; the vision-capable invoice contract accepts it (R1)."""
    catalog = routing_catalog()
    body = {"messages": [IMAGE_MSG]}
    chat = catalog.contract("chat")
    invoice = catalog.contract("invoice_extraction")
    why = contract_misfit(chat, estimate_needs(chat, body))
    assert why is not None and why.startswith("modality:") and "image" in why
    assert contract_misfit(invoice, estimate_needs(invoice, body)) is None


async def test_r1_r2_image_to_text_only_contract_is_refused_not_routed_to_vision(
    fleet: FleetHandle,
) -> None:
    """An image sent to the text-only chat workload is a permanent request failure; no route (vision included) is called (R1, R2)."""
    fleet.load(routing_scenario())
    router = make_router(fleet.base_url, fleet.key)
    with pytest.raises(PermanentRequestError) as err:
        await router.complete({"messages": [IMAGE_MSG]}, workload="chat")
    assert err.value.reason == "modality"
    assert fleet.requests() == []


async def test_r2_provider_moderation_403_falls_back_without_opening_a_circuit(
    fleet: FleetHandle,
) -> None:
    """A provider's 403 moderation refusal is that route's policy: the router falls back to beta; no circuit opens (R2, R6, R9)."""
    fleet.load(
        routing_scenario(
            defects={
                t: [{"kind": "policy_filter", "modes": ["moderation_403"], "rate": 1.0}]
                for t in ("alpha-a", "alpha-b")
            }
        )
    )
    board = BreakerBoard(BreakerConfig(consecutive_failures=1))
    router = make_router(
        fleet.base_url, fleet.key, breakers=board, catalog=routing_catalog(chat=TEXT_ONLY)
    )
    result = await router.complete(chat_body(), workload="chat")
    assert result.route.id == "beta"
    assert [r["status"] for r in fleet.requests()] == [403, 200]
    assert result.attempts[0].failure_class == "route_incompatible"
    assert board.status("alpha", time.monotonic()) is CircuitStatus.CLOSED


async def test_r2_upstream_key_rejected_is_a_502_upstream_misconfiguration(
    fleet: FleetHandle,
) -> None:
    """Our own upstream key rejected (401) reaches the gateway client as 502 upstream_misconfigured, never as the client's 400 (R2)."""
    fleet.load(routing_scenario())
    router = make_router(fleet.base_url, "wrong-upstream-key")
    async with (
        ServedApp(create_app(router, GatewayConfig(keys=["gw"]))) as s,
        httpx.AsyncClient(base_url=s.url) as http,
    ):
        resp = await http.post(
            "/v1/chat/completions", json=chat_body(), headers={"Authorization": "Bearer gw"}
        )
    assert resp.status_code == 502
    assert resp.json()["error"]["failure_class"] == "upstream_misconfigured"
    assert [r["status"] for r in fleet.requests()] == [401]
