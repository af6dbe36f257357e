"""Attempt budgets against real upstreams (SPEC R4, R13): the fleet over loopback HTTP, the
hostile upstream for a stall, the events in real SQLite.

The headline case is the canary's own: a first token after ten seconds must not eat an 8 s
deadline; the fallback answers within it, and every attempt event carries its budgets.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time

import pytest
from pydantic import SecretStr

from ground.settings import Allowances, RoutingConfig
from routing.errors import AmbiguousCompletionError, FailureClass
from routing.events import EventLog
from routing.exclusions import static_source
from routing.listing import ListingBook
from routing.router import Router
from routing.routes import DEFAULT_DIR, load_catalog
from routing.upstream import Upstream
from tests.fixtures.fleet import FleetHandle
from tests.fixtures.hostile import Hostile, chunk, data_line, sse_reply
from tests.fixtures.routing import (
    chat_body,
    make_router,
    routing_catalog,
    routing_scenario,
    served_tags,
)

SLOW_ALPHA = {"alpha-a": [{"kind": "slow_first_token", "ttft_s": 100, "rate": 1.0}]}  # 10 s
TOOLS = {"messages": [{"role": "user", "content": "Open a ticket: the printer is on fire."}]}


def _columns(ledger_url: str, table: str) -> list[dict[str, object]]:
    with sqlite3.connect(ledger_url.removeprefix("sqlite:///")) as db:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute(f"SELECT * FROM {table} ORDER BY id")]


async def test_r13_8s_deadline_first_token_after_10s_the_fallback_answers_in_time(
    fleet: FleetHandle, ledger_url: str
) -> None:
    """The primary's first token would come after 10 s: its first-token budget cuts it
    (slow_first_token, the route's), the fallback answers, all within the 8 s deadline; the
    attempt events in SQLite carry the budgets (4.5 s, its first-token cut, 3.2 s kept) (R13)."""
    fleet.load(routing_scenario(faults=SLOW_ALPHA))
    events = EventLog(ledger_url)
    router = make_router(
        fleet.base_url, fleet.key, events=events, allowances=Allowances(), sleep=asyncio.sleep,
        catalog=routing_catalog(invoice_extraction={"route_groups": ["schema"]}),
    )  # fmt: skip
    started = time.monotonic()
    result = await router.complete(chat_body("Invoice A-1: 30 EUR"), workload="invoice_extraction")
    elapsed = time.monotonic() - started
    assert result.route.id == "beta" and elapsed < 8.0
    first, second = result.attempts
    assert (first.route_id, first.failure_class) == ("alpha", FailureClass.SLOW_FIRST_TOKEN)
    assert first.reason == "slow_first_token" and first.ttft_ms is None
    assert first.budget_ms is not None and 4400 < first.budget_ms <= 4500
    assert first.kept_ms == 3200.0 and first.ttft_budget_ms == 1000.0  # the floor
    assert second.budget_ms is not None and second.budget_ms > 6000  # the rest: no cut kept
    assert second.ttft_budget_ms is None and second.validation == "accepted"
    assert 0.95 < first.latency_ms / 1000 < 3.0  # cut at its first-token budget (1 s)
    await events.aflush()
    rows = _columns(ledger_url, "routing_attempts")
    assert [(r["route_id"], r["ttft_budget_ms"], r["kept_ms"]) for r in rows] == [
        ("alpha", 1000.0, 3200.0),
        ("beta", None, 0.0),
    ]
    assert all(r["budget_ms"] for r in rows) and rows[0]["request_id"] == rows[1]["request_id"]
    events.close()


async def test_r13_the_last_attempt_gets_the_rest_and_no_first_token_cut(
    fleet: FleetHandle,
) -> None:
    """With one route and no other provider there is no fallback to keep time for: the
    attempt may use everything but the reserve, with no first-token cut (R4, R13)."""
    fleet.load(routing_scenario())
    groups = {"text": ["alpha", "beta"], "schema": ["alpha"], "tools": ["alpha", "beta"],
              "vision": ["vision"], "long_context": ["vision"]}  # fmt: skip
    from tests.fixtures.routing import routes_table

    router = make_router(
        fleet.base_url, fleet.key, allowances=Allowances(),
        catalog=routing_catalog(routes_table(groups=groups), invoice_extraction={"route_groups": ["schema"]}),
    )  # fmt: skip
    result = await router.complete(chat_body("Invoice A-1: 30 EUR"), workload="invoice_extraction")
    [only] = result.attempts
    assert only.kept_ms == 0.0 and only.ttft_budget_ms is None
    assert only.budget_ms is not None and 7600 < only.budget_ms <= 7700


async def test_r13_measured_latency_sizes_the_budget(fleet: FleetHandle) -> None:
    """After enough outcomes the primary's budget is its own measured percentile times the
    headroom, not the whole room (R13)."""
    fleet.load(routing_scenario())
    router = make_router(fleet.base_url, fleet.key, allowances=Allowances(),
                         catalog=routing_catalog(classify={"hedge_after_ms": None, "semantic": None}))  # fmt: skip
    body = {"messages": [{"role": "user", "content": "My card was charged twice."}]}
    results = [await router.complete(body, workload="classify") for _ in range(7)]
    cold, warm = results[0].attempts[0], results[-1].attempts[0]
    assert cold.budget_ms is not None and warm.budget_ms is not None
    assert cold.budget_ms > 2500  # 5 s deadline: room less the 2 s kept (share 0.4)
    measured = max(a.attempts[0].latency_ms for a in results[:-1])
    assert 700 <= warm.budget_ms <= max(700.0, 2 * measured) + 1  # at least the allowances


async def test_r13_r8_a_slow_first_token_on_side_effect_tools_is_ambiguous_and_not_replayed(
    fleet: FleetHandle,
) -> None:
    """tool_agent's create_ticket has side effects: a first token that never came after the
    upstream took the request is ambiguous there, and nothing is replayed (R2, R8, R13)."""
    fleet.load(routing_scenario(faults=SLOW_ALPHA))
    router = make_router(fleet.base_url, fleet.key, allowances=Allowances(), sleep=asyncio.sleep)
    with pytest.raises(AmbiguousCompletionError) as err:
        await router.complete(TOOLS, workload="tool_agent")
    assert err.value.reason == "slow_first_token"
    assert served_tags(fleet.requests()) == ["alpha-a"]


async def test_r13_a_stall_before_release_is_cut_and_falls_back(hostile: Hostile) -> None:
    """A stream that started and then stops sending, before anything was released, is cut
    by the stall timeout (not the deadline) and the next attempt answers (R13)."""
    calls = {"n": 0}

    def handler(req: object) -> object:
        calls["n"] += 1
        if calls["n"] == 1:  # a start after 1 s, then nothing for 1 s (the stall timeout: 0.3 s)
            return sse_reply([data_line(chunk("The lantern")), data_line(chunk(" flickers"))],
                             pause_s=1.0)  # fmt: skip
        return sse_reply([data_line(chunk("The lantern flickers.")),
                          data_line({**chunk(""), "choices": [{"index": 0, "delta": {},
                                                               "finish_reason": "stop"}]}),
                          b"data: [DONE]\n\n"])  # fmt: skip

    hostile.handler = handler  # type: ignore[assignment]
    config = RoutingConfig(stall_timeout_s=0.3, ttft_floor_s=5.0)
    router = Router(
        routing_catalog(), Upstream(hostile.base_url, None), ignore_source=static_source(),
        config=config, allowances=Allowances(),
    )  # fmt: skip
    started = time.monotonic()
    result = await router.complete(chat_body(), workload="chat")
    assert time.monotonic() - started < 1.9  # the first reply's second part came at 2 s
    first = result.attempts[0]
    assert (first.failure_class, first.reason) == (FailureClass.AMBIGUOUS, "stream_stalled")
    assert result.attempts[-1].validation == "accepted"


async def test_r13_the_seed_incidents_split_for_an_8_s_deadline(fleet: FleetHandle) -> None:
    """The shipped contracts on the seed-incidents fleet, its listing read, the defaults:
    invoice_extraction (8 s) keeps 3.2 s for one fallback and gives the primary up to 4.5 s
    (300 ms reserved) while nothing is measured; once measured, the primary gets its own
    percentile times the headroom. Printed for the record (`pytest -s`) (R13)."""
    fleet.load("seed-incidents", time_scale=1.0, seed=0)
    upstream = Upstream(fleet.base_url, SecretStr(fleet.key))
    listings = ListingBook(upstream)
    catalog = load_catalog(DEFAULT_DIR)
    assert await listings.refresh(r.model for r in catalog.routes.routes) == 3
    router = Router(catalog, upstream, ignore_source=static_source(), listings=listings)
    body = chat_body("Invoice INV-7: two items, 10 EUR and 20 EUR, total 30 EUR.")
    attempts = [(await router.complete(body, workload="invoice_extraction")).attempts[0]
                for _ in range(8)]  # fmt: skip
    cold, warm = attempts[0], attempts[-1]
    for label, a in (("cold", cold), ("warm", warm)):
        print(f"\n8 s invoice_extraction, {label}: reserve 300 ms, primary {a.route_id}"
              f" budget {a.budget_ms:.0f} ms (first token {a.ttft_budget_ms} ms),"
              f" kept for the fallback {a.kept_ms:.0f} ms")  # fmt: skip
    assert cold.kept_ms == 3200.0 and cold.budget_ms is not None
    assert 4400 < cold.budget_ms <= 4500
    assert warm.kept_ms == 3200.0 and warm.budget_ms is not None and warm.budget_ms < 4500
    await upstream.aclose()


async def test_r13_a_tool_call_is_a_first_token(hostile: Hostile) -> None:
    """A reply of tool calls only has no content: its first tool-call delta meets the
    first-token budget (a tool call at 0.6 s, the end at 1.2 s, a 1 s first-token cut) (R13)."""
    call = {"index": 0, "id": "call_1", "type": "function",
            "function": {"name": "lookup_order", "arguments": '{"order_id": "A-1"}'}}  # fmt: skip
    tool_delta = {**chunk(""), "choices": [{"index": 0, "delta": {"tool_calls": [call]},
                                            "finish_reason": None}]}  # fmt: skip
    end = {**chunk(""), "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
    hostile.handler = lambda req: sse_reply(
        [data_line(tool_delta), data_line(end) + b"data: [DONE]\n\n"], pause_s=0.6
    )
    router = Router(
        routing_catalog(), Upstream(hostile.base_url, None), ignore_source=static_source(),
        allowances=Allowances(),
    )  # fmt: skip
    result = await router.complete(TOOLS, workload="tool_agent")
    [only] = result.attempts
    assert only.ttft_budget_ms == 1000.0 and only.validation == "accepted"
    assert [c.name for c in result.completion.tool_calls] == ["lookup_order"]
