"""Exact tests for small counts, hand-written on log-gamma (no scipy). Pure functions.

    log_choose(n, k)                     ln C(n, k)
    fisher_greater(k1, n1, k2, n2)       one-sided Fisher exact p: row 1 rate > row 2 rate
    binom_pmf(x, n, p)                   P(X = x), X ~ Binomial(n, p) (the power bench)
    bonferroni(p, m)                     min(1, p * m)

`fisher_greater` conditions on both margins: with K = k1 + k2 events in N = n1 + n2 trials,
the p-value is P(X >= k1) where X is the number of events that fall into row 1
(Hypergeometric(N, K, n1)). It equals R's `fisher.test(matrix(c(k1, n1-k1, k2, n2-k2), 2,
byrow=TRUE), alternative="greater")$p.value`. Checked in tests against textbook tables
(the tea-tasting table: 17/70; Wikipedia's dieting table: 0.001346) and against exact
rational arithmetic with `math.comb`.

Terms are summed in log space relative to the largest one, so no intermediate over- or
underflows for the sizes a round produces (thousands of trials); relative error ~1e-12.
"""

from __future__ import annotations

import math


def log_choose(n: int, k: int) -> float:
    """ln C(n, k); -inf when k is outside 0..n."""
    if k < 0 or k > n or n < 0:
        return -math.inf
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def _log_sum(logs: list[float]) -> float:
    top = max(logs)
    if top == -math.inf:
        return -math.inf
    return top + math.log(sum(math.exp(v - top) for v in logs))


def fisher_greater(k1: int, n1: int, k2: int, n2: int) -> float:
    """One-sided Fisher exact p-value that row 1 (k1 events in n1 trials) has a higher event
    rate than row 2 (k2 in n2): P(X >= k1) with both margins fixed. 1.0 when there is no
    information (no trials, or no events anywhere)."""
    _check_counts(k1, n1, "k1", "n1")
    _check_counts(k2, n2, "k2", "n2")
    total, events = n1 + n2, k1 + k2
    if n1 == 0 or events == 0:
        return 1.0
    hi = min(events, n1)
    log_total = log_choose(total, n1)
    logs = [
        log_choose(events, x) + log_choose(total - events, n1 - x) - log_total
        for x in range(k1, hi + 1)
    ]
    return min(1.0, math.exp(_log_sum(logs)))


def binom_pmf(x: int, n: int, p: float) -> float:
    """P(X = x) for X ~ Binomial(n, p)."""
    if x < 0 or x > n:
        return 0.0
    if p in (0.0, 1.0):
        return 1.0 if x == (n if p == 1.0 else 0) else 0.0
    return math.exp(log_choose(n, x) + x * math.log(p) + (n - x) * math.log1p(-p))


def bonferroni(p: float, m: int) -> float:
    """The p-value corrected for `m` comparisons: min(1, p * m)."""
    if m < 1:
        raise ValueError(f"m must be >= 1, got {m}")
    return min(1.0, p * m)


def _check_counts(k: int, n: int, kname: str, nname: str) -> None:
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"need 0 <= {kname} <= {nname}, got {kname}={k}, {nname}={n}")
