"""The suspension policy as a pure state machine: `step(state, report, config)` returns
the new state and the decisions (an event log). Time is `report.at`; nothing here reads
the clock or does I/O.

Per endpoint and round, in this order:
1. Time: a suspension whose end is at or before `now` ends (`expired`, Q5); once the end of
   the last suspension is `forget_after_days` old, the ladder history is forgotten
   (`forgiven`, Q6).
2. Verdict (Q1): `failed` extends the fail streak and resets the clean streak; `clean` the
   reverse; `frozen` (transport only) and `unjudged` (a contract it is held to was not
   judged: a weak probe, a model-level finding, inconclusive, C5) change neither, so no
   round without evidence counts toward early reinstatement. The contracts the endpoint is
   held to are kept (`held_to`). The sticky locale is set from
   `report.language_failed_locales` and cleared by a clean language result (C8).
3. A suspended endpoint (they keep being probed) with `clean_rounds` clean rounds in a row
   is reinstated early (`reinstated_early`, Q5); its rung stays (Q6).
4. An endpoint that is not suspended, failed this round and has `fail_rounds` consecutive
   failed rounds (Q2) is a candidate. Candidates are taken in a fixed order: most failing
   contracts first, then tag (alphabetical). A candidate in the production set (production
   tags minus tags excluded by the other layers minus endpoints suspended now) is suspended
   only if at least `floor` production endpoints remain after it; otherwise the decision is
   `blocked_by_floor` (an admin alert) and its streak stays, so the next failed round asks
   again (Q4). Non-production candidates (e.g. already excluded) do not count against the floor.
5. Suspension: rung = suspensions + 1; length = ladder[rung] (the last step repeats, Q6);
   streaks reset. In enforce mode `suspended` (sets `suspended_until`); in observe mode the
   identical machine writes `shadow_suspended_until` and emits `would_suspend` (Q3).

Mode change (report.mode differs from state.mode, or `switch_mode`): observe -> enforce
drops shadow suspensions (never made real: no retro-active suspension); enforce -> observe
keeps real suspensions as they are but out of provider.ignore (the canary layer is only
merged in enforce mode), so a return to enforce before they end restores them instead of
forgetting a measured incident. Rungs and streaks are kept; rungs reached by shadow
suspensions count on the ladder too (the 14-day forgetting applies to them alike).
Rounds only change the mode when they are asked to explicitly (the round flow passes the
stored mode unless an operator names one).
"""

from __future__ import annotations

from datetime import datetime

from ground.clock import as_utc
from ground.settings import PolicyConfig
from quarantine.budget import BudgetLevel, add_round
from quarantine.errors import NotSuspendedError, UnknownTagError
from quarantine.models import (
    RECENT_ROUNDS_KEPT,
    STREAK_IDS_KEPT,
    Decision,
    DecisionKind,
    Mode,
    ModelState,
    ProviderState,
    RoundNote,
    RoundReport,
)
from quarantine.verdicts import ProviderRound, RoundVerdict

__all__ = [
    "Decision",
    "DecisionKind",
    "Mode",
    "ModelState",
    "PolicyConfig",
    "ProviderState",
    "RoundReport",
    "candidate_order",
    "lift",
    "step",
    "switch_mode",
]


def _advance_time(
    ps: ProviderState, tag: str, state: ModelState, now: datetime, config: PolicyConfig
) -> list[Decision]:
    """Expire a suspension that is over and forget an old ladder history (mutates `ps`)."""
    out: list[Decision] = []
    until = ps.until
    if until is not None and until <= now:
        out.append(
            Decision(
                model=state.model,
                kind=DecisionKind.EXPIRED,
                tag=tag,
                at=now,
                mode=state.mode,
                reason=f"suspension ended at {until.isoformat()}",
                until=until,
                rung=ps.suspensions,
            )
        )
        ps.end_suspension(until)
    end = ps.last_suspension_end
    if ps.suspensions and ps.until is None and end is not None and now - end >= config.forget_after:
        out.append(
            Decision(
                model=state.model,
                kind=DecisionKind.FORGIVEN,
                tag=tag,
                at=now,
                mode=state.mode,
                reason=(
                    f"no new suspension for {config.forget_after_days:g} days since "
                    f"{end.isoformat()}: ladder restarts (was rung {ps.suspensions})"
                ),
                rung=0,
            )
        )
        ps.suspensions = 0
    return out


