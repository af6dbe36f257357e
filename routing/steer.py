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
another provider served). Exclusions never go below the quarantine's capacity floor
(`floor` endpoints left, `settings.policy.floor`) and need the listing: without one no
provider is excluded, and every verdict goes to the route's own circuit as before.

Ejections (SPEC O8, `routing/ejection.py`): a provider the gateway found suspect from
production traffic joins every request's `provider.ignore` of its model while its ejection
lasts, after the quarantine's list and the request's own exclusions, and only as far as the
floor allows for that request.
"""

from __future__ import annotations

from collections.abc import Iterable

from routing.breaker import BreakerBoard, CircuitStatus
from routing.ejection import EjectionBook
from routing.listing import ListingBook
from routing.providers import ListedEndpoint, allowed, exclusion, provider_key, tag_of
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
        """The attempt's `provider.ignore`: the quarantine's, the request's exclusions, the
        providers the gateway ejected (production evidence, O8) and those whose circuit is
        open, each above the floor; plus the half-open provider circuits admitted as this
        attempt's probes (the caller gives them back)."""
        out = sorted(set(ignore) | set(excluded))
        for ejection in self.ejections.ejected(route.model, now) if self.ejections else ():
            tags = exclusion(
                self.endpoints(route), self._base_ignore(route, out), ejection.provider, self.floor
            )
            if tags is not None:
                out = sorted(set(out) | set(tags))
        probes: list[str] = []
        names = sorted({e.provider_name for e in allowed(self.endpoints(route), out)})
        for name in names:
            key = provider_key(route.id, name)
            status = self.breakers.status(key, now, scope)
            if status is CircuitStatus.CLOSED:
                continue
            if status is CircuitStatus.HALF_OPEN and self.breakers.admit(key, now, scope):
                probes.append(key)
                continue
            tags = exclusion(self.endpoints(route), self._base_ignore(route, out), name, self.floor)
            if tags is not None:
                out = sorted(set(out) | set(tags))
        return out, tuple(probes)

    def excludable(
        self, route: Route, ignore: Iterable[str], served_by: str | None
    ) -> tuple[str, ...] | None:
        """The tags that would exclude `served_by` for the request's following attempts, or
        None (no listing, a name it does not know, or the capacity floor)."""
        if not served_by:
            return None
        return exclusion(
            self.endpoints(route), self._base_ignore(route, ignore), served_by, self.floor
        )

    def provider_tag(self, route: Route, served_by: str | None) -> str | None:
        return tag_of(self.endpoints(route), served_by)

    def another_provider(self, route: Route, ignore: Iterable[str]) -> bool:
        """Whether one provider of the route could be excluded and the floor still kept: a
        same-route fallback (another provider) is possible."""
        left = allowed(self.endpoints(route), self._base_ignore(route, ignore))
        return len({e.provider_name.lower() for e in left}) >= 2 and len(left) > self.floor

    def release(self, probes: Iterable[str], now: float, scope: str) -> None:
        for key in probes:
            self.breakers.release(key, now, scope)
