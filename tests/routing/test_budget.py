"""Attempt budgets from measured latency, as pure arithmetic (SPEC R4, R13): the split of a
deadline between an attempt and the one fallback it keeps time for, the sliding window of
outcomes it is sized from, and the listing's prior."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ground.settings import Allowances, RoutingConfig
from routing.budget import Need, need_of, split
from routing.latency import LatencyBook, Measured, kind_of, quantile
from routing.providers import (
    ListedEndpoint,
    allowed,
    exclusion,
    listed_ttft_ms,
    parse_listing,
    tag_of,
)

CONFIG = RoutingConfig()
ALLOW = Allowances()
COLD = Need(ttft_ms=400.0, total_ms=None, source="route")


def test_r13_the_write_ups_8_s_example_with_the_defaults() -> None:
    """8 s, the defaults, a fallback not measured yet: 300 ms reserved (250 ms + the 50 ms
    validation allowance), up to 4.5 s for the primary, 3.2 s kept for the fallback (R13)."""
    b = split(8000, deadline_ms=8000, own=COLD, fallback=COLD, config=CONFIG, allowances=ALLOW)
    assert (b.total_ms, b.kept_ms) == pytest.approx((4500.0, 3200.0))
    assert 8000 - b.total_ms - b.kept_ms == pytest.approx(300.0)
    assert b.ttft_ms == 1000.0  # the floor: a 400 ms prior times the headroom is less
    later = split(8000 - 4500, deadline_ms=8000, own=COLD, fallback=None, config=CONFIG,
                  allowances=ALLOW)  # fmt: skip
    assert later.total_ms == pytest.approx(3200.0) and later.ttft_ms is None


def test_r13_a_slow_measured_fallback_keeps_more_and_the_primary_its_own_percentile() -> None:
    """A fallback measured slower than the share keeps its own need; a primary measured
    fast gets no more than headroom x its percentile; its first-token cut follows its own
    first-token percentile above the floor (R13)."""
    slow = Need(ttft_ms=900.0, total_ms=2000.0, source="measured")
    fast = Need(ttft_ms=700.0, total_ms=800.0, source="measured")
    b = split(8000, deadline_ms=8000, own=fast, fallback=slow, config=CONFIG, allowances=ALLOW)
    assert b.kept_ms == pytest.approx(4050.0)  # 2 x 2000 + the fallback's validation
    assert b.total_ms == pytest.approx(1600.0)  # 2 x 800, less than the 3650 left
    assert b.ttft_ms == pytest.approx(1400.0)


def test_r13_no_fallback_kept_when_it_would_starve_the_attempt() -> None:
    """When keeping the fallback's need would leave the attempt less than its connect and
    generation allowances, nothing is kept and there is no first-token cut (R4, R13)."""
    huge = Need(ttft_ms=500.0, total_ms=10_000.0, source="measured")
    b = split(8000, deadline_ms=8000, own=COLD, fallback=huge, config=CONFIG, allowances=ALLOW)
    assert (b.total_ms, b.kept_ms, b.ttft_ms) == (pytest.approx(7700.0), 0.0, None)


@given(
    remaining=st.floats(0, 60_000),
    deadline=st.integers(1, 60_000),
    own_total=st.none() | st.floats(0, 30_000),
    fb_total=st.none() | st.floats(0, 30_000),
    ttft=st.floats(0, 30_000),
    with_fallback=st.booleans(),
)
def test_r13_a_budget_never_exceeds_what_is_left(
    remaining: float,
    deadline: int,
    own_total: float | None,
    fb_total: float | None,
    ttft: float,
    with_fallback: bool,
) -> None:
    """Whatever the needs: the budget plus what is kept plus the reserve and validation never
    exceed what is left, and a first-token cut is never later than the total (R4, R13)."""
    own = Need(ttft, own_total, "measured")
    fallback = Need(ttft, fb_total, "measured") if with_fallback else None
    b = split(remaining, deadline_ms=deadline, own=own, fallback=fallback, config=CONFIG,
              allowances=ALLOW)  # fmt: skip
    assert b.total_ms >= 0 and b.kept_ms >= 0
    reserve = (ALLOW.reserve_s + ALLOW.validation_s) * 1000
    assert b.total_ms + b.kept_ms <= max(0.0, remaining - reserve) + 1e-6
    assert b.ttft_ms is None or b.ttft_ms < b.total_ms


def test_r13_the_window_is_bounded_by_count_and_age_and_reads_the_reachable_providers() -> None:
    """Outcomes per (kind, route, provider) are kept up to the window size and age; a route's
    need is read over the providers not excluded, once enough outcomes are there (R13)."""
    config = RoutingConfig(latency_window=4, latency_window_s=60, latency_min_samples=3)
    book = LatencyBook(config)
    kind = kind_of("chat", released=False)
    for i in range(10):
        book.add(kind, "alpha", "Fast", ttft_ms=100.0 + i, total_ms=200.0 + i, now=float(i))
    assert [s.total_ms for s in book.samples(kind, "alpha", now=9.0)] == [206, 207, 208, 209]
    book.add(kind, "alpha", "Slow", ttft_ms=3000.0, total_ms=9000.0, now=9.0)
    assert book.measured(kind, "alpha", now=9.0) == Measured(3000.0, 9000.0, 5)
    assert book.measured(kind, "alpha", exclude=frozenset({"slow"}), now=9.0) == Measured(
        109.0, 209.0, 4
    )
    assert book.measured(kind, "alpha", now=100.0) is None  # all older than 60 s
    assert book.measured(kind_of("chat", released=True), "alpha", now=9.0) is None
    assert quantile([5.0, 1.0, 3.0, 2.0, 4.0], 0.95) == 5.0 and quantile([1.0, 2.0], 0.5) == 1.0


def test_r13_an_upstream_cannot_grow_the_window_without_bound() -> None:
    """Provider names come from replies: past MAX_PROVIDERS per route, new ones are dropped."""
    from routing.latency import MAX_PROVIDERS

    book = LatencyBook(RoutingConfig(latency_min_samples=1))
    for i in range(MAX_PROVIDERS + 50):
        book.add("k", "alpha", f"p{i}", ttft_ms=1.0, total_ms=1.0, now=0.0)
    assert len(book.providers("k", "alpha")) == MAX_PROVIDERS


LISTING = {
    "data": {
        "id": "acme/alpha",
        "endpoints": [
            {"tag": "alpha-a", "provider_name": "AlphaA",
             "latency_last_30m": {"p50": 300, "p75": 390, "p90": 540, "p99": 960}},
            {"tag": "alpha-b", "provider_name": "AlphaB", "latency_last_30m": None},
            {"tag": "alpha-c/fp8", "provider_name": "AlphaC",
             "latency_last_30m": {"p50": 800, "p99": float("nan")}},
            {"tag": "alpha-c/bf16", "provider_name": "AlphaC"},
            {"tag": None, "provider_name": "Broken"},
            "not a row",
        ],
    }
}  # fmt: skip


def test_r13_the_listing_is_read_in_milliseconds_and_bad_rows_are_skipped() -> None:
    """latency_last_30m is milliseconds (OPENROUTER.md); a NaN or a row without a tag is
    skipped, never fatal; the prior is the slowest allowed endpoint at the percentile (R13)."""
    eps = parse_listing(LISTING)
    assert [e.tag for e in eps] == ["alpha-a", "alpha-b", "alpha-c/fp8", "alpha-c/bf16"]
    assert eps[0].ttft_ms == ((0.5, 300.0), (0.75, 390.0), (0.9, 540.0), (0.99, 960.0))
    assert eps[2].ttft_ms == ((0.5, 800.0),)
    assert listed_ttft_ms(eps, [], 0.95) == 960.0  # alpha-a's p99 (the listed one above p95)
    assert listed_ttft_ms(eps, ["alpha-a"], 0.95) == 800.0  # alpha-c's highest listed
    assert listed_ttft_ms(eps, ["alpha-a", "alphac"], 0.95) is None
    with pytest.raises(ValueError):
        parse_listing({"data": []})


def test_r13_q4_exclusion_keeps_the_capacity_floor() -> None:
    """A provider is excluded by all its endpoint tags, never below the floor; a base slug
    matches every endpoint of a provider; a name the listing has once maps to its tag (R13, Q4)."""
    eps = [ListedEndpoint("alpha-a", "AlphaA"), ListedEndpoint("alpha-b", "AlphaB"),
           ListedEndpoint("alpha-c/fp8", "AlphaC"), ListedEndpoint("alpha-c/bf16", "AlphaC")]  # fmt: skip
    assert exclusion(eps, [], "alphaa", floor=2) == ("alpha-a",)
    assert exclusion(eps, [], "AlphaC", floor=2) == ("alpha-c/bf16", "alpha-c/fp8")
    assert exclusion(eps, ["alpha-c"], "AlphaA", floor=2) is None  # one would be left
    assert exclusion(eps, [], "Unknown", floor=2) is None
    assert [e.tag for e in allowed(eps, ["alpha-c"])] == ["alpha-a", "alpha-b"]
    assert tag_of(eps, "AlphaA") == "alpha-a" and tag_of(eps, "AlphaC") is None


def test_r13_need_prefers_measured_then_listed_then_the_route_file() -> None:
    """What the gateway measured wins, then the listing's first token, then the route file (R13)."""
    measured = Measured(ttft_ms=None, total_ms=700.0, samples=9)
    assert need_of(measured, 900.0, 400.0) == Need(700.0, 700.0, "measured")
    assert need_of(None, 900.0, 400.0) == Need(900.0, None, "listing")
    assert need_of(None, None, 400.0) == Need(400.0, None, "route")
