"""Bench: power of the round's start-anomaly verdict against its peers, per number of start
samples, computed exactly (no simulation). Issue 14, item 4.

    .venv/bin/python bench/bench_peer_power.py [--peers 14] [--base-rate 0.003]

A round judges each endpoint on n = 2 + s replies (the language and refusal replies plus s
start samples). A host fails START when it is above C9's bar (>= 3 judged, >= 2 and >= 15%
anomalous) *and* a significant outlier against its peers (one-sided Fisher exact, Bonferroni
over the peers + 1 endpoints, alpha 0.05, at least 15 points above the peers' rate). The
peers are healthy: each of their replies is anomalous with the base rate (0.3%: the measured
per-reply false-alarm rate of the start rule on real text, ../shared/LANGUAGE.md). For a
host whose replies are defective with rate r:

    P(round)   = sum over host k and peers' k of Binomial(k; n, r) Binomial(k'; peers*n, base)
                 * [the host fails]
    suspended  = P(round)^2: it fails two consecutive rounds (Q2), i.e. it is suspended at its
                 second round
    flagged    = 1 - (1 - P(round))^2: it fails at least one of two rounds

The exact computation lives in `probes/power.py` (the budget's minimum start samples uses it).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ground.settings import ProbeConfig  # noqa: E402
from probes.exact import bonferroni, fisher_greater  # noqa: E402
from probes.power import fails as _fails  # noqa: E402
from probes.power import min_start_samples  # noqa: E402
from probes.power import p_round as _p_round  # noqa: E402

DEFAULTS = ProbeConfig()
PEER_ALPHA = DEFAULTS.peer_alpha


def fails(k: int, n: int, kp: int, np_: int, m: int) -> bool:
    return _fails(k, n, kp, np_, m, DEFAULTS)


def p_round(r: float, n: int, peers: int, base: float) -> float:
    return _p_round(r, n, peers, base, DEFAULTS)


def smallest_rate(target: float, fn: object, **kw: float) -> float:
    """The smallest defect rate r (to 0.001) with fn(r) >= target (fn is increasing in r)."""
    assert callable(fn)
    lo, hi = 0.0, 1.0
    if fn(hi, **kw) < target:
        return float("nan")
    while hi - lo > 1e-4:
        mid = (lo + hi) / 2
        if fn(mid, **kw) >= target:
            hi = mid
        else:
            lo = mid
    return hi


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--peers", type=int, default=14, help="healthy peers (the seed: 14)")
    ap.add_argument("--base-rate", type=float, default=0.003)
    ap.add_argument("--target", type=float, default=0.95)
    args = ap.parse_args()
    peers, base, target = args.peers, args.base_rate, args.target

    seed_p = bonferroni(fisher_greater(19, 20, 0, 49), 15)
    odd_p = bonferroni(fisher_greater(1, 20, 0, 49), 15)
    print("the seed's evidence, corrected for 15 endpoints:")
    print(f"  19/20 vs 0/49: p = {seed_p:.2e} (significant at {PEER_ALPHA})")
    print(f"   1/20 vs 0/49: p = {odd_p:.3f} (not significant; and below the 15% bar)")
    print()
    print(
        f"START verdict vs {peers} healthy peers (per-reply base rate {base}), alpha {PEER_ALPHA}, "
        f"target {target:.0%}"
    )
    print(
        f"{'start samples':>13} {'requests':>8} {'replies':>7} {'k to fail':>9} "
        f"{'r: round':>9} {'r: flagged in 2':>15} {'r: suspended':>12} {'P(0.95 defect)':>14} "
        f"{'healthy false fail':>18}"
    )
    for s in (2, 4, 6, 8, 10):
        n = 2 + s
        requests = 3 + s  # + the structured probe
        k_min = next((k for k in range(n + 1) if fails(k, n, 0, peers * n, peers + 1)), None)
        kw = {"n": n, "peers": peers, "base": base}
        per_round = smallest_rate(target, lambda r, **k: p_round(r, **k), **kw)
        flagged = smallest_rate(target, lambda r, **k: 1 - (1 - p_round(r, **k)) ** 2, **kw)
        suspended = smallest_rate(target, lambda r, **k: p_round(r, **k) ** 2, **kw)
        seed = p_round(0.95, n, peers, base)
        healthy = p_round(base, n, peers, base)
        mark = "  <- default" if s == 6 else ""
        print(
            f"{s:>13} {requests:>8} {n:>7} {k_min!s:>9} {per_round:>9.3f} {flagged:>15.3f} "
            f"{suspended:>12.3f} {seed:>14.4f} {healthy:>18.1e}{mark}"
        )
    print()
    print(
        "smallest start samples at which the 19/20 host is suspended at its second round "
        f"with 95%: {min_start_samples(DEFAULTS)} (the incident, 14 healthy peers), "
        f"{min_start_samples(DEFAULTS, peers=20, anomalous_peers=1)} (the seed-incidents "
        "fleet: 20 healthy peers and one anomalous on every reply); the budget's minimum"
    )
    print()
    print(
        "r: round = smallest defect rate failed in one round with the target probability;\n"
        "r: flagged in 2 = failed in at least one of two rounds; r: suspended = failed in both\n"
        "(suspended at the second round, Q2). One-sample contracts (refusal, structured, the\n"
        "voted language verdict) cannot be significant alone: the absolute rule decides there\n"
        "unless most endpoints share the failure (probes/peers.py)."
    )


if __name__ == "__main__":
    main()
