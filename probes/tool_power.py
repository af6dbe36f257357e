"""The power of the tools contract's `calls` verdict against its peers, computed exactly
(no simulation; issue 22, item 5), from the real judges: the share bar of
probes/tool_verdicts.py and the peer comparison of probes/peers.py.

    p_round(rate, config, peers=14, base=0.0)   P(a host fails `calls` in one round)

A round judges n = `tool_samples` forced calls per endpoint. Each call of the host fails with
`rate`, each of its healthy peers' with `base`. The host fails the round when its k of n is
above the bar (>= 2 and >= `tool_failure_share`) and a significant outlier against the pooled
peers (one-sided Fisher exact, Bonferroni over peers + 1, `peer_alpha`, at least
`peer_min_effect` above). It is suspended at its second failing round with P(round)^2 (Q2).
bench/bench_contracts.py prints the figures; tests/probes/test_tool_power.py holds the
defaults to the stated ones.
"""

from __future__ import annotations

from functools import cache

from ground.settings import ProbeConfig
from probes.exact import binom_pmf
from probes.integrity import MIN_ANOMALOUS
from probes.peers import Observation, PeerDecision, Rate, compare_rates

TAIL = 1e-12  # pooled peer outcomes less likely than this are left out of the sum


def above_bar(k: int, n: int, config: ProbeConfig) -> bool:
    return (
        n >= config.start_anomaly_min_replies
        and k >= MIN_ANOMALOUS
        and k / n >= config.tool_failure_share
    )


@cache
def _fails(k: int, n: int, kp: int, np_: int, peers: int, config: ProbeConfig) -> bool:
    """The host with k of n fails against `peers` peers holding kp of np_ failures."""
    if not above_bar(k, n, config):
        return False
    per = np_ // peers
    obs = {"host": Observation(rate=Rate(k=k, n=n), above_bar=True)}
    left = kp
    for i in range(peers):  # the peers' failures, pooled as the comparison pools them
        mine = min(left, per)
        left -= mine
        obs[f"p{i}"] = Observation(rate=Rate(k=mine, n=per), above_bar=False)
    verdicts, _ = compare_rates(
        "tools",
        obs,
        alpha=config.peer_alpha,
        min_effect=config.peer_min_effect,
        pool_within_bar=True,
    )
    return verdicts["host"].decision in (PeerDecision.OUTLIER, PeerDecision.UNDERPOWERED)


def p_round(rate: float, config: ProbeConfig, *, peers: int = 14, base: float = 0.0) -> float:
    """P(the host fails the `calls` check in one round); see the module docstring."""
    n = config.tool_samples
    np_ = peers * n
    total = 0.0
    for kp in range(np_ + 1):
        w = binom_pmf(kp, np_, base)
        if w < TAIL and kp > np_ * base:
            break
        total += w * sum(
            binom_pmf(k, n, rate) for k in range(n + 1) if _fails(k, n, kp, np_, peers, config)
        )
    return total
