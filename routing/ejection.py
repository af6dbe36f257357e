"""The gateway's bounded local ejection of a suspect provider (SPEC O8, Q4). Pure: `now` is
always passed in; the book is a small mutable shell around pure rules.

    book = EjectionBook(settings.passive, floor=settings.policy.floor)
    book.decide(model, provider, reason, endpoints, now) -> Ejection | Held
    book.ejected(model, now)        the ejections of `model` in force now

Envoy's outlier-detection rule: the n-th ejection of a provider lasts `eject_base_s` x n,
capped at `eject_max_s`; a provider not ejected for `eject_forget_s` starts again at one.
Bounds: at most `max_ejected_share` of the model's listed providers are ejected at once
(one is always allowed), and an ejection that would leave fewer than `floor` allowed
endpoints (the quarantine's capacity floor, next to the other ejections in force) is held.
The router checks the floor again for every request, against that request's whole
`provider.ignore` (routing/steer.py). An ejection ends by itself: it is in force while
`now < until`, and nothing has to run for it to end.

Gateway-local and in memory: it never writes the quarantine's state, never suspends, and a
gateway restart forgets it; what it decided is recorded in the ledger (routing/passive_watch.py).
Without a listing of the model the provider cannot be named as a slug: nothing is ejected.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from ground.settings import PassiveConfig
from routing.providers import ListedEndpoint, exclusion


class Held(StrEnum):
    """Why a suspect provider was not ejected."""

    OBSERVE = "observed"  # ejection is off (settings.passive.eject): recorded and announced
    SHARE = "held_share"  # the share of providers ejected at once is reached
    FLOOR = "held_floor"  # fewer than `floor` allowed endpoints would remain
    UNLISTED = "held_unlisted"  # no listing names the provider: no slug to ignore
    ALREADY = "already_ejected"  # in force already (a reply that was under way)


@dataclass(frozen=True, slots=True)
class Ejection:
    model: str
    provider: str
    tags: tuple[str, ...]  # the slugs that join provider.ignore
    reason: str
    times: int  # the n-th ejection on the provider's ladder
    since: float
    until: float

    @property
    def length_s(self) -> float:
        return self.until - self.since


def ejection_length_s(times: int, config: PassiveConfig) -> float:
    """The n-th ejection's length: base x n, capped."""
    return min(config.eject_max_s, config.eject_base_s * max(1, times))


def ladder_times(last: Ejection | None, now: float, config: PassiveConfig) -> int:
    """The rung of a new ejection: one more than the last, or one again when the last ended
    `eject_forget_s` ago or more."""
    if last is None or now - last.until >= config.eject_forget_s:
        return 1
    return last.times + 1


def share_allows(ejected: int, providers: int, share: float) -> bool:
    """Whether one more of `providers` may be ejected while `ejected` are: at most
    max(1, floor(share x providers)) at once."""
    return ejected + 1 <= max(1, math.floor(share * providers))


def _names(endpoints: Sequence[ListedEndpoint]) -> set[str]:
    return {e.provider_name.strip().lower() for e in endpoints}


class EjectionBook:
    def __init__(self, config: PassiveConfig | None = None, *, floor: int) -> None:
        """`config`: settings.passive, taken whole; `floor`: settings.policy.floor."""
        self.config = config or PassiveConfig()
        self.floor = floor
        self._last: dict[tuple[str, str], Ejection] = {}

    def ejected(self, model: str, now: float) -> list[Ejection]:
        """The ejections of `model` in force at `now` (each ends by itself at its `until`)."""
        return [
            e for (m, _), e in sorted(self._last.items()) if m == model and e.since <= now < e.until
        ]

    def last(self, model: str, provider: str) -> Ejection | None:
        return self._last.get((model, provider.strip().lower()))

    def decide(
        self,
        model: str,
        provider: str,
        reason: str,
        endpoints: Sequence[ListedEndpoint],
        now: float,
    ) -> Ejection | Held:
        """Eject the suspect `provider` of `model` now, or say why not (see the module
        docstring); `endpoints`: the model's listing."""
        key = provider.strip().lower()
        last = self._last.get((model, key))
        if last is not None and last.since <= now < last.until:
            return Held.ALREADY
        if not self.config.eject:
            return Held.OBSERVE
        if key not in _names(endpoints):
            return Held.UNLISTED
        active = [e for e in self.ejected(model, now) if e.provider.strip().lower() != key]
        if not share_allows(len(active), len(_names(endpoints)), self.config.max_ejected_share):
            return Held.SHARE
        ignore = [t for e in active for t in e.tags]
        tags = exclusion(endpoints, ignore, provider, self.floor)
        if tags is None:
            return Held.FLOOR
        times = ladder_times(last, now, self.config)
        ejection = Ejection(
            model, provider, tags, reason, times, now, now + ejection_length_s(times, self.config)
        )
        self._last[(model, key)] = ejection
        return ejection
