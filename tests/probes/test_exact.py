"""Exact tests of the peer comparison (issue 14): textbook tables, exact rational reference."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probes.exact import (
    binom_pmf,
    bonferroni,
    fisher_greater,
    log_choose,
)


def _fisher_exact(k1: int, n1: int, k2: int, n2: int) -> Fraction:
    """Reference: P(X >= k1), X ~ Hypergeometric(n1 + n2, k1 + k2, n1), in exact rationals."""
    total, events = n1 + n2, k1 + k2
    den = math.comb(total, n1)
    num = sum(
        math.comb(events, x) * math.comb(total - events, n1 - x)
        for x in range(k1, min(events, n1) + 1)
    )
    return Fraction(num, den)


def test_fisher_textbook_tables() -> None:
    """Fisher's tea-tasting table (3/4 right vs 1/4): p = 17/70; Wikipedia's dieting table
    (9 of 12 women vs 1 of 12 men): one-sided p 0.001380."""
    assert fisher_greater(3, 4, 1, 4) == pytest.approx(17 / 70, rel=1e-12)
    assert fisher_greater(9, 12, 1, 12) == pytest.approx(3731 / 2704156, rel=1e-12)
    assert fisher_greater(9, 12, 1, 12) == pytest.approx(0.001380, abs=5e-7)


def test_binomial_known_values() -> None:
    """P(X = 2 | 4, 1/2) = 6/16; the certain and impossible cases are exact."""
    assert binom_pmf(2, 4, 0.5) == pytest.approx(6 / 16, rel=1e-12)
    assert binom_pmf(5, 5, 1.0) == 1.0 and binom_pmf(0, 5, 0.0) == 1.0
    assert binom_pmf(1, 5, 0.0) == 0.0 and binom_pmf(6, 5, 0.3) == 0.0


def test_seed_incident_is_significant_and_one_odd_reply_is_not() -> None:
    """The seed case (19/20 vs 0/49) is significant even corrected for 15 hosts; a healthy host
    with one odd reply in 20 against the same peers is not (p = 20/69)."""
    assert bonferroni(fisher_greater(19, 20, 0, 49), 15) < 1e-13
    assert fisher_greater(1, 20, 0, 49) == pytest.approx(20 / 69, rel=1e-12)
    assert bonferroni(fisher_greater(1, 20, 0, 49), 15) == 1.0


@settings(max_examples=300, deadline=None)
@given(
    n1=st.integers(0, 40),
    n2=st.integers(0, 60),
    a=st.integers(0, 40),
    b=st.integers(0, 60),
)
def test_fisher_matches_exact_rationals(n1: int, n2: int, a: int, b: int) -> None:
    """fisher_greater equals the exact hypergeometric tail to 1e-9 relative."""
    k1, k2 = min(a, n1), min(b, n2)
    expected = 1.0 if n1 == 0 or k1 + k2 == 0 else float(_fisher_exact(k1, n1, k2, n2))
    assert fisher_greater(k1, n1, k2, n2) == pytest.approx(expected, rel=1e-9, abs=1e-300)


@settings(max_examples=200, deadline=None)
@given(n=st.integers(0, 60), x=st.integers(-1, 61), num=st.integers(1, 99))
def test_binomial_pmf_matches_exact_rationals(n: int, x: int, num: int) -> None:
    """binom_pmf equals the exact binomial probability to 1e-9 relative."""
    p = Fraction(num, 100)
    expected = float(math.comb(n, x) * p**x * (1 - p) ** (n - x)) if 0 <= x <= n else 0.0
    assert binom_pmf(x, n, num / 100) == pytest.approx(expected, rel=1e-9, abs=1e-300)


def test_large_tables_stay_finite_and_exact() -> None:
    """Thousands of trials: no overflow, still the exact value."""
    p = fisher_greater(60, 400, 100, 4000)
    assert 0.0 < p < 1e-20
    assert p == pytest.approx(float(_fisher_exact(60, 400, 100, 4000)), rel=1e-9)
    assert fisher_greater(0, 400, 100, 4000) == 1.0


def test_edge_cases_and_bad_input() -> None:
    """No trials or no events carry no evidence (p = 1); impossible counts are ValueErrors."""
    assert fisher_greater(0, 0, 5, 10) == 1.0
    assert fisher_greater(0, 10, 0, 10) == 1.0
    assert log_choose(3, 5) == -math.inf
    assert bonferroni(0.01, 10) == pytest.approx(0.1) and bonferroni(0.5, 10) == 1.0
    with pytest.raises(ValueError, match="k1"):
        fisher_greater(5, 4, 0, 4)
    with pytest.raises(ValueError, match="m must be"):
        bonferroni(0.1, 0)
