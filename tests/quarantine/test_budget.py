"""The canary's daily bill, forecast and budget (SPEC C13), pure: rounds a day from the
schedule, the day's bill across midnight, and the documented degrade order (fewer start
samples down to the minimum, then contracts rotated, then frozen with the reason budget)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ground.settings import BudgetConfig, ProbeConfig, Settings
from probes.cost import EndpointBill, RoundBill
from probes.types import Contract, Endpoint, Pricing
from quarantine.budget import (
    BudgetInputs,
    BudgetLevel,
    DayBill,
    add_round,
    bill_view,
    plan_budget,
    rotation_plan,
    round_usd,
    rounds_after,
    rounds_per_day,
)

T0 = datetime(2026, 11, 2, 0, 0, tzinfo=UTC)
CRON = Settings(_env_file=None).round_cron
PROBE = ProbeConfig()
MINIMUM = BudgetConfig().min_start_samples
PRICES = Pricing(prompt=0.0000003, completion=0.0000005)
TARGETS = tuple(
    Endpoint(
        model_id="m/x",
        tag=f"h{i}/fp8",
        provider_name=f"H{i}",
        pricing=PRICES,
        supported_parameters=("response_format",) if i % 2 else (),
    )
    for i in range(6)
)


def _inputs(
    budget: float | None, *, bill: DayBill | None = None, at: datetime = T0
) -> BudgetInputs:
    return BudgetInputs(
        at=at, index=0, targets=TARGETS, bill=bill, budget_usd=budget, minimum=MINIMUM,
        probe=PROBE, cron=CRON,
    )  # fmt: skip


def test_c13_the_schedule_has_48_rounds_a_day_and_counts_what_is_left() -> None:
    """Every 30 minutes is 48 rounds a day; after 00:00 another 47 follow, after 23:30 none."""
    assert rounds_per_day(CRON, T0.date()) == 48
    assert rounds_after(CRON, T0) == 47
    assert rounds_after(CRON, T0 + timedelta(hours=23, minutes=30)) == 0
    assert rounds_per_day("0 * * * *", T0.date()) == 24


def test_c13_the_days_bill_adds_rounds_and_starts_again_at_midnight() -> None:
    """Each round adds its requests, tokens and cost; a new UTC day starts from zero but keeps
    the tokens per request (the next estimate)."""
    spent = RoundBill(
        endpoints={"a": EndpointBill(tag="a", requests=10, prompt_tokens=1000,
                                     completion_tokens=2000, usd=0.25, estimated_usd=0.05)}
    )  # fmt: skip
    bill = add_round(None, spent, T0, BudgetLevel.FULL)
    bill = add_round(bill, spent, T0 + timedelta(minutes=30), BudgetLevel.FEWER_STARTS)
    assert (bill.rounds, bill.requests, bill.spent_usd, bill.estimated_usd) == (2, 20, 0.5, 0.1)
    assert bill.last_level is BudgetLevel.FEWER_STARTS and bill.completion_per_request == 200
    tomorrow = add_round(bill, None, T0 + timedelta(days=1), BudgetLevel.FROZEN)
    assert (tomorrow.rounds, tomorrow.spent_usd, tomorrow.frozen_rounds) == (1, 0.0, 1)
    assert tomorrow.prompt_per_request == 100
    view = bill_view(bill, T0 + timedelta(minutes=30), cron=CRON, budget_usd=2.0)
    assert view.spent_usd == 0.5 and view.rounds_left == 46
    assert view.forecast_usd == pytest.approx(0.5 + 0.25 * 46)


def test_c13_without_a_budget_every_round_is_full_and_forecast() -> None:
    """No budget: the round probes in full; its estimate and the day's forecast are given."""
    plan = plan_budget(_inputs(None))
    assert plan.level is BudgetLevel.FULL and plan.start_samples == PROBE.start_samples
    assert plan.rounds_left == 48 and plan.forecast_usd == pytest.approx(48 * plan.round_usd)
    assert not plan.alert


