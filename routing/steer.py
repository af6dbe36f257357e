"""Steering around one provider of a route's model (SPEC R9, R13): the thin shell that joins
the listing (`routing/listing.py`), the pure provider decisions (`routing/providers.py`) and
the circuit breakers (`routing/breaker.py`).

    steering.ignore_for(route, scope, quarantine_ignore, excluded, now)
        -> (ignore list for the attempt, provider circuits admitted half-open)
    steering.excludable(route, ignore, served_by)   tags that would exclude who served it
    steering.provider_tag(route, served_by)         the listing's tag for a provider name

Circuits per (model, provider): a provider's circuit is the breaker of the id
`provider_key(route, provider)` (in the same scopes as the route's: the workload). While it is
open, the provider's tags join every request's `provider.ignore` on that route; when its
open time is over, one request is let through to it (a half-open probe, given back when
another provider served).

What a request may use is decided in one place, `routing.providers.allowance`: the
quarantine's list and the route's own ignore always; then the providers the gateway ejected
(production evidence, O8, `routing/ejection.py`) and those whose circuit is open, each only
above the quarantine's capacity floor (`floor` endpoints left, `settings.policy.floor`), else
kept (allowed: the floor keeps the capacity); then the request's own exclusions (the
providers that served its failed attempts), as long as the route keeps a provider it may use
(a route pinned to one provider is left for another route, never retried without it). All of
it needs the listing: without one no provider is excluded, and every verdict goes to the
route's own circuit as before.
"""

from __future__ import annotations

from collections.abc import Iterable

from routing.breaker import BreakerBoard, CircuitStatus
from routing.ejection import EjectionBook
from routing.listing import ListingBook
from routing.providers import (
    Allowance,
    ListedEndpoint,
    allowance,
    allowed,
    pinned,
    provider_key,
    tag_of,
)
from routing.routes import Route


class Steering:
    def __init__(
        self,
        breakers: BreakerBoard,
        listings: ListingBook | None,
        floor: int,
        ejections: EjectionBook | None = None,
    ) -> None:
        self.breakers = breakers
        self.listings = listings
        self.floor = floor
        self.ejections = ejections

    def endpoints(self, route: Route) -> tuple[ListedEndpoint, ...]:
        return self.listings.endpoints(route.model) if self.listings is not None else ()

    def _base_ignore(self, route: Route, ignore: Iterable[str]) -> list[str]:
        """`ignore` with the route's own `provider.ignore`."""
        return sorted(set(route.provider.get("ignore", [])) | set(ignore))

    def ignore_for(
        self, route: Route, scope: str, ignore: Iterable[str], excluded: Iterable[str], now: float
    ) -> tuple[list[str], tuple[str, ...]]:
        """`allowance_for`'s `provider.ignore` and probes."""
        allow, probes = self.allowance_for(route, scope, ignore, excluded, now)
        return list(allow.ignore), probes

    def allowance_for(
        self, route: Route, scope: str, ignore: Iterable[str], excluded: Iterable[str], now: float
    ) -> tuple[Allowance, tuple[str, ...]]:
        """What the attempt may use (`routing.providers.allowance`): the quarantine's list
        (`ignore`), the providers the gateway ejected and those whose circuit is open (above
        the floor), the request's exclusions; plus the half-open provider circuits admitted
        as this attempt's probes (the caller gives them back)."""
        endpoints = self.endpoints(route)
        fixed = self._base_ignore(route, ignore)
        ejected = [
            e.provider for e in (self.ejections.ejected(route.model, now) if self.ejections else ())
        ]
        base = allowance(endpoints, fixed=fixed, floor=self.floor, route=route.provider,
                         ejected=ejected)  # fmt: skip
        probes: list[str] = []
        failing: list[str] = []
        for name in base.providers:
            key = provider_key(route.id, name)
            status = self.breakers.status(key, now, scope)
            if status is CircuitStatus.CLOSED:
                continue
            if status is CircuitStatus.HALF_OPEN and self.breakers.admit(key, now, scope):
                probes.append(key)
                continue
            failing.append(name)
        allow = allowance(
            endpoints, fixed=fixed, floor=self.floor, route=route.provider, ejected=ejected,
            open_circuits=failing, excluded=excluded,
        )  # fmt: skip
        return allow, tuple(probes)

    def excludable(
        self, route: Route, ignore: Iterable[str], served_by: str | None
    ) -> tuple[str, ...] | None:
        """The tags that would exclude `served_by` for the request's following attempts on
        this route, or None (no listing, a name it does not know, or no other provider the
        route may use: a route pinned to it). The capacity floor does not hold back one
        request's exclusion (`routing.providers.allowance`)."""
        if not served_by:
            return None
        name = served_by.strip().lower()
        left = allowed(
            pinned(self.endpoints(route), route.provider), self._base_ignore(route, ignore)
        )
        mine = tuple(sorted(e.tag for e in left if e.provider_name.lower() == name))
        if not mine or len(mine) == len(left):
            return None
        return mine

    def provider_tag(self, route: Route, served_by: str | None) -> str | None:
        return tag_of(self.endpoints(route), served_by)

    def another_provider(self, route: Route, ignore: Iterable[str]) -> bool:
        """Whether the route may still use two providers: a same-route fallback (another
        provider, the one that failed excluded for the request) is possible."""
        left = allowed(
            pinned(self.endpoints(route), route.provider), self._base_ignore(route, ignore)
        )
        return len({e.provider_name.lower() for e in left}) >= 2

    def release(self, probes: Iterable[str], now: float, scope: str) -> None:
        for key in probes:
            self.breakers.release(key, now, scope)
