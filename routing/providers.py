"""The providers behind a route's model, as the aggregator's endpoints listing names them
(SPEC R13, Q4, Q7), and the decisions the router takes with them. Pure: data in, data out.

    parse_listing(payload)                 the listing's rows the router needs; a row it
                                           cannot read is skipped, never fatal
    allowed(endpoints, ignore)             the endpoints an `ignore` list leaves
    exclusion(endpoints, ignore, name, floor)
                                           the tags that exclude the provider `name` for a
                                           request's following attempts, or None when that
                                           would leave fewer than `floor` endpoints (the
                                           quarantine's capacity floor) or the listing does
                                           not know the name
    tag_of(endpoints, name)                the one endpoint tag a reply's provider name means
    provider_key(route_id, name)           the breaker and health id of a route's provider
    listed_ttft_ms(endpoints, ignore, q)   the prior for a provider not yet measured: the
                                           slowest allowed endpoint's listed first-token
                                           percentile at `q` (or the next one above)

A reply names its provider by display name (`"provider": "DeepInfra"`); `provider.ignore`
takes slugs. The listing joins the two: every endpoint carries both (`tag`,
`provider_name`). `latency_last_30m` is milliseconds to the first token (OPENROUTER.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from wire.text import NO_SECRET, Scrubber, upstream_text

_PERCENTILES = (("p50", 0.5), ("p75", 0.75), ("p90", 0.9), ("p99", 0.99))


@dataclass(frozen=True, slots=True)
class ListedEndpoint:
    tag: str  # the slug for provider.only / ignore, e.g. "deepinfra/fp8"
    provider_name: str  # what replies carry in their `provider` field
    status: int = 0
    ttft_ms: tuple[tuple[float, float], ...] = ()  # (percentile, ms), ascending

    def matched_by(self, slug: str) -> bool:
        """A full slug matches this endpoint, a base slug every endpoint of its provider
        (OpenRouter's rule); the provider's display name is accepted too."""
        s = slug.strip().lower()
        tag = self.tag.lower()
        return s in (tag, tag.split("/", 1)[0], self.provider_name.lower())


def provider_key(route_id: str, provider: str) -> str:
    """The breaker and health id of one provider of a route: `llama-70b|deepinfra`."""
    return f"{route_id}|{provider.strip().lower()}"


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) and number >= 0 else None


def _row(row: Any, scrub: Scrubber) -> ListedEndpoint | None:
    if not isinstance(row, dict):
        return None
    tag, name = row.get("tag"), row.get("provider_name")
    if not isinstance(tag, str) or not tag or not isinstance(name, str) or not name:
        return None
    latency = row.get("latency_last_30m")
    pairs: list[tuple[float, float]] = []
    if isinstance(latency, dict):
        for key, q in _PERCENTILES:
            ms = _number(latency.get(key))
            if ms is not None:
                pairs.append((q, ms))
    status = row.get("status")
    return ListedEndpoint(
        tag=upstream_text(tag, scrub, 100),
        provider_name=upstream_text(name, scrub, 100),
        status=int(status) if isinstance(status, int) and abs(status) < 1_000_000 else 0,
        ttft_ms=tuple(pairs),
    )


def parse_listing(payload: Any, *, scrub: Scrubber = NO_SECRET) -> list[ListedEndpoint]:
    """`GET /models/{id}/endpoints` -> the endpoints the router can use; rows without a tag
    or a provider name are skipped. Raises ValueError when the document has no endpoints list."""
    data = payload.get("data") if isinstance(payload, dict) else None
    rows = data.get("endpoints") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        raise ValueError('expected {"data": {"endpoints": [...]}}')
    return [e for e in (_row(r, scrub) for r in rows[:1000]) if e is not None]


def allowed(endpoints: Sequence[ListedEndpoint], ignore: Iterable[str]) -> list[ListedEndpoint]:
    """The endpoints no entry of `ignore` matches."""
    slugs = [s for s in ignore if s.strip()]
    return [e for e in endpoints if not any(e.matched_by(s) for s in slugs)]


def exclusion(
    endpoints: Sequence[ListedEndpoint], ignore: Iterable[str], provider: str, floor: int
) -> tuple[str, ...] | None:
    """The tags of `provider` (a reply's provider name) still allowed under `ignore`, to add
    to it; None when the listing does not know the name, nothing of it is allowed any more,
    or fewer than `floor` endpoints would remain."""
    ignore = list(ignore)
    left = allowed(endpoints, ignore)
    name = provider.strip().lower()
    mine = [e for e in left if e.provider_name.lower() == name]
    if not mine or len(left) - len(mine) < floor:
        return None
    return tuple(sorted(e.tag for e in mine))


def tag_of(endpoints: Sequence[ListedEndpoint], provider: str | None) -> str | None:
    """The endpoint tag a reply's provider name stands for, when the listing has exactly one
    endpoint of that name (else None: the reply does not say which of them served)."""
    if not provider:
        return None
    name = provider.strip().lower()
    tags = {e.tag for e in endpoints if e.provider_name.lower() == name}
    return next(iter(tags)) if len(tags) == 1 else None


def listed_ttft_ms(
    endpoints: Sequence[ListedEndpoint], ignore: Iterable[str], q: float
) -> float | None:
    """The slowest allowed endpoint's listed first-token time at percentile `q` (the listed
    percentile at or above `q`, else the highest listed): the prior for a route whose
    providers the gateway has not measured yet. None when none is listed."""
    best: float | None = None
    for e in allowed(endpoints, ignore):
        if not e.ttft_ms:
            continue
        ms = next((ms for p, ms in e.ttft_ms if p >= q), e.ttft_ms[-1][1])
        best = ms if best is None else max(best, ms)
    return best
