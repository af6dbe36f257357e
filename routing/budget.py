"""How much of the deadline one attempt may spend, so one fallback still fits (SPEC R4, R13).
Pure arithmetic in milliseconds; the caller passes what is left and what it measured.

    split(remaining_ms, deadline_ms=..., own=Need(...), fallback=Need(...) | None,
          config=settings.routing, allowances=settings.allowances) -> Budget

    usable     = remaining - reserve - validation          what the attempt could use alone
    kept       = max(fallback_share x deadline,             kept for one fallback, when a
                     headroom x fallback's total + validation)  compatible one exists and the
                                                            attempt budget allows another
                                                            attempt; 0 when keeping it would
                                                            leave this attempt less than its
                                                            connect + generation allowances
    total      = usable - kept, and at most headroom x its own measured total (the primary
                 gets no more than its own high percentile needs; unmeasured: no cap)
    ttft       = max(ttft_floor, headroom x its own first-token percentile), at most the
                 total; no first-token cut when no fallback is kept (nothing would use the
                 time it frees)

A need is read at `budget_percentile` over the gateway's own recent outcomes of the route's
reachable providers (`routing/latency.py`), else from the listing's `latency_last_30m` (first
token only), else from the route file's `latency_p50_ms` (`need_of`).

The write-up's example, an 8 s deadline with the defaults (reserve 250 ms + validation 50 ms,
fallback share 0.4) and a fallback not yet measured: 300 ms reserved, up to 4.5 s for the
primary, 3.2 s kept for the fallback.
"""

from __future__ import annotations

from dataclasses import dataclass

from ground.settings import Allowances, RoutingConfig
from routing.latency import Measured


@dataclass(frozen=True, slots=True)
class Need:
    """What an attempt on a route needs, at the budget percentile."""

    ttft_ms: float  # first token
    total_ms: float | None  # the whole attempt; None = not measured (no cap of its own)
    source: str  # "measured" | "listing" | "route"


@dataclass(frozen=True, slots=True)
class Budget:
    total_ms: float  # the attempt's budget: connect, headers, body (validation kept back)
    ttft_ms: float | None  # its first-token budget; None = no cut before the total
    kept_ms: float  # kept for one fallback (0: none)


def need_of(measured: Measured | None, listed_ttft_ms: float | None, route_ms: float) -> Need:
    """A route's need from what the gateway measured, else the listing's first-token prior,
    else the route file's `latency_p50_ms` (a first-token prior; no total of its own)."""
    if measured is not None:
        ttft = measured.ttft_ms if measured.ttft_ms is not None else measured.total_ms
        return Need(ttft, measured.total_ms, "measured")
    if listed_ttft_ms is not None:
        return Need(listed_ttft_ms, None, "listing")
    return Need(route_ms, None, "route")


def _kept_ms(
    usable_ms: float,
    deadline_ms: float,
    fallback: Need | None,
    config: RoutingConfig,
    allowances: Allowances,
) -> float:
    """What to keep for one fallback (see the module docstring)."""
    if fallback is None:
        return 0.0
    validation_ms = allowances.validation_s * 1000
    measured = (
        config.budget_headroom * fallback.total_ms + validation_ms
        if fallback.total_ms is not None
        else 0.0
    )
    want = max(config.fallback_share * deadline_ms, measured)
    minimum_ms = (allowances.connect_s + allowances.generation_s) * 1000
    return want if usable_ms - want >= minimum_ms else 0.0


def split(
    remaining_ms: float,
    *,
    deadline_ms: float,
    own: Need,
    fallback: Need | None,
    config: RoutingConfig,
    allowances: Allowances,
) -> Budget:
    """The budget of an attempt starting with `remaining_ms` left (see the module docstring)."""
    a = allowances
    usable = max(0.0, remaining_ms - (a.reserve_s + a.validation_s) * 1000)
    kept = _kept_ms(usable, deadline_ms, fallback, config, allowances)
    if not kept:
        return Budget(total_ms=usable, ttft_ms=None, kept_ms=0.0)
    total = usable - kept
    if own.total_ms is not None:
        minimum_ms = (a.connect_s + a.generation_s) * 1000
        total = min(total, max(minimum_ms, config.budget_headroom * own.total_ms))
    ttft = max(config.ttft_floor_s * 1000, config.budget_headroom * own.ttft_ms)
    return Budget(total_ms=total, ttft_ms=ttft if ttft < total else None, kept_ms=kept)
