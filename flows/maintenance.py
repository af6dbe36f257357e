"""Repairs by hand, as flow runs audited like `lift` (Q8): an artifact, Prefect events,
an admin notification and, for the clock, a ledger decision.

    reset-clock    a model whose stored last round is in the future (a mistyped `--at`)
                   gets its clock back (`quarantine/clock.py`)
    release-lock   a model's round lock is freed whoever holds it: the lease record is
                   removed (a live holder notices at its next renewal and applies
                   nothing), a stale holder's run is marked Crashed, and slots of the
                   model's state-write limit held by nobody are given back
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from prefect import flow, get_run_logger
from prefect.events import emit_event

from flows.admin import _audit
from flows.notify import alert_lines, emit_decision_events, notify_admins
from flows.roundlock import mark_crashed
from ground.settings import load_settings
from quarantine.adapters.lease import arelease_lease, lease_name
from quarantine.adapters.ledger import Ledger
from quarantine.adapters.locking import reset_slots
from quarantine.adapters.store import aload_state, aupdate_state, state_lock_name
from quarantine.clock import reset_clock as reset_clock_of


@flow(name="reset-clock", flow_run_name="clock reset ({model})")
async def reset_clock(
    model: str, reason: str, author: str, at: datetime | None = None
) -> dict[str, Any]:
    """Bring back a model whose last applied round is in the future; `at` is the time to
    reset to (default now)."""
    logger = get_run_logger()
    now = at or datetime.now(UTC)
    await aload_state(model, missing_ok=False)  # UnknownModelError before taking the lock
    _, decisions = await aupdate_state(
        model, lambda s: reset_clock_of(s, now=now, reason=reason, actor=author)
    )
    ledger = Ledger(load_settings().resolved_ledger_url)
    try:
        ledger.record_decisions(decisions)
    finally:
        ledger.close()
    emit_decision_events(decisions, round_id=None)
    lines = alert_lines(decisions)
    await notify_admins(load_settings().notification_block, f"provider-canary: {model}", lines)
    [decision] = decisions
    await _audit(
        model,
        f"Clock reset ({model})",
        [*lines, *decision.evidence, f"by {author}: {reason}"],
    )
    logger.info("clock of %s reset by %s: %s", model, author, reason)
    return decision.model_dump(mode="json")


@flow(name="release-lock", flow_run_name="release lock ({model})")
async def release_lock(model: str, reason: str, author: str) -> dict[str, Any]:
    """Free `model`'s round lock by hand (see module docstring)."""
    logger = get_run_logger()
    now = datetime.now(UTC)
    view = await arelease_lease(lease_name(model))
    stale = view.stale_reason(now) if view else None
    crashed = None
    if view is not None and stale is not None:
        crashed = await mark_crashed(view, f"{stale}; lock released by {author}")
    slots = await reset_slots(state_lock_name(model))
    result: dict[str, Any] = {
        "model": model,
        "released": view.to_json(now) if view else None,
        "crashed_run": crashed,
        "state_lock_slots_reset": slots,
        "by": author,
        "reason": reason,
    }
    emit_event(
        event="canary.lock.released",
        resource={"prefect.resource.id": f"canary.lock.{model}", "canary.model": model},
        payload=result,
    )
    held = view.describe() if view else "nobody"
    lines = [f"round lock released by {author} ({reason}); it was held by {held}"]
    if slots:
        lines.append(f"{slots} slot(s) of the state-write limit given back")
    await notify_admins(load_settings().notification_block, f"provider-canary: {model}", lines)
    await _audit(model, f"Round lock released ({model})", lines)
    logger.info("; ".join(lines))
    return result
