"""The power of the round's start verdict against its peers, computed exactly (pure; no
simulation). `bench/bench_peer_power.py` prints it per number of start samples; the budget
(`quarantine/budget.py`) never lowers the start samples below the smallest count at which
the seed's incident is still caught (`min_start_samples`).

A round judges each endpoint on n = 2 + s replies (the language and refusal replies plus s
start samples). A host fails START when it is above C9's bar (>= `start_anomaly_min_replies`
judged, >= 2 and >= `start_anomaly_share` anomalous) *and* a significant outlier against its
peers (one-sided Fisher exact, Bonferroni over every endpoint compared, `peer_alpha`, at
least `peer_min_effect` above the peers' rate). The healthy peers' replies are anomalous
with a base rate (0.3%: the measured per-reply false-alarm rate of the start rule);
`anomalous_peers` more peers are anomalous on every reply (in the seed-incidents fleet, the
mojibake host). For a host whose replies are defective with rate r:

    P(round)   = sum over host k and the peers' k of Binomial(k; n, r) Binomial(k'; peers n,
                 base) [the host fails]
    suspended  = P(round)^2: it fails two consecutive rounds (Q2), i.e. it is suspended at
                 its second round
"""

from __future__ import annotations

from functools import cache

from ground.settings import ProbeConfig
from probes.exact import binom_pmf, bonferroni, fisher_greater
from probes.integrity import MIN_ANOMALOUS

TAIL = 1e-12  # peer outcomes less likely than this are left out of the sum
SEED_DEFECT_RATE = 0.95  # the incident: 19 of 20 replies began with a stray mark
SEED_PEERS = 14  # ... while 14 other hosts showed it in 0 of 49
BASE_RATE = 0.003  # the start rule's measured per-reply false-alarm rate
TARGET = 0.95  # "caught": with at least this probability


def above_bar(k: int, n: int, config: ProbeConfig) -> bool:
    return (
        n >= config.start_anomaly_min_replies
        and k >= MIN_ANOMALOUS
        and k / n >= config.start_anomaly_share
    )


@cache
def fails(k: int, n: int, kp: int, np_: int, m: int, config: ProbeConfig) -> bool:
    """Whether a host with k of n anomalous replies fails against peers at kp of np_ (m
    endpoints compared)."""
    if not above_bar(k, n, config):
        return False
    p = bonferroni(fisher_greater(k, n, kp, np_), m)
    return p <= config.peer_alpha and k / n - kp / np_ >= config.peer_min_effect


def p_round(
    r: float, n: int, peers: int, base: float, config: ProbeConfig, anomalous_peers: int = 0
) -> float:
    """The probability that a host with defect rate r fails START in one round."""
    healthy_n = peers * n
    np_, m, bad = (peers + anomalous_peers) * n, peers + anomalous_peers + 1, anomalous_peers * n
    total = 0.0
    for kp in range(healthy_n + 1):
        w = binom_pmf(kp, healthy_n, base)
        if w < TAIL and kp > healthy_n * base:
            break
        host = sum(
            binom_pmf(k, n, r) for k in range(n + 1) if fails(k, n, kp + bad, np_, m, config)
        )
        total += w * host
    return total


def suspended_at_second_round(
    start_samples: int,
    config: ProbeConfig,
    *,
    rate: float = SEED_DEFECT_RATE,
    peers: int = SEED_PEERS,
    base: float = BASE_RATE,
    anomalous_peers: int = 0,
) -> float:
    """The probability that the host fails both of its first two rounds (Q2)."""
    return p_round(rate, 2 + start_samples, peers, base, config, anomalous_peers) ** 2


def min_start_samples(
    config: ProbeConfig,
    *,
    peers: int = SEED_PEERS,
    anomalous_peers: int = 0,
    target: float = TARGET,
    most: int = 20,
) -> int | None:
    """The smallest number of start samples at which the seed's 19/20 host is suspended at
    its second round with probability `target` (None if not within `most`)."""
    for s in range(most + 1):
        p = suspended_at_second_round(s, config, peers=peers, anomalous_peers=anomalous_peers)
        if p >= target:
            return s
    return None
