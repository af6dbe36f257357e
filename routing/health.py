"""Route health for ranking (SPEC R6): EWMAs of success and latency per route (and per
provider of a route, keyed `route|provider`: kept, not ranked on), decayed
back towards healthy with a half-life so an old failure does not rank a route down
forever. Pure arithmetic; `now` is always passed in.
"""

from __future__ import annotations

from routing.capability import RouteHealth
from routing.routes import Route

HEALTH_HALF_LIFE_S = 30.0


class HealthBook:
    def __init__(self, half_life_s: float = HEALTH_HALF_LIFE_S) -> None:
        self.half_life_s = half_life_s
        self.health: dict[str, RouteHealth] = {}
        self._at: dict[str, float] = {}

    def at(self, now: float) -> dict[str, RouteHealth]:
        """Success EWMA decayed back towards 1.0 by the time since its last update."""
        return {key: self._decayed(key, h, now) for key, h in self.health.items()}

    def _decayed(self, key: str, h: RouteHealth, now: float) -> RouteHealth:
        age = max(0.0, now - self._at.get(key, now))
        rate = 1.0 - (1.0 - h.success_rate) * 0.5 ** (age / self.half_life_s)
        return RouteHealth(success_rate=rate, latency_ms=h.latency_ms)

    def update(self, route: Route, *, ok: bool, latency_s: float, now: float) -> None:
        """EWMAs (weight 0.2) of success and latency; latency starts from the route's prior."""
        self.update_key(route.id, route.latency_p50_ms, ok=ok, latency_s=latency_s, now=now)

    def update_key(
        self, key: str, prior_ms: float, *, ok: bool, latency_s: float, now: float
    ) -> None:
        """`update` for any key: a route's id, or one provider of it
        (`routing.providers.provider_key`), whose latency starts from `prior_ms`."""
        last = self.health.get(key)
        h = RouteHealth() if last is None else self._decayed(key, last, now)  # this key's only
        self._at[key] = now
        prior = prior_ms if h.latency_ms is None else h.latency_ms
        self.health[key] = RouteHealth(
            success_rate=0.8 * h.success_rate + 0.2 * (1.0 if ok else 0.0),
            latency_ms=0.8 * prior + 0.2 * latency_s * 1000,
        )