def test_c13_the_degrade_order_fewer_starts_then_rotated_then_frozen() -> None:
    """Below the full forecast: the most start samples whose forecast fits, down to the
    minimum; below that, contracts rotate (each endpoint one single-request contract and
    the start samples); when not even that round is affordable: frozen, nothing probed."""
    full = round_usd(TARGETS, None, PROBE, PROBE.start_samples)
    at_min = round_usd(TARGETS, None, PROBE, MINIMUM)
    assert full > at_min
    plan = plan_budget(_inputs(48 * full * 1.01))
    assert plan.level is BudgetLevel.FULL
    plan = plan_budget(_inputs(48 * full * 0.9))
    assert plan.level is BudgetLevel.FEWER_STARTS and MINIMUM < plan.start_samples < 6
    assert plan.forecast_usd <= 48 * full * 0.9 and plan.alert
    plan = plan_budget(_inputs(48 * at_min))
    assert plan.level is BudgetLevel.FEWER_STARTS and plan.start_samples == MINIMUM
    rotated = plan_budget(_inputs(48 * at_min * 0.95))
    assert rotated.level is BudgetLevel.ROTATED and rotated.start_samples == MINIMUM
    assert rotated.round_usd < at_min and rotated.forecast_usd <= 48 * at_min * 0.95
    assert all(len(p.contracts) == 1 for p in rotated.rotation.values())
    sent = {next(iter(p.contracts)) for p in rotated.rotation.values()}
    assert sent == {Contract.LANGUAGE, Contract.REFUSAL, Contract.STRUCTURED}  # in turn
    assert "contracts rotated across rounds" in rotated.reason
    frozen = plan_budget(_inputs(rotated.round_usd * 0.5))
    assert frozen.level is BudgetLevel.FROZEN and "frozen (budget)" in frozen.reason
    assert frozen.alert


def _rotated_usd(failing: dict[str, tuple[str, ...]] | None = None) -> float:
    rotation = rotation_plan(TARGETS, (), 0, failing or {}, MINIMUM, PROBE)
    return round_usd(TARGETS, None, PROBE, MINIMUM, rotation)


def test_c13_an_affordable_round_runs_rotated_until_the_day_is_spent() -> None:
    """A forecast above the budget even rotated still runs the rounds it can pay for (an
    alert says when the day will freeze); once the day's budget is spent the next round is
    frozen, and a round at the same level as the last one does not alert again."""
    budget = 3 * _rotated_usd()  # three rotated rounds, far from 48
    plan = plan_budget(_inputs(budget))
    assert plan.level is BudgetLevel.ROTATED and "freeze once" in plan.reason and plan.alert
    spent = DayBill(day=T0.date(), rounds=3, spent_usd=budget * 0.99, last_level=plan.level)
    later = T0 + timedelta(hours=2)
    after = plan_budget(_inputs(budget, bill=spent, at=later))
    assert after.level is BudgetLevel.FROZEN and after.previous_level is BudgetLevel.ROTATED
    assert after.alert  # every frozen round alerts
    again = plan_budget(_inputs(budget, bill=spent.model_copy(update={"spent_usd": 0.0}), at=later))
    assert again.level is BudgetLevel.ROTATED and not again.alert


def test_c13_a_failing_host_probes_its_failing_contract_again_when_rotated() -> None:
    """Rotation keeps a failing host decidable at its next round: the contracts of its
    current failing streak are sent on top of its turn."""
    failing: dict[str, tuple[str, ...]] = {"h0/fp8": ("language", "refusal")}
    budget = 48 * _rotated_usd(failing)
    plan = plan_budget(_inputs(budget).model_copy(update={"failing": failing}))
    assert plan.level is BudgetLevel.ROTATED
    assert {Contract.LANGUAGE, Contract.REFUSAL} <= plan.rotation["h0/fp8"].contracts
    assert len(plan.rotation["h1/fp8"].contracts) == 1


def test_c13_the_global_budget_and_a_per_model_one() -> None:
    """`CANARY_DAILY_BUDGET_USD` is the global budget; a per-model entry overrides it."""
    config = BudgetConfig(daily_usd=5.0, per_model_usd={"a/b": 1.5})
    assert config.for_model("a/b") == 1.5 and config.for_model("c/d") == 5.0
    assert BudgetConfig().for_model("c/d") is None
