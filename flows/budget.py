"""The round's budget and its alerts (SPEC C13), the glue around the pure
`quarantine/budget.py`: the round asks `round_budget` before it probes; the audit adds
`budget_alert_lines` to the admin alert and emits `canary.budget.degraded` (when a round's
level drops) or `canary.budget.frozen` (every round the budget could not afford). The
positive controls' absence is alerted once per model (`canary.controls.missing`, C5)."""

from __future__ import annotations

from prefect.events import emit_event

from flows.applied import AppliedRound
from flows.roundplan import RoundPlan, round_index
from ground.settings import Settings
from quarantine.budget import BudgetInputs, BudgetLevel, BudgetPlan, plan_budget
from quarantine.models import ModelState


def _failing(state: ModelState) -> dict[str, tuple[str, ...]]:
    """The contracts each endpoint is failing in its current streak (a rotated round probes
    them again, so the host is decided at its next round)."""
    return {
        tag: tuple(sorted({r.split(":", 1)[0] for r in ps.streak_reasons}))
        for tag, ps in state.providers.items()
        if ps.consecutive_failed_rounds
    }


def round_budget(plan: RoundPlan, state: ModelState, settings: Settings) -> BudgetPlan:
    """How this round probes for the model's daily budget (quarantine/budget.py)."""
    return plan_budget(
        BudgetInputs(
            at=plan.at,
            index=round_index(plan.at),
            targets=plan.targets,
            controls=plan.controls,
            failing=_failing(state),
            bill=state.bill,
            budget_usd=settings.budget.for_model(plan.model),
            minimum=settings.budget.min_start_samples,
            probe=settings.probe,
            cron=settings.round_cron,
        )
    )


def budget_alert_lines(budget: BudgetPlan | None) -> list[str]:
    """The admin alert's line when the budget degraded or froze the round."""
    if budget is None or not budget.alert:
        return []
    if budget.level is BudgetLevel.FROZEN:
        return [f"budget: round frozen (budget), nothing probed: {budget.reason}"]
    return [f"budget: rounds degraded to {budget.level.value}: {budget.reason}"]


def emit_budget_event(model: str, round_id: str, budget: BudgetPlan | None) -> None:
    """`canary.budget.frozen` / `canary.budget.degraded` when the round alerts."""
    if budget is None or not budget.alert:
        return
    kind = "frozen" if budget.level is BudgetLevel.FROZEN else "degraded"
    emit_event(
        event=f"canary.budget.{kind}",
        resource={"prefect.resource.id": f"canary.budget.{model}", "canary.model": model},
        payload={"round_id": round_id, **budget.model_dump(mode="json", exclude={"rotation"})},
    )


def controls_missing_now(applied: AppliedRound) -> bool:
    """Whether this round is the first without a positive control for the model since one
    was configured (or ever): the state remembers it, so it alerts once (C5)."""
    return applied.state.controls_missing_since == applied.plan.at


def controls_missing_line(model: str) -> str:
    return (
        f"no positive control for {model}: the refusal contract is unverified (a refusal "
        "probe that stopped detecting filtering would go unnoticed); configure known-"
        "filtering hosts in CANARY_CONTROL_PROVIDERS"
    )


def emit_controls_missing_event(model: str, round_id: str) -> None:
    emit_event(
        event="canary.controls.missing",
        resource={"prefect.resource.id": f"canary.probe.refusal.{model}", "canary.model": model},
        payload={"round_id": round_id, "reason": controls_missing_line(model)},
    )
