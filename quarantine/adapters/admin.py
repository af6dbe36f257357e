"""What admin flows and the CLI call: status, manual lift, runtime exclusions, ignore list.

Every function takes `now` (the caller reads the clock, never this module's pure parts) and an
optional `settings`. A manual lift is written to the state (serialised, revision-checked) and
then to the ledger (Q8); notifying is the caller's (flows/admin.py emits the events;
`Decision.event()` gives the `emit_event` arguments).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from ground.clock import UtcDatetime
from ground.settings import Settings, load_settings
from quarantine import policy
from quarantine.adapters.ignore import aignore_report
from quarantine.adapters.ledger import Ledger
from quarantine.adapters.store import aload_state, aupdate_state
from quarantine.budget import BillView, bill_view
from quarantine.exclusions import IgnoreEntry, ignore_tags
from quarantine.judged import refusal_line
from quarantine.models import Decision, Mode, ModelState
from quarantine.overview import endpoint_views


class EndpointState(StrEnum):
    ACTIVE = "active"
    SUSPENDED = "suspended"
    SHADOW_SUSPENDED = "shadow-suspended"
    EXCLUDED = "excluded"  # a built-in or runtime incident exclusion (see `layer`)


class EndpointStatus(BaseModel):
    state: EndpointState
    suspended_until: UtcDatetime | None = None  # end of the suspension or exclusion, if any
    consecutive_failed_rounds: int = 0
    consecutive_clean_rounds: int = 0
    suspensions: int = 0  # ladder rung reached since the last forgiveness
    sticky_locale: str | None = None
    last_reasons: list[str] = Field(default_factory=list)
    layer: str | None = None  # builtin | incident | canary: what keeps it out of traffic
    reason: str = ""  # why (suspension reasons or the exclusion's reason)
    last_round_id: str | None = None
    last_round_at: UtcDatetime | None = None
    last_verdict: str | None = None
    last_round_reasons: list[str] = Field(default_factory=list)
    last_round_unjudged: list[str] = Field(default_factory=list)  # "contract: why" (C5)
    why: str = ""  # the last round in a few words: clean, not judged: ..., failed: ...
    held_to: list[str] = Field(default_factory=list)  # the contracts it is held to


class ModelStatus(BaseModel):
    model: str
    mode: Mode
    revision: int
    providers: dict[str, EndpointStatus]
    ignore: list[IgnoreEntry]
    warnings: list[str] = Field(default_factory=list)  # e.g. invalid runtime exclusion entries
    refusal: str = ""  # the refusal contract's standing in a line (verified / unverified)
    refusal_probe: str | None = None
    controls_missing_since: UtcDatetime | None = None
    bill: BillView | None = None  # spent today and the day's forecast (C13)

    def to_json(self) -> dict[str, Any]:
        """The CLI's JSON: per endpoint state, until, streaks, rung, layer, reason and last
        round; ignore = merged tags."""
        return {
            "model": self.model,
            "mode": self.mode.value,
            "providers": {
                tag: {
                    "state": s.state.value,
                    "suspended_until": s.suspended_until.isoformat() if s.suspended_until else None,
                    "consecutive_failed_rounds": s.consecutive_failed_rounds,
                    "consecutive_clean_rounds": s.consecutive_clean_rounds,
                    "suspensions": s.suspensions,
                    "layer": s.layer,
                    "reason": s.reason,
                    "last_round": {
                        "round_id": s.last_round_id,
                        "at": s.last_round_at.isoformat() if s.last_round_at else None,
                        "verdict": s.last_verdict,
                        "reasons": s.last_round_reasons,
                        "unjudged": s.last_round_unjudged,
                        "why": s.why,
                    },
                    "held_to": s.held_to,
                }
                for tag, s in sorted(self.providers.items())
            },
            "ignore": ignore_tags(self.ignore),
            "warnings": list(self.warnings),
            "refusal": {
                "line": self.refusal,
                "probe": self.refusal_probe,
                "controls_missing_since": self.controls_missing_since.isoformat()
                if self.controls_missing_since
                else None,
            },
            "bill": self.bill.model_dump(mode="json") if self.bill else None,
        }


def model_status(
    state: ModelState, ignore: list[IgnoreEntry], now: datetime, bill: BillView | None = None
) -> ModelStatus:
    """Pure: the status view of a stored state at `now` (`quarantine.overview`), with the
    day's `bill` when given."""
    providers = {}
    for view in endpoint_views(state, ignore, now):
        ps = state.providers.get(view.tag)
        providers[view.tag] = EndpointStatus(
            state=EndpointState(view.standing.value),
            suspended_until=view.until,
            consecutive_failed_rounds=view.failed_streak,
            consecutive_clean_rounds=view.clean_streak,
            suspensions=view.rung,
            sticky_locale=ps.sticky_locale if ps else None,
            last_reasons=list(ps.last_reasons) if ps else [],
            last_round_reasons=view.last_reasons,
            layer=view.layer.value if view.layer else None,
            reason=view.reason,
            last_round_id=view.last_round_id,
            last_round_at=view.last_round_at,
            last_verdict=view.last_verdict,
            last_round_unjudged=view.last_unjudged,
            why=view.why,
            held_to=view.held_to,
        )
    return ModelStatus(
        model=state.model,
        mode=state.mode,
        revision=state.revision,
        providers=providers,
        ignore=ignore,
        refusal=refusal_line(state.refusal_probe, state.controls_missing_since),
        refusal_probe=state.refusal_probe,
        controls_missing_since=state.controls_missing_since,
        bill=bill,
    )


def status_bill(state: ModelState, now: datetime, settings: Settings) -> BillView:
    """The day's bill as the status shows it: as of `now`, or of the model's last round if
    that is later (rounds run at logical times: a replay, the demo's rounds ahead of now)."""
    at = max(now, state.last_round_at) if state.last_round_at else now
    return bill_view(
        state.bill,
        at,
        cron=settings.round_cron,
        budget_usd=settings.budget.for_model(state.model),
    )


async def astatus(model: str, now: datetime) -> ModelStatus:
    """Status of a model; `UnknownModelError` if no round has stored state for it."""
    state = await aload_state(model, missing_ok=False)
    report = await aignore_report(model, now)
    status = model_status(state, report.entries, now, status_bill(state, now, load_settings()))
    return status.model_copy(update={"warnings": report.warnings})


async def alift(
    model: str,
    tag: str,
    reason: str,
    actor: str,
    now: datetime,
    *,
    settings: Settings | None = None,
) -> Decision:
    """Lift a (shadow) suspension by hand; recorded in state and ledger (Q8)."""
    await aload_state(model, missing_ok=False)  # UnknownModelError before taking the lock
    _, decisions = await aupdate_state(
        model, lambda s: policy.lift(s, tag, reason=reason, actor=actor, now=now)
    )
    settings = settings or load_settings()
    ledger = Ledger(settings.resolved_ledger_url)
    try:
        ledger.record_decisions(decisions)
    finally:
        ledger.close()
    return decisions[0]
