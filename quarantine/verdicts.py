"""One endpoint's round verdict from its contract outcomes (pure).

    failed    any outcome is FAIL (quality evidence); reasons attached
    frozen    nothing failed, but a TRANSPORT or MISROUTED outcome (or no outcome at all)
              kept us from a verdict (Q1)
    unjudged  nothing failed and nothing was cut off, but a contract the host is held to
              was not judged (a weak refusal probe, a model-level finding, inconclusive,
              no longer advertised; `quarantine/judged.py`): no evidence of health (C5, C13)
    clean     every contract the host is held to was judged and passed

`frozen` and `unjudged` move no streak (quarantine/policy.py): an unjudged contract neither
extends a failing streak nor counts toward the clean rounds that reinstate a host early (Q5).

With `refusal_weak=True` (the positive controls unexpectedly passed, SPEC C5) a REFUSAL
failure does not count towards the verdict; it is kept in `ignored_reasons` as evidence, and
the refusal contract is unjudged. Failures whose `contract:reason` is in `observe_only` (e.g.
`start:peer_outlier` while it is being observed) are kept there too. `held_to` (default:
every contract with an outcome other than `unsupported`) is what the host is held to.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from probes.types import Contract, Outcome, OutcomeStatus
from quarantine.judged import (
    NOT_PROBED,
    RefusalProbe,
    Standing,
    default_held,
    judgements,
)

_NO_VERDICT = (OutcomeStatus.TRANSPORT, OutcomeStatus.MISROUTED)


class RoundVerdict(StrEnum):
    FAILED = "failed"
    CLEAN = "clean"
    FROZEN = "frozen"
    UNJUDGED = "unjudged"


class ProviderRound(BaseModel):
    """All that the policy needs from one endpoint's round."""

    model_config = ConfigDict(frozen=True)

    tag: str
    verdict: RoundVerdict
    reasons: tuple[str, ...] = ()  # failing reasons "contract:reason", sorted, unique
    failing_contracts: int = 0
    ignored_reasons: tuple[str, ...] = ()  # failures not counted (weak refusal probe)
    clean_contracts: tuple[str, ...] = ()  # contracts judged and passed
    held_to: tuple[str, ...] = ()  # the contracts the host is held to (quarantine/judged.py)
    unjudged: dict[str, str] = Field(default_factory=dict)  # held contract -> why not judged
    unverified: tuple[str, ...] = ()  # judged by a probe no positive control verified

    def unjudged_lines(self) -> list[str]:
        """`contract: why` for each held contract that was not judged."""
        return [f"{c}: {why}" for c, why in sorted(self.unjudged.items())]


def _reason(outcome: Outcome) -> str:
    return f"{outcome.contract.value}:{outcome.reason}"


def round_verdict(
    tag: str,
    outcomes: Sequence[Outcome],
    *,
    refusal_weak: bool = False,
    observe_only: Collection[str] = (),
    held_to: Collection[str] | None = None,
    refusal: RefusalProbe | None = None,
    missing_why: str = NOT_PROBED,
) -> ProviderRound:
    """The round verdict of endpoint `tag` from its outcomes (see module docstring).
    `refusal` (default: weak if `refusal_weak`, else verified) is the refusal probe's
    standing this round."""
    if refusal is None:
        refusal = RefusalProbe.WEAK if refusal_weak else RefusalProbe.VERIFIED
    weak = refusal is RefusalProbe.WEAK
    held = tuple(sorted(held_to)) if held_to is not None else default_held(outcomes)
    counted = [
        o
        for o in outcomes
        if o.is_failure
        and not (weak and o.contract is Contract.REFUSAL)
        and _reason(o) not in observe_only
    ]
    ignored = [o for o in outcomes if o.is_failure and o not in counted]
    judged = judgements(
        outcomes, held_to=held, refusal=refusal, observe_only=observe_only, missing_why=missing_why
    )
    unjudged = {c: j.why for c, j in judged.items() if j.held and j.standing is Standing.UNJUDGED}
    if counted:
        verdict = RoundVerdict.FAILED
    elif any(o.status in _NO_VERDICT for o in outcomes) or not outcomes:
        verdict = RoundVerdict.FROZEN  # no evidence at all is no clean round either
    elif unjudged:
        verdict = RoundVerdict.UNJUDGED
    else:
        verdict = RoundVerdict.CLEAN
    return ProviderRound(
        tag=tag,
        verdict=verdict,
        reasons=tuple(sorted({_reason(o) for o in counted})),
        failing_contracts=len({o.contract for o in counted}),
        ignored_reasons=tuple(sorted({_reason(o) for o in ignored})),
        clean_contracts=tuple(c for c, j in judged.items() if j.standing is Standing.PASSED),
        held_to=held,
        unjudged=unjudged,
        unverified=tuple(c for c, j in judged.items() if j.unverified),
    )
