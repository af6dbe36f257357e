"""The audit of an applied round (O3, Q8): ledger rows, artifacts, decision events, admin
alerts, and the `RoundSummary` the round returns (and the CLI prints).

The state is applied before any of this runs: every write here is best-effort, so a broken
webhook or artifact write cannot fail the run (and hide its decisions). A ledger that
cannot be written is the round's warning, an alert and a `canary.ledger.write_failed`
event; the round then ends "Completed with warnings"."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

from prefect.events import emit_event
from pydantic import BaseModel

from flows import tasks
from flows.applied import AppliedRound
from flows.bill_artifact import bill_summary
from flows.budget import (
    budget_alert_lines,
    controls_missing_line,
    controls_missing_now,
    emit_budget_event,
    emit_controls_missing_event,
)
from flows.notify import alert_lines, emit_decision_events, emit_weak_probe_event, notify_admins
from flows.peer_step import finding_lines
from flows.render import endpoint_lines
from flows.round_artifacts import best_effort, publish_round_artifacts
from quarantine.budget import BudgetLevel


class RoundSummary(BaseModel):
    """What a round returns (and the CLI prints)."""

    round_id: str
    model: str
    mode: str
    at: datetime
    endpoints: list[tuple[str, str, str, str]]  # tag, locale, verdict, reasons
    controls: dict[str, str]  # control tag -> refusal outcome
    weak_refusal_probe: bool
    decisions: list[dict[str, Any]]
    ignore: list[dict[str, Any]]
    notified: str
    findings: list[str] = []  # model-level findings of the peer comparison
    ignored: dict[str, list[str]] = {}  # per endpoint, failures recorded but not counted
    warnings: list[str] = []  # audit material that could not be written (e.g. the ledger)
    unjudged: dict[str, list[str]] = {}  # per endpoint, "contract: why" not judged (C5)
    refusal_probe: str = ""  # verified | weak | unverified (C5)
    bill: dict[str, Any] = {}  # the round's cost: total and per endpoint (C13)
    budget: dict[str, Any] = {}  # how the round ran for the budget (C13)


async def publish(
    applied: AppliedRound, notification_block: str | None, logger: Any
) -> RoundSummary:
    """Ledger rows and artifacts (written at once), then events and admin alerts for an
    applied round; its summary with what could not be written as warnings."""
    plan, judged = applied.plan, applied.judged
    failed, _ = await asyncio.gather(
        _ledger(applied, logger), publish_round_artifacts(applied, logger)
    )
    warnings = [failed] if failed is not None else []
    with best_effort(logger, "decision events"):
        emit_decision_events(applied.decisions, round_id=plan.round_id)
    lines = alert_lines(applied.decisions) + finding_lines(judged.peers) + warnings
    if judged.weak:
        passed = applied.weak_controls
        with best_effort(logger, "weak-probe event"):
            emit_weak_probe_event(plan.model, plan.round_id, passed, judged.control_verdict.reason)
        lines.insert(0, f"weak refusal probe: control(s) {', '.join(passed)} passed")
    lines += _evidence_and_budget_alerts(applied, logger)
    if judged.budget is not None and judged.budget.level is BudgetLevel.FROZEN:
        warnings.append(f"round frozen (budget): {judged.budget.reason}")
    subject = f"provider-canary: {plan.model} ({plan.round_id})"
    notified = await _notify(notification_block, subject, lines, logger)
    return _summary(applied, notified, warnings)


def _evidence_and_budget_alerts(applied: AppliedRound, logger: Any) -> list[str]:
    """The alert lines (and their events) of the refusal probe without any positive control
    (once per model, C5) and of a round the budget degraded or froze (C13)."""
    plan, budget = applied.plan, applied.judged.budget
    lines = []
    if controls_missing_now(applied):
        with best_effort(logger, "controls-missing event"):
            emit_controls_missing_event(plan.model, plan.round_id)
        lines.append(controls_missing_line(plan.model))
    with best_effort(logger, "budget event"):
        emit_budget_event(plan.model, plan.round_id, budget)
    return lines + budget_alert_lines(budget)


async def _ledger(applied: AppliedRound, logger: Any) -> str | None:
    """Write the round's ledger rows; the warning when that failed (said loudly: an error
    line and an event), else None. Never raises: the state is applied."""
    plan = applied.plan
    try:
        await tasks.record_ledger(applied.report, applied.judged.voted, applied.decisions)
    except Exception as exc:
        warning = ledger_warning(exc)
        logger.error("round applied, but %s", warning)
        with best_effort(logger, "ledger alert event"):
            emit_event(
                event="canary.ledger.write_failed",
                resource={
                    "prefect.resource.id": f"canary.ledger.{plan.model}",
                    "canary.model": plan.model,
                },
                payload={"round_id": plan.round_id, "error": warning},
            )
        return warning
    return None


async def _notify(block: str | None, subject: str, lines: list[str], logger: Any) -> str:
    """Alert the admins through `block`; through the log when that fails."""
    try:
        return await notify_admins(block, subject, lines)
    except Exception as exc:
        logger.error("notification through %s failed (%s); alerts follow in the log", block, exc)
        return await notify_admins(None, subject, lines)


def _summary(applied: AppliedRound, notified: str, warnings: list[str]) -> RoundSummary:
    """What the round returns, from the applied round (pure)."""
    plan, judged = applied.plan, applied.judged
    return RoundSummary(
        round_id=plan.round_id,
        model=plan.model,
        mode=applied.mode.value,
        at=plan.at,
        endpoints=endpoint_lines(judged.verdicts, plan.locales),
        controls={o.tag or "?": o.status.value for o in judged.control_refusals},
        weak_refusal_probe=judged.weak,
        decisions=[d.model_dump(mode="json") for d in applied.decisions],
        ignore=[e.model_dump(mode="json") for e in applied.ignore],
        notified=notified,
        findings=finding_lines(judged.peers),
        ignored={
            t: list(v.ignored_reasons) for t, v in judged.verdicts.items() if v.ignored_reasons
        },
        warnings=warnings,
        unjudged={t: v.unjudged_lines() for t, v in judged.verdicts.items() if v.unjudged},
        refusal_probe=judged.refusal.value,
        bill=bill_summary(judged.bill),
        budget=judged.budget.model_dump(mode="json", exclude={"rotation"}) if judged.budget else {},
    )


def ledger_warning(exc: BaseException) -> str:
    """One line for a ledger write that failed (first line of the driver's message)."""
    detail = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    first = detail[0][:200] if detail else ""
    return (
        f"ledger write failed ({type(exc).__name__}: {first}); the round's rows are missing "
        "from the ledger (README: repairing the ledger)"
    )
