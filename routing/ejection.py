"""The gateway's bounded local ejection of a suspect provider (SPEC O8, Q4). Pure: `now` is
always passed in; the book is a small mutable shell around pure rules.

    book = EjectionBook(settings.passive, floor=settings.policy.floor)
    book.decide(model, provider, reason, endpoints, now) -> Ejection | Held
    book.ejected(model, now)        the ejections of `model` in force now

Envoy's outlier-detection rule: the n-th ejection of a provider lasts `eject_base_s` x n,
capped at `eject_max_s`; a provider not ejected for `eject_forget_s` starts again at one.
Bounds: at most `max_ejected_share` of the model's listed providers are ejected at once
(one is always allowed), and an ejection that would leave fewer than `floor` allowed
endpoints is not made: the provider is *suspect, kept for capacity* (`Held.FLOOR`), and the
ledger, the event and /metrics say so. Whether the floor allows it is decided by the one
function that decides what a request may use (`routing.providers.allowance`), over the same
layers a request has: the quarantine's list (built-in, runtime, canary: `fixed`, from the
attempt that gave the evidence) and the other ejections in force; an ejection is applied
to every request before that request's own exclusions, so what is recorded as ejected is
what requests leave out. An ejection ends by itself: it is in force while `now < until`,
and nothing has to run for it to end; `lift` ends it early (a request found the floor
would not allow it any more: the quarantine's list grew meanwhile).

Gateway-local and in memory: it never writes the quarantine's state, never suspends, and a
gateway restart forgets it; what it decided is recorded in the ledger (routing/passive_watch.py).
Without a listing of the model the provider cannot be named as a slug: nothing is ejected.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from ground.settings import PassiveConfig
from routing.providers import ListedEndpoint, allowance


class Held(StrEnum):
    """Why a suspect provider was not ejected."""

    OBSERVE = "observed"  # ejection is off (settings.passive.eject): recorded and announced
    SHARE = "held_share"  # the share of providers ejected at once is reached
    FLOOR = "kept_for_capacity"  # suspect, kept: fewer than `floor` endpoints would remain
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
        self._kept: set[tuple[str, str]] = set()  # suspect, kept for capacity (the floor)

    def ejected(self, model: str, now: float) -> list[Ejection]:
        """The ejections of `model` in force at `now` (each ends by itself at its `until`)."""
        return [
            e for (m, _), e in sorted(self._last.items()) if m == model and e.since <= now < e.until
        ]

    def kept(self, model: str) -> set[str]:
        """The providers of `model` (lower case) the floor last kept from an ejection."""
        return {p for m, p in self._kept if m == model}

    def lift(self, model: str, provider: str, now: float) -> Ejection | None:
        """End the ejection of `provider` in force now (the floor does not allow it any
        more); the lifted ejection, or None when none was in force."""
        key = (model, provider.strip().lower())
        e = self._last.get(key)
        if e is None or not e.since <= now < e.until:
            return None
        self._last[key] = replace(e, until=now)
        self._kept.add(key)
        return e

    def last(self, model: str, provider: str) -> Ejection | None:
        return self._last.get((model, provider.strip().lower()))

    def decide(
        self,
        model: str,
        provider: str,
        reason: str,
        endpoints: Sequence[ListedEndpoint],
        now: float,
        *,
        fixed: Iterable[str] = (),
    ) -> Ejection | Held:
        """Eject the suspect `provider` of `model` now, or say why not (see the module
        docstring); `endpoints`: the model's listing, `fixed`: the quarantine's list."""
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
        allow = allowance(
            endpoints, fixed=fixed, floor=self.floor, ejected=[*(e.provider for e in active), key]
        )
        tags = next((t for layer, name, t in allow.taken if name == key), None)
        if tags is None:
            self._kept.add((model, key))
            return Held.FLOOR
        self._kept.discard((model, key))
        times = ladder_times(last, now, self.config)
        ejection = Ejection(
            model, provider, tags, reason, times, now, now + ejection_length_s(times, self.config)
        )
        self._last[(model, key)] = ejection
        return ejection
