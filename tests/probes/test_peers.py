"""Verdicts by comparison with the peers (issue 14 item 1): decisions per endpoint and the
model-level finding, on hand-made counts. Pure."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ground.settings import ProbeConfig
from probes import peers
from probes.exact import bonferroni, fisher_greater
from probes.peers import (
    ModelFinding,
    Observation,
    PeerDecision,
    PeerVerdict,
    Rate,
)

D = PeerDecision
PEER_ALPHA, MIN_EFFECT = ProbeConfig().peer_alpha, ProbeConfig().peer_min_effect


def compare_rates(
    contract: str, observations: dict[str, Observation]
) -> tuple[dict[str, PeerVerdict], ModelFinding | None]:
    """The comparison at the default settings."""
    return peers.compare_rates(contract, observations, alpha=PEER_ALPHA, min_effect=MIN_EFFECT)


def obs(k: int, n: int, above: bool | None = None, reason: str = "stray_start") -> Observation:
    """An observation; above the bar by C9's share rule unless told otherwise."""
    bar = k >= 2 and n >= 3 and k / n >= 0.15 if above is None else above
    return Observation(rate=Rate(k=k, n=n), above_bar=bar, reason=reason)


def seed_round() -> dict[str, Observation]:
    """The seed incident: 19/20 on the pinned host, 0/49 over fourteen other hosts."""
    peers = {f"h{i:02d}": obs(0, 4 if i < 7 else 3) for i in range(14)}
    return {"startcorrupt": obs(19, 20), **peers}


def test_seed_incident_is_an_outlier_with_its_evidence() -> None:
    """19/20 vs 0/49: a significant outlier after correcting for 15 endpoints; k/n and p kept."""
    verdicts, finding = compare_rates("start", seed_round())
    v = verdicts["startcorrupt"]
    assert (v.decision, str(v.host), str(v.peers)) == (D.OUTLIER, "19/20", "0/49")
    assert v.p_value == pytest.approx(fisher_greater(19, 20, 0, 49))
    assert v.p_adjusted == pytest.approx(bonferroni(v.p_value, 15))
    assert v.evidence()["host"] == "19/20" and v.evidence()["decision"] == "outlier"
    assert finding is None
    assert {x.decision for t, x in verdicts.items() if t != "startcorrupt"} == {D.BELOW_BAR}


def test_one_odd_reply_in_20_is_neither_above_the_bar_nor_significant() -> None:
    """A healthy host with 1 odd reply in 20 against 0/49: below the bar, p = 20/69."""
    observations = {**seed_round(), "startcorrupt": obs(1, 20)}
    v = compare_rates("start", observations)[0]["startcorrupt"]
    assert v.decision is D.BELOW_BAR and v.p_adjusted == 1.0


def test_defect_every_host_shares_is_model_level_never_a_host_failure() -> None:
    """Every host at 8/8: no host fails; one finding names them all with the pooled rate."""
    observations = {f"h{i}": obs(8, 8, reason="quote_before_markdown") for i in range(6)}
    verdicts, finding = compare_rates("start", observations)
    assert {v.decision for v in verdicts.values()} == {D.MODEL_LEVEL}
    assert not any(v.decision.fails for v in verdicts.values())
    assert finding is not None
    assert (finding.hosts, len(finding.hosts_above), str(finding.pooled)) == (6, 6, "48/48")
    assert finding.reason == "quote_before_markdown"
    assert "on 6 of 6 endpoints" in finding.line()


def test_host_far_above_a_shared_style_is_still_an_outlier() -> None:
    """A model style at ~30% on every host; one host at 20/20 still fails against it."""
    observations = {f"h{i}": obs(6, 20) for i in range(8)}
    observations["bad"] = obs(20, 20)
    verdicts, finding = compare_rates("start", observations)
    assert verdicts["bad"].decision is D.OUTLIER
    assert {verdicts[f"h{i}"].decision for i in range(8)} == {D.MODEL_LEVEL}
    assert finding is not None and "bad" in finding.hosts_above


def test_above_the_bar_but_within_the_peers_variation_does_not_fail() -> None:
    """3/8 against peers at 12/112 (~11%): above the absolute bar, not an outlier."""
    observations = {f"h{i}": obs(1 if i < 12 else 0, 8, above=False) for i in range(14)}
    observations["odd"] = obs(3, 8)
    v = compare_rates("start", observations)[0]["odd"]
    assert v.decision is D.WITHIN_PEERS and not v.decision.fails
    assert v.p_floor <= PEER_ALPHA < v.p_adjusted


@pytest.mark.parametrize(
    ("failing", "hosts", "decision", "finding"),
    [
        (1, 22, D.UNDERPOWERED, False),  # 1/1 vs 0/21: no single sample can be significant
        (1, 1, D.UNDERPOWERED, False),  # no peers at all: the absolute rule alone
        (1, 2, D.UNDERPOWERED, False),  # one of two: not shared
        (2, 3, D.MODEL_LEVEL, True),  # two of three: the model's
        (22, 22, D.MODEL_LEVEL, True),  # the model refuses this scene on every host
    ],
)
def test_one_sample_contracts(failing: int, hosts: int, decision: D, finding: bool) -> None:
    """One probe per round (refusal, structured, the voted language verdict): the absolute rule
    decides unless most hosts share the failure."""
    observations = {f"h{i:02d}": obs(int(i < failing), 1, above=i < failing) for i in range(hosts)}
    verdicts, found = compare_rates("refusal", observations)
    assert verdicts["h00"].decision is decision
    assert (found is not None) is finding


def test_endpoints_without_judged_trials_are_neither_judged_nor_peers() -> None:
    """n = 0 (transport, unsupported): left out of the comparison and the pooled rate."""
    verdicts, _ = compare_rates("structured", {"a": obs(1, 1, above=True), "b": obs(0, 0)})
    assert set(verdicts) == {"a"} and str(verdicts["a"].peers) == "0/0"


@given(
    rates=st.lists(
        st.tuples(st.integers(0, 12), st.integers(1, 12), st.booleans()), min_size=1, max_size=12
    )
)
def test_decision_rule_property(rates: list[tuple[int, int, bool]]) -> None:
    """A host fails exactly when it is above its bar and either a significant outlier with
    the minimum effect, or not shared and beyond the test's reach; below the bar never fails."""
    observations = {
        f"h{i}": Observation(rate=Rate(k=min(k, n), n=n), above_bar=above)
        for i, (k, n, above) in enumerate(rates)
    }
    verdicts, finding = compare_rates("start", observations)
    above = [t for t, o in observations.items() if o.above_bar]
    shared = len(above) >= 2 and 2 * len(above) > len(observations)
    assert (finding is not None) is shared
    for tag, v in verdicts.items():
        outlier = v.p_adjusted <= PEER_ALPHA and v.effect >= MIN_EFFECT
        expected = v.above_bar and (outlier or (not shared and v.p_floor > PEER_ALPHA))
        assert v.decision.fails is expected, (tag, v)
        assert v.above_bar or v.decision is D.BELOW_BAR
