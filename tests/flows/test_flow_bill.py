"""The canary's own bill through real rounds (SPEC C13): a round over the seed-incidents fleet
costs the fleet's prices times the tokens it served; a budget below the day's forecast
degrades the next rounds in the documented order and alerts, keeping the seed's cases
decidable; a budget the round cannot afford freezes it with the reason `budget`; `canary
status` shows the day's spend and forecast. Real fleet over loopback, Prefect's test
harness, real SQLite."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prefect import get_client
from prefect.events.filters import EventFilter, EventNameFilter
from typer.testing import CliRunner

from canary.cli import app
from fleet.scenario import load_scenario
from flows import tasks
from flows.budget import round_budget
from flows.canary_round import RoundSummary, canary_round
from flows.roundplan import plan_round
from ground.settings import load_settings
from probes.rotation import tool_requests
from quarantine.adapters.ledger import Ledger
from quarantine.adapters.store import aload_state
from quarantine.budget import BudgetLevel, rotation_plan, round_usd
from tests.fixtures.canary_env import SEED_MODEL, STRAY, TIME_SCALE, endpoint, load_model
from tests.fixtures.fleet import FleetHandle

HALF_HOUR = timedelta(minutes=30)
DEFECTIVE = {"flaky/fp8", "slowpoke/bf16", "policywall/fp8", "filterctl/fp8", "mojibake/fp8",
             "schemabreak/fp8", "startcorrupt/fp8", "mixhost/fp8"}  # fmt: skip


def _seed_as(fleet: FleetHandle, model: str) -> None:
    """Serve the seed-incidents fleet's endpoints (prices, defects, timing) under a model
    id of this test's own: quarantine state lives in the session's Prefect, and rounds of the
    seed model at other logical times would close its slots for the seed's own test."""
    scenario = load_scenario("seed-incidents").model_dump(mode="json")
    [seed] = [m for m in scenario["models"] if m["id"] == SEED_MODEL]
    fleet.load({**scenario, "models": [{**seed, "id": model}]}, time_scale=TIME_SCALE, seed=0)


def _today() -> datetime:
    """Midnight (UTC) of today: `canary status` shows today's bill."""
    return datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


async def _round(model: str, at: datetime) -> RoundSummary:
    summary = await canary_round(model=model, mode="enforce", at=at, allow_future=True)
    assert isinstance(summary, RoundSummary)
    return summary


async def _cli(*args: str) -> Any:
    return await asyncio.to_thread(CliRunner().invoke, app, list(args))


async def _events(name: str, model: str, wanted: int) -> list[Any]:
    mine: list[Any] = []
    for _ in range(150):
        async with get_client() as client:
            page = await client.read_events(
                EventFilter(event=EventNameFilter(name=[name])), limit=50
            )
        mine = [e for e in page.events if e.resource.get("canary.model") == model]
        if len(mine) >= wanted:
            return mine
        await asyncio.sleep(0.1)
    return mine


def _served(fleet: FleetHandle, model: str) -> list[dict[str, Any]]:
    return [r for r in fleet.requests() if r["model"] == model]


@pytest.mark.slow
async def test_c13_a_seed_round_costs_the_fleets_prices_times_the_tokens_it_served(
    canary_env: FleetHandle,
) -> None:
    """C13: one round over the seed-incidents fleet: every request the fleet served is
    billed, the cost from usage equals (to the cent, and to a billionth of a dollar) the
    scenario's listed prices times the tokens the fleet reported, the probes without usage
    (cut or too slow) are priced by estimate and marked, and the ledger holds the same."""
    model = "test/bill-seed"
    _seed_as(canary_env, model)
    at = datetime(2026, 11, 10, tzinfo=UTC)
    canary_env.clear_requests()
    summary = await _round(model, at)
    served = _served(canary_env, model)
    bill = summary.bill
    total = bill["total"]
    spec = load_scenario("seed-incidents").model(SEED_MODEL)
    assert spec is not None
    assert total["requests"] == len(served)
    assert len(bill["endpoints"]) == len(spec.endpoints)  # the control too
    prices = {e.tag: e.pricing for e in spec.endpoints}
    expected = sum(
        b["prompt_tokens"] * float(prices[tag].prompt)
        + b["completion_tokens"] * float(prices[tag].completion)
        + (b["requests"] - b["estimated_requests"]) * float(prices[tag].request)
        for tag, b in bill["endpoints"].items()
    )
    measured = total["usd"] - total["estimated_usd"]
    assert round(measured, 2) == round(expected, 2) and abs(measured - expected) < 1e-9
    estimated = {tag for tag, b in bill["endpoints"].items() if b["estimated_requests"]}
    assert estimated <= DEFECTIVE, estimated  # cut, too slow or filtered: no usage chunk
    assert bill["endpoints"]["deepinfra/fp8"]["estimated_requests"] == 0
    ledger = Ledger(load_settings().resolved_ledger_url)
    try:
        rounds, costs = ledger.rounds_frame(model), ledger.costs_frame(model)
    finally:
        ledger.close()
    assert len(rounds) == 1 and rounds["cost_usd"].iloc[0] == pytest.approx(total["usd"])
    assert len(costs) == len(spec.endpoints) and costs["requests"].sum() == total["requests"]
    day = total["usd"] * 48
    print(
        f"\nseed-incidents round at the default settings: ${total['usd']:.4f} for "
        f"{total['requests']} requests ({total['prompt_tokens']} prompt + "
        f"{total['completion_tokens']} completion tokens, ${total['estimated_usd']:.4f} "
        f"estimated); per model and day at 48 rounds: ${day:.2f}"
    )
    await _print_levels(model, at)


