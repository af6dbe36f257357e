"""Circuits judge routes, not clients (issue 10, SPEC R9): a client's own generation
parameters never count against a route, one workload's failures never open a circuit for
another, and the shipped example contracts agree with the local fleet."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from jsonschema import Draft202012Validator

from ground.settings import GatewayConfig
from routing.attribution import attribute, client_shaping
from routing.breaker import BreakerBoard, BreakerConfig, CircuitStatus
from routing.classify import Classification
from routing.errors import FailureClass
from routing.gateway import create_app
from routing.routes import DEFAULT_DIR, load_catalog
from routing.semantic import VALIDATORS
from tests.fixtures.fleet import FleetHandle
from tests.fixtures.routing import (
    ServedApp,
    chat_body,
    make_router,
    routing_catalog,
    routing_scenario,
)

KEY = "gw-scope-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
F = FailureClass


@pytest.mark.parametrize(
    ("body", "shaping"),
    [
        (chat_body(), ()),
        (chat_body(temperature=0.7, top_p=0.9, seed=3, user="u", stream=True), ()),
        (chat_body(stop=['"']), ("stop",)),
        (chat_body(logit_bias={"1": 100}, max_tokens=5), ("logit_bias", "max_tokens")),
        (chat_body(temperature=1.9), ("temperature",)),
        (chat_body(top_p=0.01, response_format={"type": "text"}), ("response_format", "top_p")),
        (chat_body(frobnicate=1, stop=None), ("frobnicate",)),
    ],
)
def test_r9_client_shaping_parameters(body: dict[str, object], shaping: tuple[str, ...]) -> None:
    """Stop sequences, logit bias, token limits, extreme temperatures and anything unknown
    shape the output; messages, ordinary temperature/top_p, seed and user do not (R9)."""
    assert client_shaping(body) == shaping


def test_r9_only_acceptance_rejections_are_attributed() -> None:
    """An invalid response is attributed to the client's parameters; HTTP, transport and
    capacity failures never are (R9)."""
    rejected = attribute(Classification(F.INVALID_RESPONSE, "malformed_json"), ("stop",))
    assert rejected.client_params == ("stop",)
    for cls in (F.CAPACITY, F.TRANSIENT, F.AMBIGUOUS, F.PERMANENT):
        assert attribute(Classification(cls, "x"), ("stop",)).client_params == ()
    assert attribute(Classification(F.INVALID_RESPONSE, "x"), ()).client_params == ()


async def test_r9_a_client_cannot_open_a_circuit_for_another_workload(fleet: FleetHandle) -> None:
    """Five classify requests with `stop: ['"']` cut every JSON reply (malformed_json) on
    every route; they fall back and fail, but open no circuit: afterwards chat and a plain
    classify request are served by the first route (R9)."""
    fleet.load(routing_scenario())
    board = BreakerBoard(BreakerConfig(consecutive_failures=2, open_for_s=60))
    router = make_router(
        fleet.base_url, fleet.key, breakers=board, catalog=routing_catalog(classify={"hedge_after_ms": None})
    )  # fmt: skip
    async with ServedApp(create_app(router, GatewayConfig(keys=[KEY]))) as s, httpx.AsyncClient(base_url=s.url) as http:  # fmt: skip
        for _ in range(5):
            r = await http.post(
                "/v1/chat/completions",
                json=chat_body("Classify: my invoice is wrong", stop=['"']),
                headers={**AUTH, "X-Workload": "classify"},
            )
            assert r.status_code == 502 and r.json()["error"]["reason"] == "malformed_json"
        chat = await http.post("/v1/chat/completions", json=chat_body(), headers=AUTH)
        plain = await http.post(
            "/v1/chat/completions",
            json=chat_body("Classify: my invoice is wrong"),
            headers={**AUTH, "X-Workload": "classify"},
        )
    assert chat.status_code == 200 and chat.headers["x-route"] == "alpha"
    assert plain.status_code == 200 and plain.headers["x-route"] == "alpha"
    now = time.monotonic()
    assert all(board.status(r, now) is CircuitStatus.CLOSED for r in ("alpha", "beta"))
    assert board.states == {} or all(
        s.status is CircuitStatus.CLOSED for s in board.states.values()
    )


async def test_r9_a_workloads_own_failures_open_only_its_own_circuits(fleet: FleetHandle) -> None:
    """alpha breaks every structured reply: classify's circuit on alpha opens (a genuine
    route failure, no client parameters), while chat's circuit on alpha stays closed and
    chat is still admitted there (R9)."""
    fleet.load(
        routing_scenario(
            defects={"alpha-a": [{"kind": "schema_break", "modes": ["missing_field"], "rate": 1.0}]}
        )
    )
    board = BreakerBoard(BreakerConfig(consecutive_failures=1, open_for_s=60))
    router = make_router(
        fleet.base_url, fleet.key, breakers=board, catalog=routing_catalog(classify={"hedge_after_ms": None})
    )  # fmt: skip
    result = await router.complete(chat_body("Classify: a refund"), workload="classify")
    assert result.route.id == "beta" and result.attempts[0].reason == "missing_field"
    now = time.monotonic()
    assert board.status("alpha", now, "classify") is CircuitStatus.OPEN
    assert board.status("alpha", now, "chat") is CircuitStatus.CLOSED
    assert board.admit("alpha", now, "chat") and not board.admit("alpha", now, "classify")
    board.release("alpha", now, "chat")
    fleet.clear_requests()
    await router.complete(chat_body(), workload="classify")
    assert [r["tag"] for r in fleet.requests()] == ["beta-a"]  # alpha suppressed for classify


def test_r1_shipped_schema_examples_pass_their_contracts() -> None:
    """Every example a shipped schema carries validates against it and passes the semantic
    check of each contract using it (the fleet serves these examples) (R1, R7)."""
    catalog = load_catalog(DEFAULT_DIR)
    checked = 0
    for contract in catalog.contracts.values():
        so = contract.structured_output
        if not so.schema_id:
            continue
        schema = catalog.schemas[so.schema_id]
        for example in schema.get("examples", []):
            assert not list(Draft202012Validator(schema).iter_errors(example)), example
            if contract.semantic is not None:
                check = VALIDATORS[contract.semantic.validator]
                assert check(example, contract.semantic.params) is None, example
            checked += 1
    assert checked >= 2


async def test_r1_the_shipped_invoice_contract_and_the_fleet_agree(fleet: FleetHandle) -> None:
    """The shipped catalog against the seed-incidents fleet: plain "hi" invoice requests are
    accepted without a semantic rejection, and no circuit opens, so chat is still served by
    its first route (R1, R7, R9)."""
    fleet.load("seed-incidents", time_scale=0.05, seed=0)
    board = BreakerBoard(BreakerConfig(consecutive_failures=3, open_for_s=60))
    router = make_router(
        fleet.base_url, fleet.key, breakers=board, catalog=load_catalog(DEFAULT_DIR)
    )
    for _ in range(6):
        result = await router.complete(chat_body("hi"), workload="invoice_extraction")
        assert json.loads(result.completion.content)["invoice_number"]
        assert not any((a.reason or "").startswith("invoice_") for a in result.attempts)
    chat = await router.complete(chat_body(), workload="chat")
    now = time.monotonic()
    assert all(s.status is CircuitStatus.CLOSED for s in board.states.values())
    assert chat.route.id == "llama-70b" and board.status("llama-70b", now) is CircuitStatus.CLOSED
