"""Where the gateway learns the providers behind its routes (SPEC R13): the aggregator's
endpoints listing of each route's model, `GET {base_url}/models/{model}/endpoints`, read at
startup and every `listing_refresh_s` (settings.routing), each fetch bounded by
`listing_timeout_s` and `max_listing_bytes`.

Why the listing, and not the route file: it is the aggregator's own word on which endpoints
serve a model now, with the two names of each (the slug `provider.ignore` takes, the display
name a reply carries), so the router can exclude the provider that just failed, count what
the quarantine's capacity floor leaves, and take `latency_last_30m` as the prior of a
provider it has not measured yet. The route file could only hold a hand-copied snapshot.

A fetch that fails keeps the last listing of that model (logged once per failure); a model
never listed has none, and then the router excludes no provider (it cannot name one nor
count the floor) and uses the route file's `latency_p50_ms` as its prior.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from urllib.parse import quote

from ground.settings import RoutingConfig
from routing.providers import ListedEndpoint, parse_listing
from routing.upstream import Upstream
from wire.text import upstream_text

log = logging.getLogger(__name__)


class ListingBook:
    """The last listing of each model; `refresh` fetches, `endpoints` reads (never waits)."""

    def __init__(self, upstream: Upstream | None, config: RoutingConfig | None = None) -> None:
        """`upstream`: the client whose base URL and key serve the listing (None: a book
        filled by `put` only); `config`: settings.routing, taken whole."""
        self.upstream = upstream
        self.config = config or RoutingConfig()
        self._listed: dict[str, tuple[ListedEndpoint, ...]] = {}

    def endpoints(self, model: str) -> tuple[ListedEndpoint, ...]:
        """The model's listed endpoints (empty when never listed)."""
        return self._listed.get(model, ())

    def put(self, model: str, endpoints: Iterable[ListedEndpoint]) -> None:
        self._listed[model] = tuple(endpoints)

    async def fetch(self, model: str) -> bool:
        """Fetch one model's listing; False (the last one kept, the failure logged) when it
        could not be read."""
        if self.upstream is None:
            return False
        c = self.config
        path = f"/models/{quote(model, safe='/')}/endpoints"
        try:
            payload = await self.upstream.get_json(
                path, timeout_s=c.listing_timeout_s, max_bytes=c.max_listing_bytes
            )
            endpoints = parse_listing(payload, scrub=self.upstream.scrub)
        except Exception as exc:  # a listing is a prior: never fatal to serving
            log.warning(
                "endpoints listing of %s unreadable (%s: %s); %s",
                model,
                type(exc).__name__,
                upstream_text(str(exc), self.upstream.scrub, 200),
                "keeping the last one" if model in self._listed else "no listing yet",
            )
            return False
        self._listed[model] = tuple(endpoints)
        return True

    async def refresh(self, models: Iterable[str]) -> int:
        """Fetch every model's listing at once; how many were read."""
        results = await asyncio.gather(*(self.fetch(m) for m in sorted(set(models))))
        return sum(results)

    async def refresh_every(self, models: Iterable[str]) -> None:
        """`refresh` every `listing_refresh_s`, forever (a background task of the gateway)."""
        wanted = sorted(set(models))
        while True:
            await asyncio.sleep(self.config.listing_refresh_s)
            await self.refresh(wanted)
