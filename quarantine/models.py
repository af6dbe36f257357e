"""The quarantine's data: per-endpoint state, per-model state, a round report, the
policy knobs and the decisions (the event log). Plain pydantic models, no I/O.

All datetimes are timezone-aware UTC; naive inputs are read as UTC.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ground.clock import UtcDatetime
from probes.cost import RoundBill
from quarantine.budget import BudgetPlan, DayBill
from quarantine.verdicts import ProviderRound, RoundVerdict

RECENT_ROUNDS_KEPT = 8  # per endpoint, for status and evidence
STREAK_IDS_KEPT = 16  # round ids kept as evidence of the current streak


class Mode(StrEnum):
    OBSERVE = "observe"
    ENFORCE = "enforce"


class DecisionKind(StrEnum):
    SUSPENDED = "suspended"  # enforce: enters provider.ignore until `until`
    WOULD_SUSPEND = "would_suspend"  # observe: shadow suspension, never in provider.ignore
    BLOCKED_BY_FLOOR = "blocked_by_floor"  # Q4: would suspend, capacity floor forbids; alert
    REINSTATED_EARLY = "reinstated_early"  # Q5: clean rounds while suspended
    EXPIRED = "expired"  # Q5: suspension time is up
    FORGIVEN = "forgiven"  # Q6: ladder history forgotten
    LIFTED = "lifted"  # Q8: manual lift
    MODE_CHANGED = "mode_changed"  # Q3: observe <-> enforce (tag "")
    CLOCK_RESET = "clock_reset"  # manual repair of a last round in the future (tag "")


class RoundNote(BaseModel):
    """One round of one endpoint, as remembered in its state."""

    round_id: str
    at: UtcDatetime
    verdict: RoundVerdict
    reasons: list[str] = Field(default_factory=list)
    unjudged: list[str] = Field(default_factory=list)  # "contract: why" (quarantine/judged.py)


class ProviderState(BaseModel):
    """The policy's memory of one endpoint. Every field has a default (old documents load)."""

    consecutive_failed_rounds: int = 0
    consecutive_clean_rounds: int = 0
    suspended_at: UtcDatetime | None = None
    suspended_until: UtcDatetime | None = None  # enforce mode
    shadow_suspended_until: UtcDatetime | None = None  # observe mode
    suspensions: int = 0  # ladder rung reached since the last forgiveness
    last_suspension_end: UtcDatetime | None = None
    sticky_locale: str | None = None  # repeat this locale next round (C8)
    last_reasons: list[str] = Field(default_factory=list)
    streak_round_ids: list[str] = Field(default_factory=list)  # current fail/clean streak
    streak_reasons: list[str] = Field(default_factory=list)  # failing reasons of the streak
    recent_rounds: list[RoundNote] = Field(default_factory=list)
    # the contracts it is held to: seeded from the listing at first sight, never shrunk by
    # the canary (quarantine/judged.py); empty until its first round
    held_to: list[str] = Field(default_factory=list)

    @property
    def until(self) -> datetime | None:
        """End of the current suspension, real or shadow (at most one is set)."""
        return self.suspended_until or self.shadow_suspended_until

    def suspended(self, now: datetime) -> bool:
        """Whether a suspension (real or shadow) is in force at `now`."""
        return self.until is not None and self.until > now

    def end_suspension(self, at: datetime) -> None:
        """End the (real or shadow) suspension at `at`: expiry, early reinstatement, a
        lift or a mode switch. The ladder rung stays (forgetting is a decision of its own)."""
        self.suspended_until = self.shadow_suspended_until = self.suspended_at = None
        self.last_suspension_end = at


class ModelState(BaseModel):
    """All endpoints of one model, as stored (one Prefect block document per model)."""

    model: str
    mode: Mode = Mode.OBSERVE
    revision: int = 0
    providers: dict[str, ProviderState] = Field(default_factory=dict)
    updated_at: UtcDatetime | None = None
    last_round_id: str | None = None
    last_round_at: UtcDatetime | None = None  # logical time of the last applied round
    refusal_probe: str | None = None  # the refusal probe's standing in the last round (C5)
    controls_missing_since: UtcDatetime | None = None  # no positive control since (alerted)
    bill: DayBill | None = None  # what the canary's rounds cost today (C13)


class RoundReport(BaseModel):
    """What one canary round tells the policy about one model."""

    round_id: str
    model: str
    at: UtcDatetime
    mode: Mode
    rounds: dict[str, ProviderRound] = Field(default_factory=dict)
    production_tags: frozenset[str] = frozenset()  # discovered, usable, not a control
    excluded_tags: frozenset[str] = frozenset()  # excluded by the built-in/incident layers
    language_failed_locales: dict[str, str] = Field(default_factory=dict)
    refusal_probe: str | None = None  # verified | weak | unverified (quarantine/judged.py)
    controls_missing: bool | None = None  # the model has no positive control (None: unknown)
    bill: RoundBill | None = None  # what the round's probes cost
    budget: BudgetPlan | None = None  # how the round ran for the budget


class Decision(BaseModel):
    """One entry of the quarantine's event log (Q8): what, why, on which evidence."""

    model_config = ConfigDict(frozen=True)

    model: str
    kind: DecisionKind
    tag: str
    at: UtcDatetime
    mode: Mode
    reason: str
    until: UtcDatetime | None = None
    rung: int | None = None
    evidence: tuple[str, ...] = ()  # failing reasons of the rounds that caused it
    round_ids: tuple[str, ...] = ()
    actor: str | None = None  # who, for manual decisions

    @property
    def significant(self) -> bool:
        """Worth an admin notification (Q8); expiry and forgiveness are routine."""
        return self.kind not in (DecisionKind.EXPIRED, DecisionKind.FORGIVEN)

    def event(self) -> dict[str, Any]:
        """Keyword arguments for `prefect.events.emit_event` (pure; the caller emits)."""
        resource = {
            "prefect.resource.id": f"canary.endpoint.{self.model}.{self.tag or '*'}",
            "prefect.resource.name": self.tag or self.model,
            "canary.model": self.model,
        }
        return {
            "event": f"canary.endpoint.{self.kind.value}",
            "resource": resource,
            "payload": self.model_dump(mode="json"),
        }
