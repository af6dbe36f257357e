"""What the gateway measured of its routes and their providers (SPEC R13): a bounded sliding
window of recent outcomes per (kind, route, provider), and the percentiles an attempt's
budget is sized from. Pure: `now` is always passed in; no clock, no I/O.

    book = LatencyBook(settings.routing)
    book.add(kind, "llama-70b", "DeepInfra", ttft_ms=310.0, total_ms=820.0, now=now)
    book.measured(kind, "llama-70b", exclude=frozenset({"startcorrupt"}), now=now)
        -> Measured(ttft_ms=..., total_ms=..., samples=...) | None (too few outcomes)

`kind` says what a sample's total time measures, so one workload's long replies never size
another's budget: the workload, and whether the reply was released as a stream (the total is
then the time to release) or read whole (`kind_of`). A route's need is read over the
outcomes of the providers it may still reach (those not excluded), since the aggregator, not
the gateway, picks the provider of the next attempt.

Bounds: at most `latency_window` outcomes per (kind, route, provider), none older than
`latency_window_s`, and at most `MAX_PROVIDERS` providers per (kind, route) (a provider name
comes from the upstream's reply: an upstream cannot grow this without bound).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from ground.settings import RoutingConfig

MAX_PROVIDERS = 64  # per (kind, route): a bound on what upstream replies can make us hold

Key = tuple[str, str]  # (kind, route id)


def kind_of(workload: str, *, released: bool) -> str:
    """What a sample's total measures: `chat/stream` (time to release), `invoice/whole`."""
    return f"{workload}/{'stream' if released else 'whole'}"


def quantile(values: Iterable[float], q: float) -> float:
    """The nearest-rank `q`-quantile of `values` (not empty): the smallest value with at least
    a share `q` of the values at or below it."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]


@dataclass(frozen=True, slots=True)
class Sample:
    at: float
    ttft_ms: float | None  # None: no first token (a reply of tool calls only, say)
    total_ms: float


@dataclass(frozen=True, slots=True)
class Measured:
    """A route's percentiles over the outcomes of the providers it may reach."""

    ttft_ms: float | None
    total_ms: float
    samples: int


class LatencyBook:
    """Recent outcomes per (kind, route, provider); `config`: settings.routing (its window,
    its age bound, the samples needed and the percentile), taken whole."""

    def __init__(self, config: RoutingConfig | None = None) -> None:
        self.config = config or RoutingConfig()
        self._windows: dict[Key, dict[str, deque[Sample]]] = {}

    def add(
        self,
        kind: str,
        route_id: str,
        provider: str | None,
        *,
        ttft_ms: float | None,
        total_ms: float,
        now: float,
    ) -> None:
        """One outcome; a provider beyond the first `MAX_PROVIDERS` of the route is dropped."""
        providers = self._windows.setdefault((kind, route_id), {})
        name = (provider or "").lower()
        window = providers.get(name)
        if window is None:
            if len(providers) >= MAX_PROVIDERS:
                return
            window = providers[name] = deque(maxlen=self.config.latency_window)
        window.append(Sample(now, ttft_ms, total_ms))

    def samples(
        self, kind: str, route_id: str, *, exclude: frozenset[str] = frozenset(), now: float
    ) -> list[Sample]:
        """The route's outcomes within the age bound, of providers not in `exclude` (names,
        any case); expired outcomes are dropped on the way."""
        out: list[Sample] = []
        oldest = now - self.config.latency_window_s
        excluded = {e.lower() for e in exclude}
        for name, window in self._windows.get((kind, route_id), {}).items():
            while window and window[0].at < oldest:
                window.popleft()
            if name not in excluded:
                out.extend(window)
        return out

    def measured(
        self, kind: str, route_id: str, *, exclude: frozenset[str] = frozenset(), now: float
    ) -> Measured | None:
        """The route's percentiles (`budget_percentile`), or None with fewer than
        `latency_min_samples` outcomes."""
        got = self.samples(kind, route_id, exclude=exclude, now=now)
        if len(got) < self.config.latency_min_samples:
            return None
        q = self.config.budget_percentile
        ttfts = [s.ttft_ms for s in got if s.ttft_ms is not None]
        return Measured(
            ttft_ms=quantile(ttfts, q) if ttfts else None,
            total_ms=quantile((s.total_ms for s in got), q),
            samples=len(got),
        )

    def providers(self, kind: str, route_id: str) -> list[str]:
        """The providers (lower case) seen serving the route for `kind`."""
        return sorted(p for p in self._windows.get((kind, route_id), {}) if p)