async def _print_levels(model: str, at: datetime) -> None:
    """The estimated day at each degrade level, from the state's tokens per request and the
    listing's prices (what the budget compares with)."""
    settings, state = load_settings(), await aload_state(model)
    plan = plan_round(model, at, await tasks.discover_endpoints.fn(model),
                      locales=settings.locales, controls=settings.control_providers)  # fmt: skip
    probe, minimum = settings.probe, settings.budget.min_start_samples
    levels = {
        f"{s} start samples": round_usd(plan.targets, state.bill, probe, s)
        for s in range(probe.start_samples, minimum - 1, -1)
    }
    rotation = rotation_plan(plan.targets, plan.controls, 0, {}, minimum, probe)
    levels["rotated"] = round_usd(plan.targets, state.bill, probe, minimum, rotation)
    print("estimated per model and day (48 rounds): " + ", ".join(
        f"{name} ${usd * 48:.2f}" for name, usd in levels.items()))  # fmt: skip


@pytest.mark.slow
async def test_c13_a_budget_below_the_forecast_degrades_then_freezes_and_alerts(
    canary_env: FleetHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """C13 over the seed-incidents fleet: a budget below the day's forecast makes the next
    round send fewer start samples (an alert, `canary.budget.degraded`) and the
    start-corrupting host is still suspended at its second failing round; a budget below
    what is spent freezes the next round with the reason `budget`: nothing is probed, no
    streak moves, the run says so (Completed with warnings) and alerts
    (`canary.budget.frozen`). `canary status` shows the day's spend, forecast and budget."""
    model = "test/bill-budget"
    _seed_as(canary_env, model)
    t0 = _today()
    first = await _round(model, t0)
    spent = first.bill["total"]["usd"]
    assert first.budget["level"] == "full" and first.budget["reason"] == "no daily budget set"
    # between the forecasts at 5 and 4 start samples, from the budget's own estimates: the
    # tools contract (26 of an endpoint's 35 requests, issue 22) is not cut by fewer start
    # samples, so a budget a fixed share below the day's spend may skip straight to rotating
    settings, state = load_settings(), await aload_state(model)
    discovered = await tasks.discover_endpoints.fn(model)
    targets = plan_round(model, t0 + HALF_HOUR, discovered, locales=settings.locales,
                         controls=settings.control_providers).targets  # fmt: skip
    five, four = (round_usd(targets, state.bill, settings.probe, s) for s in (5, 4))
    budget = spent + 47 * (five + four) / 2
    monkeypatch.setenv("CANARY_DAILY_BUDGET_USD", f"{budget:.6f}")
    canary_env.clear_requests()
    second = await _round(model, t0 + HALF_HOUR)
    assert second.budget["level"] == "fewer_starts", second.budget
    samples = second.budget["start_samples"]
    assert load_settings().budget.min_start_samples <= samples < 6
    per_endpoint: dict[str, int] = {}
    for r in _served(canary_env, model):
        per_endpoint[r["tag"]] = per_endpoint.get(r["tag"], 0) + 1
    tools = tool_requests(load_settings().probe)  # the tools contract's requests (issue 22)
    assert per_endpoint["deepinfra/fp8"] == 3 + samples + tools  # language, refusal, structured
    assert ("suspended", "startcorrupt/fp8") in {(d["kind"], d["tag"]) for d in second.decisions}
    [degraded] = await _events("canary.budget.degraded", model, wanted=1)
    assert degraded.payload["level"] == "fewer_starts"

    out = await _cli("status", "--model", model, "--json")
    assert out.exit_code == 0, out.output
    bill = json.loads(out.output)["bill"]
    assert bill["rounds"] == 2 and bill["spent_usd"] > spent and bill["level"] == "fewer_starts"
    assert bill["budget_usd"] == pytest.approx(budget) and bill["rounds_per_day"] == 48
    # the forecast is the last round's cost for each round still scheduled today: none
    # after 23:30 UTC, when `canary status` (the wall clock's day) forecasts what is spent
    left = bill["rounds_left"]
    assert left >= 0 and bill["last_round_usd"] > 0
    assert bill["forecast_usd"] == pytest.approx(bill["spent_usd"] + bill["last_round_usd"] * left)
    text = " ".join((await _cli("status", "--model", model)).output.split())
    assert f"bill {t0.date()}: spent $" in text and "forecast $" in text

    before = await aload_state(model)
    monkeypatch.setenv("CANARY_DAILY_BUDGET_USD", f"{bill['spent_usd'] * 0.9:.6f}")
    canary_env.clear_requests()
    run = await canary_round(
        model=model, mode="enforce", at=t0 + 2 * HALF_HOUR, allow_future=True, return_state=True
    )  # like `_round`: 01:00 today is ahead of the wall clock in the first half-hour UTC
    assert run.is_completed() and run.name == "Completed with warnings", run
    assert "round frozen (budget)" in (run.message or "")
    third = await run.aresult()
    assert isinstance(third, RoundSummary)
    assert _served(canary_env, model) == []  # nothing probed
    assert {v for _t, _l, v, _w in third.endpoints} == {"frozen"}
    assert third.budget["level"] == "frozen" and third.bill["total"]["requests"] == 0
    after = await aload_state(model)
    assert after.revision == before.revision + 1 and after.bill is not None
    assert after.bill.frozen_rounds == 1
    for tag, ps in before.providers.items():
        assert after.providers[tag].consecutive_failed_rounds == ps.consecutive_failed_rounds
        assert after.providers[tag].consecutive_clean_rounds == ps.consecutive_clean_rounds
    assert any(
        "budget: the round could not afford its minimum" in line
        for line in after.providers["deepinfra/fp8"].recent_rounds[-1].unjudged
    )
    [frozen] = await _events("canary.budget.frozen", model, wanted=1)
    assert frozen.payload["level"] == "frozen"


async def test_c13_below_the_minimum_start_samples_contracts_rotate_across_rounds(
    canary_env: FleetHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """C13: a budget between the rotated round's forecast and the minimum start samples'
    rotates the contracts: each endpoint gets its start samples and one single-request
    contract (the others are unjudged with the reason, never skipped silently), and a host
    with stray starts is still suspended at its second failing round."""
    model = "test/bill-rotated"
    load_model(
        canary_env,
        model,
        [*(endpoint(t) for t in ("a/fp8", "b/fp8", "c/fp8", "d/fp8")),
         endpoint("bad/fp8", defects=STRAY)],
    )  # fmt: skip
    t0 = datetime(2026, 11, 12, tzinfo=UTC)
    first = await _round(model, t0)
    settings = load_settings()
    state = await aload_state(model)
    at = t0 + HALF_HOUR
    discovered = await tasks.discover_endpoints.fn(model)
    plan = plan_round(model, at, discovered, locales=settings.locales)
    minimum = settings.budget.min_start_samples
    at_min = round_usd(plan.targets, state.bill, settings.probe, minimum)
    rotation = rotation_plan(plan.targets, (), 1, {"bad/fp8": ("start",)}, minimum, settings.probe)
    rotated = round_usd(plan.targets, state.bill, settings.probe, minimum, rotation)
    left = 47
    budget = first.bill["total"]["usd"] + left * (rotated + at_min) / 2
    monkeypatch.setenv("CANARY_DAILY_BUDGET_USD", f"{budget:.8f}")
    assert round_budget(plan, state, load_settings()).level is BudgetLevel.ROTATED
    canary_env.clear_requests()
    second = await _round(model, at)
    assert second.budget["level"] == "rotated"
    per_endpoint: dict[str, int] = {}
    for r in _served(canary_env, model):
        per_endpoint[r["tag"]] = per_endpoint.get(r["tag"], 0) + 1
    assert max(per_endpoint.values()) <= 4 and min(per_endpoint.values()) >= 3, per_endpoint
    rotated_out = [
        line for lines in second.unjudged.values() for line in lines
        if line.endswith("budget: rotated out this round")
    ]  # fmt: skip
    assert len(rotated_out) >= 2 * 4, second.unjudged
    assert ("suspended", "bad/fp8") in {(d["kind"], d["tag"]) for d in second.decisions}
