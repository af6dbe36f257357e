"""Round verdicts from contract outcomes (SPEC Q1, Q5, C5, C13): no clean verdict without
evidence."""

from __future__ import annotations

import pytest

from probes.types import Contract, Outcome, OutcomeStatus
from quarantine.judged import RefusalProbe
from quarantine.verdicts import RoundVerdict, round_verdict

L, R, S, LAT = Contract.LANGUAGE, Contract.REFUSAL, Contract.STRUCTURED, Contract.LATENCY
P, FA, INC, T, U, M = (
    OutcomeStatus.PASS,
    OutcomeStatus.FAIL,
    OutcomeStatus.INCONCLUSIVE,
    OutcomeStatus.TRANSPORT,
    OutcomeStatus.UNSUPPORTED,
    OutcomeStatus.MISROUTED,
)


def o(contract: Contract, status: OutcomeStatus, reason: str = "r") -> Outcome:
    return Outcome(contract=contract, status=status, reason=reason, tag="x")


@pytest.mark.parametrize(
    ("outcomes", "verdict"),
    [
        ([o(L, P), o(S, P), o(LAT, P)], RoundVerdict.CLEAN),
        ([o(L, P), o(S, U), o(R, P)], RoundVerdict.CLEAN),
        ([o(L, INC), o(S, U), o(R, P)], RoundVerdict.UNJUDGED),
        ([o(L, P), o(S, T)], RoundVerdict.FROZEN),
        ([o(L, M)], RoundVerdict.FROZEN),
        ([o(L, FA), o(S, T)], RoundVerdict.FAILED),
        ([o(L, T), o(S, T), o(LAT, T)], RoundVerdict.FROZEN),
        ([], RoundVerdict.FROZEN),
    ],
    ids=["all-pass", "unsupported-not-held", "inconclusive", "transport", "misrouted",
         "fail-beats-transport", "transport-only", "empty"],
)  # fmt: skip
def test_q1_round_verdict_table(outcomes: list[Outcome], verdict: RoundVerdict) -> None:
    """Q1, Q5: failed if any FAIL, else frozen if any transport/misrouted, else unjudged if a
    contract it is held to was not judged (inconclusive), else clean. (Before issue 23 an
    inconclusive contract counted as clean.)"""
    assert round_verdict("x", outcomes).verdict is verdict


def test_q1_failing_reasons_and_contract_count() -> None:
    """Failing reasons are `contract:reason`, sorted, unique; contracts are counted once."""
    rnd = round_verdict(
        "x",
        [o(L, FA, "language_mixing"), o(L, FA, "language_mixing"), o(S, FA, "schema"), o(LAT, P)],
    )
    assert rnd.reasons == ("language:language_mixing", "structured:schema")
    assert rnd.failing_contracts == 2
    assert rnd.clean_contracts == ("latency",)


def test_c5_weak_refusal_probe_leaves_refusal_unjudged_not_clean() -> None:
    """C5, Q5: with a weak refusal probe (a positive control passed), a refusal failure does
    not fail the round and is kept as evidence, and the round is *unjudged*, not clean: the
    refusal contract was not judged, so it cannot count toward early reinstatement. (This
    test asserted CLEAN before issue 23: a weak probe's round is no evidence of health.)"""
    rnd = round_verdict("x", [o(R, FA, "silent_refusal"), o(L, P)], refusal_weak=True)
    assert rnd.verdict is RoundVerdict.UNJUDGED
    assert rnd.reasons == () and rnd.ignored_reasons == ("refusal:silent_refusal",)
    assert rnd.unjudged == {"refusal": "weak probe (a positive control passed)"}
    passing = round_verdict("x", [o(R, P), o(L, P)], refusal_weak=True)
    assert passing.verdict is RoundVerdict.UNJUDGED and "refusal" not in passing.clean_contracts
    strong = round_verdict("x", [o(R, FA, "silent_refusal"), o(L, P)])
    assert strong.verdict is RoundVerdict.FAILED


def test_c8_language_counts_as_clean_only_when_judged_and_passed() -> None:
    """C8: a language contract with a transport or an inconclusive outcome is not a clean
    language result (inconclusive is unjudged since issue 23)."""
    assert "language" not in round_verdict("x", [o(L, P), o(L, T)]).clean_contracts
    assert "language" not in round_verdict("x", [o(L, P), o(L, INC)]).clean_contracts
    assert "language" in round_verdict("x", [o(L, P), o(R, P)]).clean_contracts


@pytest.mark.parametrize(
    ("outcome", "why"),
    [
        (o(S, INC, "model_level"), "model-level finding (most hosts share it)"),
        (o(S, INC, "within_peers"), "within its peers' rate"),
        (o(S, INC, "too_few_replies"), "inconclusive (too_few_replies)"),
        (o(S, U, "not_advertised"), "no longer advertised"),
        (o(S, INC, "rotated_out"), "budget: rotated out this round"),
    ],
    ids=["model-level", "within-peers", "inconclusive", "listing-change", "rotated"],
)
def test_q5_c5_a_held_contract_not_judged_makes_the_round_unjudged(
    outcome: Outcome, why: str
) -> None:
    """Q5/C5: a contract the host is held to that a round could not judge (model-level
    finding, within its peers, inconclusive, no longer advertised, rotated out for the
    budget) is unjudged with its reason; the round is not clean."""
    rnd = round_verdict(
        "x", [o(L, P), o(R, P), outcome], held_to=("language", "refusal", "structured")
    )
    assert rnd.verdict is RoundVerdict.UNJUDGED
    assert rnd.unjudged == {outcome.contract.value: why}
    assert rnd.held_to == ("language", "refusal", "structured")


def test_q5_a_contract_the_host_is_not_held_to_is_no_missing_evidence() -> None:
    """Q5: a host that never advertised structured output is not held to it: its
    unsupported outcome leaves the round clean; a held contract with no outcome is not."""
    outcomes = [o(L, P), o(R, P), o(S, U, "not_advertised")]
    assert round_verdict("x", outcomes, held_to=("language", "refusal")).verdict is (
        RoundVerdict.CLEAN
    )
    missing = round_verdict("x", [o(L, P)], held_to=("language", "refusal"))
    assert missing.verdict is RoundVerdict.UNJUDGED
    assert missing.unjudged == {"refusal": "not probed"}


def test_c5_unverified_refusal_counts_but_is_marked() -> None:
    """C5: with no positive control the refusal contract's results count (a pass is
    judged, a failure fails) and are marked unverified."""
    rnd = round_verdict("x", [o(L, P), o(R, P)], refusal=RefusalProbe.UNVERIFIED)
    assert rnd.verdict is RoundVerdict.CLEAN and rnd.unverified == ("refusal",)
    failed = round_verdict("x", [o(L, P), o(R, FA)], refusal=RefusalProbe.UNVERIFIED)
    assert failed.verdict is RoundVerdict.FAILED
