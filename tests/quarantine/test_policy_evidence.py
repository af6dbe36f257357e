"""No clean verdict without evidence (SPEC Q5, C5, C13) through the pure verdict and policy:
an unjudged round moves no streak, what a host is held to is kept, and a hypothesis property:
no sequence of rounds in which a host never passes a judged probe of a contract it is held to
reinstates it early."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from ground.settings import PolicyConfig
from probes.types import Contract, Outcome, OutcomeStatus
from quarantine.judged import RefusalProbe
from quarantine.models import Decision, DecisionKind, ModelState, ProviderState, RoundReport
from quarantine.policy import step
from quarantine.verdicts import ProviderRound, RoundVerdict, round_verdict
from tests.fixtures.quarantine_support import HALF_HOUR, MODEL, T0, C, F, kinds, run

CONFIG = PolicyConfig()
HELD = tuple(sorted(c.value for c in Contract))
OBSERVE_ONLY = frozenset({"start:peer_outlier"})
U = RoundVerdict.UNJUDGED
NOT_A_PASS = [s for s in OutcomeStatus if s is not OutcomeStatus.PASS]
REASONS = st.sampled_from(["model_level", "within_peers", "too_few_replies", "rotated_out", "x"])


def _suspended_state(clean_streak: int) -> ModelState:
    """`h` suspended for 30 days (so no expiry interferes), with a clean streak already."""
    ps = ProviderState(
        suspended_at=T0 - HALF_HOUR,
        suspended_until=T0 + timedelta(days=30),
        suspensions=1,
        consecutive_clean_rounds=clean_streak,
        held_to=list(HELD),
    )
    return ModelState(model=MODEL, revision=1, providers={"h": ps})


@st.composite
def host_round(draw: st.DrawFn, never: Contract) -> tuple[list[Outcome], RefusalProbe]:
    """One round of `h`: every contract's outcome at random, except that `never` is never a
    judged pass (absent, or any status but a pass; a pass of a weak refusal probe proves
    nothing and is allowed)."""
    refusal = draw(st.sampled_from(list(RefusalProbe)))
    outcomes: list[Outcome] = []
    for contract in Contract:
        if contract is never:
            weak_pass_ok = contract is Contract.REFUSAL and refusal is RefusalProbe.WEAK
            allowed = list(OutcomeStatus) if weak_pass_ok else NOT_A_PASS
            if not draw(st.booleans()):
                continue  # not probed at all this round
            status = draw(st.sampled_from(allowed))
        else:
            status = draw(st.sampled_from(list(OutcomeStatus)))
        outcomes.append(Outcome(contract=contract, status=status, reason=draw(REASONS), tag="h"))
    if draw(st.booleans()):  # an observe-only failure, recorded and not counted
        outcomes.append(
            Outcome(
                contract=Contract.START, status=OutcomeStatus.FAIL, reason="peer_outlier", tag="h"
            )
        )
    return outcomes, refusal


@settings(max_examples=300, deadline=None)
@given(
    never=st.sampled_from(list(Contract)),
    clean_streak=st.integers(min_value=0, max_value=1),
    data=st.data(),
)
def test_q5_c5_no_round_without_a_judged_pass_of_a_held_contract_reinstates_early(
    never: Contract, clean_streak: int, data: st.DataObject
) -> None:
    """Q5/C5: a suspended host whose rounds never pass a judged probe of one contract it is
    held to (weak probes, model-level findings, inconclusive, unsupported, transport,
    misrouted, failures or no probe at all) is never reinstated early, whatever its other
    contracts do."""
    state = _suspended_state(clean_streak)
    rounds = data.draw(st.lists(host_round(never), min_size=1, max_size=12))
    for i, (outcomes, refusal) in enumerate(rounds):
        verdict = round_verdict(
            "h", outcomes, refusal=refusal, observe_only=OBSERVE_ONLY, held_to=HELD
        )
        assert verdict.verdict is not RoundVerdict.CLEAN
        report = RoundReport(
            round_id=f"r{i}", model=MODEL, at=T0 + i * HALF_HOUR, mode=state.mode,
            rounds={"h": verdict}, production_tags=frozenset({"h", "p1", "p2", "p3"}),
        )  # fmt: skip
        state, decisions = step(state, report, CONFIG)
        assert DecisionKind.REINSTATED_EARLY not in {d.kind for d in decisions}
        assert state.providers["h"].suspended(report.at)


def test_q5_the_same_host_passing_everything_twice_is_reinstated() -> None:
    """Q5 (the property's other side): two rounds in which every held contract was judged
    and passed, with a verified refusal probe, reinstate the suspended host early."""
    state = _suspended_state(0)
    passing = [
        Outcome(contract=c, status=OutcomeStatus.PASS, reason="ok", tag="h") for c in Contract
    ]
    decisions: list[Decision] = []
    for i in range(2):
        verdict = round_verdict("h", passing, refusal=RefusalProbe.VERIFIED, held_to=HELD)
        assert verdict.verdict is RoundVerdict.CLEAN
        report = RoundReport(
            round_id=f"r{i}", model=MODEL, at=T0 + i * HALF_HOUR, mode=state.mode,
            rounds={"h": verdict}, production_tags=frozenset({"h", "p1", "p2"}),
        )  # fmt: skip
        state, decisions = step(state, report, CONFIG)
    assert kinds(decisions) == [("reinstated_early", "h")]


def test_q2_q5_an_unjudged_round_moves_no_streak() -> None:
    """Q2/Q5: an unjudged round neither extends a failing streak nor counts toward the clean
    rounds, nor resets either: fail, unjudged, fail suspends at the second failing round."""
    state, decisions = run([{"a": F}, {"a": U}, {"a": U}])
    assert kinds(decisions) == []
    assert state.providers["a"].consecutive_failed_rounds == 1
    _, decisions = run([{"a": F}, {"a": U}, {"a": F}])
    assert kinds(decisions) == [("suspended", "a")]
    state, _ = run([{"a": C}, {"a": U}])
    assert state.providers["a"].consecutive_clean_rounds == 1
    assert state.providers["a"].recent_rounds[-1].verdict is U


def test_c5_what_a_host_is_held_to_is_kept_and_what_was_not_judged_is_noted() -> None:
    """C5: the contracts a round held the host to are stored in its state, and the round
    note says what was not judged and why."""
    verdict = ProviderRound(
        tag="a", verdict=U, held_to=("language", "refusal"), unjudged={"refusal": "weak probe"}
    )
    state, _ = run([{"a": verdict}])
    ps = state.providers["a"]
    assert ps.held_to == ["language", "refusal"]
    assert ps.recent_rounds[-1].unjudged == ["refusal: weak probe"]


def test_c5_a_model_without_controls_is_remembered_once_until_one_is_configured() -> None:
    """C5: the first round without a positive control records since when (the round alerts
    once: `canary.controls.missing`); later rounds keep that time; a round with a control
    clears it, so a later absence alerts again."""
    state = ModelState(model=MODEL)

    def after(at_n: int, missing: bool | None) -> ModelState:
        report = RoundReport(
            round_id=f"r{at_n}", model=MODEL, at=T0 + at_n * HALF_HOUR, mode=state.mode,
            rounds={}, controls_missing=missing, refusal_probe="unverified",
        )  # fmt: skip
        return step(state, report, CONFIG)[0]

    state = after(0, True)
    assert state.controls_missing_since == T0 and state.refusal_probe == "unverified"
    state = after(1, True)
    assert state.controls_missing_since == T0
    state = after(2, None)  # a triage does not know: unchanged
    assert state.controls_missing_since == T0
    state = after(3, False)
    assert state.controls_missing_since is None