def _apply_round(ps: ProviderState, tag: str, rnd: ProviderRound, report: RoundReport) -> None:
    """Streaks, evidence and sticky locale from one round verdict (mutates `ps`)."""
    note = RoundNote(
        round_id=report.round_id,
        at=report.at,
        verdict=rnd.verdict,
        reasons=list(rnd.reasons),
        unjudged=rnd.unjudged_lines(),
    )
    ps.recent_rounds = [*ps.recent_rounds, note][-RECENT_ROUNDS_KEPT:]
    if rnd.held_to:
        ps.held_to = list(rnd.held_to)
    if rnd.verdict is RoundVerdict.FAILED:
        if ps.consecutive_failed_rounds == 0:
            ps.streak_round_ids, ps.streak_reasons = [], []
        ps.consecutive_failed_rounds += 1
        ps.consecutive_clean_rounds = 0
        ps.last_reasons = list(rnd.reasons)
        ps.streak_reasons = sorted({*ps.streak_reasons, *rnd.reasons})
        ps.streak_round_ids = [*ps.streak_round_ids, report.round_id][-STREAK_IDS_KEPT:]
    elif rnd.verdict is RoundVerdict.CLEAN:
        if ps.consecutive_clean_rounds == 0:
            ps.streak_round_ids, ps.streak_reasons = [], []
        ps.consecutive_clean_rounds += 1
        ps.consecutive_failed_rounds = 0
        ps.streak_round_ids = [*ps.streak_round_ids, report.round_id][-STREAK_IDS_KEPT:]
    # FROZEN (Q1) and UNJUDGED (C5): no streak changes at all.
    if tag in report.language_failed_locales:
        ps.sticky_locale = report.language_failed_locales[tag]
    elif "language" in rnd.clean_contracts:
        ps.sticky_locale = None


def candidate_order(report: RoundReport, tags: list[str]) -> list[str]:
    """Deterministic order of suspension candidates: most failing contracts first, then tag."""
    return sorted(tags, key=lambda t: (-report.rounds[t].failing_contracts, t))


def _suspend(
    ps: ProviderState, tag: str, state: ModelState, now: datetime, config: PolicyConfig
) -> Decision:
    rung = ps.suspensions + 1
    until = now + config.duration(rung)
    enforce = state.mode is Mode.ENFORCE
    decision = Decision(
        model=state.model,
        kind=DecisionKind.SUSPENDED if enforce else DecisionKind.WOULD_SUSPEND,
        tag=tag,
        at=now,
        mode=state.mode,
        reason=(
            f"{ps.consecutive_failed_rounds} consecutive failed rounds; "
            f"rung {rung}: {config.duration(rung).total_seconds() / 86400:g} day(s)"
        ),
        until=until,
        rung=rung,
        evidence=tuple(ps.streak_reasons),
        round_ids=tuple(ps.streak_round_ids),
    )
    if enforce:
        ps.suspended_until = until
    else:
        ps.shadow_suspended_until = until
    ps.suspended_at = now
    ps.suspensions = rung
    ps.consecutive_failed_rounds = ps.consecutive_clean_rounds = 0
    ps.streak_round_ids, ps.streak_reasons = [], []
    return decision


def switch_mode(
    state: ModelState, mode: Mode, *, now: datetime, actor: str, reason: str
) -> tuple[ModelState, list[Decision]]:
    """Change the model's mode without retro-active suspensions (see module docstring)."""
    mode, now = Mode(mode), as_utc(now)
    if mode is state.mode:
        return state, []
    new = state.model_copy(deep=True)
    affected: list[str] = []
    for tag, ps in sorted(new.providers.items()):
        if mode is Mode.ENFORCE and ps.shadow_suspended_until is not None:
            ps.end_suspension(now)
            affected.append(tag)
        elif mode is Mode.OBSERVE and ps.suspended(now):
            affected.append(tag)  # kept as they are, just not enforced while observing
    what = (
        "shadow suspensions dropped"
        if mode is Mode.ENFORCE
        else "suspensions kept but not enforced while observing"
    )
    decision = Decision(
        model=state.model,
        kind=DecisionKind.MODE_CHANGED,
        tag="",
        at=now,
        mode=mode,
        reason=f"{state.mode.value} -> {mode.value}: {reason}; {what}: {affected or 'none'}",
        evidence=tuple(affected),
        actor=actor,
    )
    new.mode = mode
    new.updated_at = now
    return new, [decision]


def step(
    state: ModelState, report: RoundReport, config: PolicyConfig
) -> tuple[ModelState, list[Decision]]:
    """Apply one round report at time `report.at`; return the new state and decisions."""
    if report.model != state.model:
        raise ValueError(f"report for model {report.model!r} applied to state of {state.model!r}")
    now = report.at
    decisions: list[Decision] = []
    new = state.model_copy(deep=True)
    if new.revision == 0 and not new.providers:
        new.mode = report.mode  # a fresh state adopts the round's mode silently
    elif report.mode is not new.mode:
        new, switched = switch_mode(
            new, report.mode, now=now, actor="round", reason=f"round {report.round_id}"
        )
        decisions += switched
    for tag in sorted(set(new.providers) | set(report.rounds)):
        ps = new.providers.setdefault(tag, ProviderState())
        decisions += _advance_time(ps, tag, new, now, config)
        rnd = report.rounds.get(tag)
        if rnd is None:
            continue
        _apply_round(ps, tag, rnd, report)
        if ps.suspended(now) and ps.consecutive_clean_rounds >= config.clean_rounds:
            decisions.append(_reinstate_early(ps, tag, new, now))
    decisions += _suspend_failing(new, report, config)
    _note_round(new, report)
    new.updated_at = now
    new.last_round_id = report.round_id
    new.last_round_at = now
    return new, decisions


