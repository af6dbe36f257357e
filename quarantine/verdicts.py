"""One endpoint's round verdict from its contract outcomes (pure).

    failed  any outcome is FAIL (quality evidence); reasons attached
    frozen  nothing failed, but a TRANSPORT or MISROUTED outcome (or no outcome at all)
            kept us from a verdict (Q1)
    clean   every outcome passed, was inconclusive or unsupported

With `refusal_weak=True` (the positive controls unexpectedly passed, SPEC C5) a REFUSAL
failure does not count towards the verdict; it is kept in `ignored_reasons` as evidence.
Failures whose `contract:reason` is in `observe_only` (e.g. `start:peer_outlier` while it is
being observed) are kept there too.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from probes.types import Contract, Outcome, OutcomeStatus

_NO_VERDICT = (OutcomeStatus.TRANSPORT, OutcomeStatus.MISROUTED)


class RoundVerdict(StrEnum):
    FAILED = "failed"
    CLEAN = "clean"
    FROZEN = "frozen"


class ProviderRound(BaseModel):
    """All that the policy needs from one endpoint's round."""

    model_config = ConfigDict(frozen=True)

    tag: str
    verdict: RoundVerdict
    reasons: tuple[str, ...] = ()  # failing reasons "contract:reason", sorted, unique
    failing_contracts: int = 0
    ignored_reasons: tuple[str, ...] = ()  # failures not counted (weak refusal probe)
    clean_contracts: tuple[str, ...] = ()  # contracts judged without failure or transport


def _reason(outcome: Outcome) -> str:
    return f"{outcome.contract.value}:{outcome.reason}"


def round_verdict(
    tag: str,
    outcomes: Sequence[Outcome],
    *,
    refusal_weak: bool = False,
    observe_only: Collection[str] = (),
) -> ProviderRound:
    """The round verdict of endpoint `tag` from its outcomes (see module docstring)."""
    counted = [
        o
        for o in outcomes
        if o.is_failure
        and not (refusal_weak and o.contract is Contract.REFUSAL)
        and _reason(o) not in observe_only
    ]
    ignored = [o for o in outcomes if o.is_failure and o not in counted]
    unjudged = {o.contract for o in outcomes if o.status in _NO_VERDICT}
    failed_contracts = {
        o.contract for o in outcomes if o.is_failure and _reason(o) not in observe_only
    }
    judged = {o.contract for o in outcomes} - unjudged - failed_contracts
    if counted:
        verdict = RoundVerdict.FAILED
    elif unjudged or not outcomes:  # no evidence at all is no clean round either
        verdict = RoundVerdict.FROZEN
    else:
        verdict = RoundVerdict.CLEAN
    return ProviderRound(
        tag=tag,
        verdict=verdict,
        reasons=tuple(sorted({_reason(o) for o in counted})),
        failing_contracts=len({o.contract for o in counted}),
        ignored_reasons=tuple(sorted({_reason(o) for o in ignored})),
        clean_contracts=tuple(sorted(c.value for c in judged)),
    )
