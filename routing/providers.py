"""The providers behind a route's model, as the aggregator's endpoints listing names them
(SPEC R13, Q4, Q7), and the decisions the router takes with them. Pure: data in, data out.

    parse_listing(payload)                 the listing's rows the router needs; a row it
                                           cannot read is skipped, never fatal
    allowed(endpoints, ignore)             the endpoints an `ignore` list leaves
    pinned(endpoints, provider)            the endpoints a route's `provider` object lets it
                                           use (its `only`, or its `order` without fallbacks)
    exclusion(endpoints, ignore, name, floor)
                                           the tags that exclude the provider `name`, or None
                                           when that would leave fewer than `floor` endpoints
                                           (the quarantine's capacity floor) or the listing
                                           does not know the name
    allowance(endpoints, fixed=..., ejected=..., open_circuits=..., excluded=..., floor=...)
                                           THE decision of what one request may use: every
                                           layer and the floor (see `allowance`)
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
from collections.abc import Iterable, Mapping, Sequence
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


def pinned(
    endpoints: Sequence[ListedEndpoint], provider: Mapping[str, Any]
) -> list[ListedEndpoint]:
    """The endpoints a route's `provider` object lets it reach: those its `only` names, else,
    when it does not allow fallbacks (the router sends `allow_fallbacks: false` unless the route
    says true), those its `order` names; else all of them. Its `ignore` is a layer of its own."""
    only = provider.get("only")
    if only:
        return [e for e in endpoints if any(e.matched_by(s) for s in only)]
    order = provider.get("order")
    if order and not provider.get("allow_fallbacks", False):
        return [e for e in endpoints if any(e.matched_by(s) for s in order)]
    return list(endpoints)


@dataclass(frozen=True, slots=True)
class Allowance:
    """What one request may use of a model's listing (see `allowance`)."""

    fixed: tuple[str, ...]  # always ignored: the route's own ignore and the quarantine's list
    ignore: tuple[str, ...]  # the attempt's provider.ignore: fixed, then what the layers took
    providers: tuple[str, ...]  # the route's providers every request may use (fixed, ejections)
    taken: tuple[tuple[str, str, tuple[str, ...]], ...] = ()  # (layer, provider, its tags)
    kept: tuple[tuple[str, str], ...] = ()  # (layer, provider) the floor kept allowed


def _names_of(endpoints: Iterable[ListedEndpoint]) -> tuple[str, ...]:
    return tuple(sorted({e.provider_name for e in endpoints}))


def allowance(
    endpoints: Sequence[ListedEndpoint],
    *,
    fixed: Iterable[str],
    floor: int,
    route: Mapping[str, Any] | None = None,
    ejected: Sequence[str] = (),
    open_circuits: Sequence[str] = (),
    excluded: Iterable[str] = (),
) -> Allowance:
    """What one request on a route of this model may use, every layer in one place:

    1. `fixed` (the route's own `provider.ignore`, the quarantine's built-in, runtime and
       canary layers): always ignored;
    2. `ejected` providers (the gateway's ejections in force, SPEC O8), then providers whose
       circuit is open (`open_circuits`): each ignored only while at least `floor` endpoints
       of the model stay allowed (the capacity floor, next to the layers before it) and the
       route keeps one it may use (`route`, its provider object: `pinned`); one the floor
       holds back is *kept* (allowed, and named in `kept`), never silently skipped;
    3. `excluded`, the request's own exclusions (the providers that served its failed
       attempts): each ignored while the route keeps an endpoint it may use. They bound one
       request, not the capacity every request shares, so the floor does not hold them back.

    `providers` are the route's providers left after 1 and 2: those every request may use.
    Decisions before a request (an ejection, `routing/ejection.py`) ask the same function."""
    scope = pinned(endpoints, route or {})
    out = sorted({s for s in fixed if s.strip()})
    fixed_out = tuple(out)
    taken: list[tuple[str, str, tuple[str, ...]]] = []
    kept: list[tuple[str, str]] = []
    providers: tuple[str, ...] = ()
    for layer, names in (("ejected", ejected), ("circuit_open", open_circuits)):
        for name in names:
            tags = exclusion(endpoints, out, name, floor)
            if tags is None:  # the floor keeps it (or it is not allowed anyway)
                if any(
                    e.provider_name.lower() == name.strip().lower() for e in allowed(endpoints, out)
                ):
                    kept.append((layer, name))
            elif allowed(scope, [*out, *tags]):  # else a route pinned to it keeps it
                out = sorted(set(out) | set(tags))
                taken.append((layer, name, tags))
        if layer == "ejected":
            providers = _names_of(allowed(scope, out))
    for slug in sorted(set(excluded) - set(out)):
        if allowed(scope, [*out, slug]):
            out.append(slug)
    return Allowance(fixed_out, tuple(sorted(out)), providers, tuple(taken), tuple(kept))


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
