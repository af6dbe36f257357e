"""Which contracts a host is held to, and which of them a round judged (SPEC C5, C13, Q5).
Pure: outcomes and the listing in, judgements out.

No clean verdict without evidence. A contract that could not be judged for a host in a
round is *unjudged* for it: neither a failure nor evidence of health. A host is clean in a
round only when every contract it is held to was judged and passed
(`quarantine/verdicts.py`). Unjudged are:

    weak probe      the refusal contract while a positive control passed (C5): its passes
                    prove nothing and its failures are not counted
    model-level     a rate contract most hosts fail alike (the peer comparison's finding)
    within peers    a host above a contract's bar whose excess its peers share
    inconclusive    too short, ambiguous, undecided (C7, C8), too few replies (C9)
    no longer       a contract the host is held to that its listing stops advertising
    advertised      (so the host is not clean on it, nor frozen for ever either)
    transport       the request was cut off, rate limited, misrouted (Q1: the round freezes)
    not probed      no outcome at all (the round could not afford it: budget)

*Held to* is explicit per host and kept in its quarantine state (`ProviderState.held_to`):
seeded from what the listing advertises when the canary first sees the host, grown when
the listing advertises more, never shrunk by the canary itself. A host that never
advertised structured output is not held to it (its `unsupported` outcome is no evidence
missing); a host that stops advertising it stays held to it and is unjudged on it.

The refusal probe itself (`RefusalProbe`): *verified* when a positive control filtered as
expected this round (`ControlVerdict.verified`), *weak* when a control passed (unjudged),
*unverified* when no control judged it (none configured for the model, or the controls
were unreachable): its results count, shown as unverified, and a model without any control
alerts once (`canary.controls.missing`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from probes.refusal import ControlVerdict
from probes.rotation import ROTATED_OUT
from probes.types import Contract, Endpoint, Outcome, OutcomeStatus

NOT_PROBED = "not probed"

# Contracts whose request the listing gates: held to only when advertised. Every other
# contract applies to every host.
LISTED_CAPABILITIES: dict[Contract, Callable[[Endpoint], bool]] = {
    Contract.STRUCTURED: lambda e: e.supports_structured_output,
}


class RefusalProbe(StrEnum):
    VERIFIED = "verified"  # a positive control filtered as expected this round
    WEAK = "weak"  # a control passed: refusal is unjudged for every host this round
    UNVERIFIED = "unverified"  # no control judged the probe: results count, flagged


class Standing(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    UNJUDGED = "unjudged"
    NOT_HELD = "not held"  # unsupported, and the host is not held to it


class Judgement(BaseModel):
    """One contract of one host in one round."""

    model_config = ConfigDict(frozen=True)

    contract: str
    standing: Standing
    why: str = ""  # unjudged: why; failed: the failing reasons
    held: bool = True
    unverified: bool = False  # judged by a probe no positive control verified (refusal)


def refusal_probe(controls: Collection[str], verdict: ControlVerdict) -> RefusalProbe:
    """The refusal probe's standing this round, from the controls' verdict."""
    if controls and verdict.weak:
        return RefusalProbe.WEAK
    if controls and verdict.verified:
        return RefusalProbe.VERIFIED
    return RefusalProbe.UNVERIFIED


def advertised_contracts(endpoint: Endpoint, outcomes: Iterable[Outcome] = ()) -> frozenset[str]:
    """The contracts the listing advertises for `endpoint`: those of `LISTED_CAPABILITIES`
    whose capability it lists, and every other contract unless this round's outcome for it
    says the endpoint does not support it."""
    unsupported = {o.contract for o in outcomes if o.status is OutcomeStatus.UNSUPPORTED}
    out = set()
    for contract in Contract:
        needs = LISTED_CAPABILITIES.get(contract)
        if needs(endpoint) if needs is not None else contract not in unsupported:
            out.add(contract.value)
    return frozenset(out)


def held_contracts(stored: Iterable[str], advertised: Iterable[str]) -> tuple[str, ...]:
    """What the host is held to from this round on: what it was held to, plus what its
    listing advertises now (a first sight seeds it; nothing is dropped)."""
    return tuple(sorted({*stored, *advertised}))


def _why(o: Outcome) -> str:
    if o.status is OutcomeStatus.TRANSPORT:
        return f"transport ({o.reason})"
    if o.status is OutcomeStatus.MISROUTED:
        return "misrouted (served by another provider)"
    if o.status is OutcomeStatus.UNSUPPORTED:
        return "no longer advertised"
    return {
        "model_level": "model-level finding (most hosts share it)",
        "within_peers": "within its peers' rate",
        ROTATED_OUT: "budget: rotated out this round",
    }.get(o.reason, f"inconclusive ({o.reason})")


def judge_contract(
    contract: str,
    items: Sequence[Outcome],
    *,
    held: bool,
    refusal: RefusalProbe,
    missing_why: str = NOT_PROBED,
) -> Judgement:
    """One contract's judgement from its outcomes this round (observe-only failures
    already left out)."""
    is_refusal = contract == Contract.REFUSAL.value
    if is_refusal and refusal is RefusalProbe.WEAK and items:
        return Judgement(contract=contract, standing=Standing.UNJUDGED, held=held,
                         why="weak probe (a positive control passed)")  # fmt: skip
    failing = sorted({f"{contract}:{o.reason}" for o in items if o.is_failure})
    if failing:
        return Judgement(
            contract=contract, standing=Standing.FAILED, held=held, why=", ".join(failing)
        )
    if not items:
        return Judgement(contract=contract, standing=Standing.UNJUDGED, held=held, why=missing_why)
    if all(o.status is OutcomeStatus.PASS for o in items):
        unverified = is_refusal and refusal is RefusalProbe.UNVERIFIED
        return Judgement(
            contract=contract, standing=Standing.PASSED, held=held, unverified=unverified
        )
    if not held and all(o.status is OutcomeStatus.UNSUPPORTED for o in items):
        return Judgement(contract=contract, standing=Standing.NOT_HELD, held=False)
    first = next(o for o in items if o.status is not OutcomeStatus.PASS)
    return Judgement(contract=contract, standing=Standing.UNJUDGED, held=held, why=_why(first))


def default_held(outcomes: Iterable[Outcome]) -> tuple[str, ...]:
    """Without an explicit list: held to every contract with an outcome that is not
    `unsupported` (what the host showed it serves)."""
    return tuple(
        sorted({o.contract.value for o in outcomes if o.status is not OutcomeStatus.UNSUPPORTED})
    )


def judgements(
    outcomes: Sequence[Outcome],
    *,
    held_to: Collection[str],
    refusal: RefusalProbe,
    observe_only: Collection[str] = (),
    missing_why: str = NOT_PROBED,
) -> dict[str, Judgement]:
    """Every contract the host is held to or has an outcome for, judged (pure)."""
    by: dict[str, list[Outcome]] = {}
    for o in outcomes:
        if o.is_failure and f"{o.contract.value}:{o.reason}" in observe_only:
            continue  # recorded, not counted, and no reason to call the contract unjudged
        by.setdefault(o.contract.value, []).append(o)
    return {
        c: judge_contract(
            c, by.get(c, []), held=c in held_to, refusal=refusal, missing_why=missing_why
        )
        for c in sorted({*held_to, *by})
    }


def unverified_refusal(judged: Mapping[str, Judgement]) -> bool:
    """Whether the round judged this host's refusal with an unverified probe."""
    j = judged.get(Contract.REFUSAL.value)
    return j is not None and j.unverified


def refusal_line(standing: str | None, controls_missing_since: datetime | None) -> str:
    """The refusal contract of a model in one line, for `canary status`, the status
    artifact and the report."""
    if controls_missing_since is not None:
        return (
            "refusal contract: unverified: no positive control for this model since "
            f"{controls_missing_since:%Y-%m-%d %H:%M}Z (configure known-filtering hosts in "
            "CANARY_CONTROL_PROVIDERS)"
        )
    if standing == RefusalProbe.WEAK:
        return (
            "refusal contract: weak probe in the last round (a positive control passed): unjudged"
        )
    if standing == RefusalProbe.UNVERIFIED:
        return "refusal contract: unverified in the last round (no control could be judged)"
    if standing == RefusalProbe.VERIFIED:
        return "refusal contract: verified by the positive controls in the last round"
    return "refusal contract: not probed yet"
