"""Round verdicts from contract outcomes (SPEC Q1, C5)."""

from __future__ import annotations

import pytest

from probes.types import Contract, Outcome, OutcomeStatus
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
        ([o(L, INC), o(S, U), o(R, P)], RoundVerdict.CLEAN),
        ([o(L, P), o(S, T)], RoundVerdict.FROZEN),
        ([o(L, M)], RoundVerdict.FROZEN),
        ([o(L, FA), o(S, T)], RoundVerdict.FAILED),
        ([o(L, T), o(S, T), o(LAT, T)], RoundVerdict.FROZEN),
        ([], RoundVerdict.FROZEN),
    ],
    ids=["all-pass", "inconclusive-unsupported", "transport", "misrouted", "fail-beats-transport",
         "transport-only", "empty"],
)  # fmt: skip
def test_q1_round_verdict_table(outcomes: list[Outcome], verdict: RoundVerdict) -> None:
    """Q1: failed if any FAIL, else frozen if any transport/misrouted, else clean."""
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


def test_c5_weak_refusal_probe_failures_are_evidence_only() -> None:
    """C5: with refusal_weak, a refusal failure does not fail the round but is kept as evidence."""
    rnd = round_verdict("x", [o(R, FA, "silent_refusal"), o(L, P)], refusal_weak=True)
    assert rnd.verdict is RoundVerdict.CLEAN
    assert rnd.reasons == () and rnd.ignored_reasons == ("refusal:silent_refusal",)
    strong = round_verdict("x", [o(R, FA, "silent_refusal"), o(L, P)])
    assert strong.verdict is RoundVerdict.FAILED


def test_c8_language_counts_as_clean_only_when_judged_without_transport() -> None:
    """C8: a language contract with a transport outcome is not a clean language result."""
    assert "language" not in round_verdict("x", [o(L, P), o(L, T)]).clean_contracts
    assert "language" in round_verdict("x", [o(L, P), o(L, INC)]).clean_contracts
