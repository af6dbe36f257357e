"""The model's logical clock: refusing rounds in the future, and repairing one (pure).

Rounds carry a logical time `at` (default now) so the past can be replayed. A round whose
half-hour slot is not after the last applied one changes nothing (duplicates, replays of
the past). A mistyped `--at` in the future would therefore block every later round of the
model until real time catches up; so:

- `future_at(at, now)`: a requested `at` more than one slot ahead of `now` (refused by the
  CLI unless `--allow-future`, and by the flow unless `allow_future=True`);
- `clock_ahead(state, now)`: the stored last round is more than one slot ahead of `now`
  (a round then fails loudly, naming the repair instead of quietly cancelling);
- `reset_clock(state, now=..., reason=..., actor=...)`: the repair. The last applied round
  becomes the latest round an endpoint remembers at or before `now` (none: no last round),
  and suspensions that started after `now` are moved to start at `now` with their length
  kept: the probes ran at real time, only their label was wrong. One `clock_reset`
  decision records what changed (Q8).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from ground.clock import as_utc
from quarantine.errors import QuarantineError
from quarantine.models import Decision, DecisionKind, ModelState

SLOT = timedelta(minutes=30)


class ClockNotAheadError(QuarantineError, ValueError):
    """`reset_clock` on a model whose last round is not in the future: nothing to repair."""


def future_at(at: datetime, now: datetime) -> bool:
    """Whether logical time `at` is more than one half-hour slot after `now`."""
    return as_utc(at) > as_utc(now) + SLOT


def clock_ahead(state: ModelState, now: datetime) -> bool:
    """Whether the stored last round is more than one slot after `now`."""
    return state.last_round_at is not None and future_at(state.last_round_at, now)


def reset_clock(
    state: ModelState, *, now: datetime, reason: str, actor: str
) -> tuple[ModelState, list[Decision]]:
    """Bring a model whose last round is in the future back to `now` (module docstring)."""
    now = as_utc(now)
    if not reason.strip() or not actor.strip():
        raise ValueError("a clock reset needs a non-empty reason and actor")
    last = state.last_round_at
    if last is None or last <= now:
        when = last.isoformat() if last else "never"
        raise ClockNotAheadError(
            f"the last round of {state.model!r} ({when}) is not in the future; nothing to reset"
        )
    new = state.model_copy(deep=True)
    evidence = [f"last round was {state.last_round_id} at {last.isoformat()}"]
    notes = [
        (n.at, n.round_id) for ps in new.providers.values() for n in ps.recent_rounds if n.at <= now
    ]
    new.last_round_at, new.last_round_id = max(notes) if notes else (None, None)
    for tag, ps in sorted(new.providers.items()):
        start = ps.suspended_at
        if start is not None and start > now:
            shift = start - now
            ps.suspended_at = now
            if ps.suspended_until is not None:
                ps.suspended_until -= shift
            if ps.shadow_suspended_until is not None:
                ps.shadow_suspended_until -= shift
            evidence.append(f"suspension of {tag} moved to start now (until {ps.until})")
        if ps.last_suspension_end is not None and ps.last_suspension_end > now:
            ps.last_suspension_end = now
    new.updated_at = now
    decision = Decision(
        model=new.model,
        kind=DecisionKind.CLOCK_RESET,
        tag="",
        at=now,
        mode=new.mode,
        reason=reason,
        evidence=tuple(evidence),
        round_ids=tuple(r for r in (state.last_round_id,) if r),
        actor=actor,
    )
    return new, [decision]