def _note_round(state: ModelState, report: RoundReport) -> None:
    """The model-level memory of a round (mutates `state`): the refusal probe's standing,
    since when the model has had no positive control (C5: alerted once), and the day's bill
    (C13; a triage's report carries no bill)."""
    if report.refusal_probe is not None:
        state.refusal_probe = report.refusal_probe
    if report.controls_missing is not None:
        since = state.controls_missing_since or report.at
        state.controls_missing_since = since if report.controls_missing else None
    if report.bill is not None or report.budget is not None:
        level = report.budget.level if report.budget is not None else BudgetLevel.FULL
        state.bill = add_round(state.bill, report.bill, report.at, level)


def _reinstate_early(ps: ProviderState, tag: str, state: ModelState, now: datetime) -> Decision:
    """Q5: enough consecutive clean rounds while suspended end the suspension now."""
    decision = Decision(
        model=state.model,
        kind=DecisionKind.REINSTATED_EARLY,
        tag=tag,
        at=now,
        mode=state.mode,
        reason=f"{ps.consecutive_clean_rounds} consecutive clean rounds while suspended",
        until=ps.until,
        rung=ps.suspensions,
        round_ids=tuple(ps.streak_round_ids),
    )
    ps.end_suspension(now)
    return decision


def _suspend_failing(
    state: ModelState, report: RoundReport, config: PolicyConfig
) -> list[Decision]:
    """Q2, Q4: suspend each endpoint that failed enough consecutive rounds, most evident
    first, unless fewer than the floor's production endpoints would remain (then an admin is
    told instead)."""
    now = report.at
    candidates = [
        tag
        for tag, rnd in report.rounds.items()
        if rnd.verdict is RoundVerdict.FAILED
        and not state.providers[tag].suspended(now)
        and state.providers[tag].consecutive_failed_rounds >= config.fail_rounds
    ]
    remaining = set(report.production_tags) - set(report.excluded_tags)
    remaining -= {t for t, ps in state.providers.items() if ps.suspended(now)}
    decisions: list[Decision] = []
    for tag in candidate_order(report, candidates):
        ps = state.providers[tag]
        if tag in remaining and len(remaining) - 1 < config.floor:
            decisions.append(
                Decision(
                    model=state.model,
                    kind=DecisionKind.BLOCKED_BY_FLOOR,
                    tag=tag,
                    at=now,
                    mode=state.mode,
                    reason=(
                        f"{ps.consecutive_failed_rounds} consecutive failed rounds, but only "
                        f"{len(remaining)} production endpoint(s) remain and the floor is "
                        f"{config.floor}: admin attention needed"
                    ),
                    rung=ps.suspensions + 1,
                    evidence=tuple(ps.streak_reasons),
                    round_ids=tuple(ps.streak_round_ids),
                )
            )
            continue
        decisions.append(_suspend(ps, tag, state, now, config))
        remaining.discard(tag)
    return decisions


def lift(
    state: ModelState, tag: str, *, reason: str, actor: str, now: datetime
) -> tuple[ModelState, list[Decision]]:
    """Manually end a (shadow) suspension of `tag` (Q8). The rung stays; streaks restart."""
    now = as_utc(now)
    if not reason.strip() or not actor.strip():
        raise ValueError("a lift needs a non-empty reason and actor")
    if tag not in state.providers:
        known = ", ".join(sorted(state.providers)) or "none"
        raise UnknownTagError(
            f"model {state.model!r} has no endpoint {tag!r} in its quarantine state (known: {known})"
        )
    ps = state.providers[tag]
    if not ps.suspended(now):
        raise NotSuspendedError(
            f"endpoint {tag!r} of model {state.model!r} is not suspended at {now.isoformat()}; "
            "nothing lifted"
        )
    new = state.model_copy(deep=True)
    ps = new.providers[tag]
    decision = Decision(
        model=new.model,
        kind=DecisionKind.LIFTED,
        tag=tag,
        at=now,
        mode=new.mode,
        reason=reason,
        until=ps.until,
        rung=ps.suspensions,
        evidence=tuple(ps.last_reasons),
        actor=actor,
    )
    ps.end_suspension(now)
    ps.consecutive_failed_rounds = ps.consecutive_clean_rounds = 0
    ps.streak_round_ids, ps.streak_reasons = [], []
    new.updated_at = now
    return new, [decision]
