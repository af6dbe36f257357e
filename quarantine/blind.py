"""Is this round blind? A pure function of the round's outcomes and one setting.

A round is *blind* when what it saw says more about the canary (our key, our credits, our
network) than about the providers. A blind round must apply nothing: no streak moves, no
suspension, no reinstatement, and its half-hour slot stays unconsumed so the next trigger
tries again. The flow makes it a Failed run with the one-line `reason` and alerts admins
(`flows/blind.py`).

    key refused      any outcome carries HTTP 401 (or an in-band 401): our API key
    credits refused  any outcome carries HTTP 402: our credits / payment
    cannot see       at least `transport_share` of the judged endpoints ended `frozen`
                     (transport or misrouted outcomes kept them from a verdict); the reason
                     counts misrouted endpoints apart from transport failures. `unjudged`
                     endpoints (a weak probe, a model-level finding) are seen: not counted
    discovery        the endpoint listing answered 401/402 or could not be reached

One 401/402 is enough: OpenRouter answers them for the *caller's* key or credits, never
for a provider's quality, so any evidence gathered next to them is suspect.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from probes.errors import DiscoveryAuthError, DiscoveryError, DiscoveryTransportError
from probes.types import Outcome, OutcomeStatus
from quarantine.verdicts import ProviderRound, RoundVerdict

KEY_REFUSED = 401
CREDITS_REFUSED = 402


class BlindKind(StrEnum):
    KEY_REFUSED = "key_refused"
    CREDITS_REFUSED = "credits_refused"
    CANNOT_SEE = "cannot_see"
    DISCOVERY = "discovery"


class BlindRound(BaseModel):
    """Why a round is blind: `reason` is the one line shown on the run and the CLI."""

    model_config = ConfigDict(frozen=True)

    kind: BlindKind
    reason: str
    affected: tuple[str, ...] = ()  # endpoint tags that showed it
    endpoints: int = 0  # endpoints judged (or 0 for discovery)


def _status_of(o: Outcome) -> int | None:
    """The HTTP status (or in-band error code) an outcome recorded, if any."""
    for key in ("http_status", "error_code"):
        value = o.evidence.get(key)
        if isinstance(value, int) and value in (KEY_REFUSED, CREDITS_REFUSED):
            return value
    return None


def blind_round(
    verdicts: Mapping[str, ProviderRound],
    outcomes: Mapping[str, Sequence[Outcome]],
    *,
    transport_share: float,
) -> BlindRound | None:
    """The round is blind (see module docstring) or None. `verdicts` are the judged
    endpoints (controls excluded); `outcomes` every probed endpoint's outcomes."""
    if not 0 < transport_share <= 1:
        raise ValueError(f"transport_share must be in (0, 1], got {transport_share!r}")
    refused: dict[int, set[str]] = {KEY_REFUSED: set(), CREDITS_REFUSED: set()}
    for tag, items in outcomes.items():
        for o in items:
            status = _status_of(o)
            if status is not None:
                refused[status].add(tag)
    total = len(outcomes)
    if refused[KEY_REFUSED]:
        tags = tuple(sorted(refused[KEY_REFUSED]))
        return BlindRound(
            kind=BlindKind.KEY_REFUSED,
            reason=(
                f"upstream rejected the API key (HTTP 401 from {len(tags)} of {total} endpoints)"
            ),
            affected=tags,
            endpoints=total,
        )
    if refused[CREDITS_REFUSED]:
        tags = tuple(sorted(refused[CREDITS_REFUSED]))
        return BlindRound(
            kind=BlindKind.CREDITS_REFUSED,
            reason=(
                f"upstream refused our credits (HTTP 402 from {len(tags)} of {total} endpoints)"
            ),
            affected=tags,
            endpoints=total,
        )
    frozen = tuple(sorted(t for t, r in verdicts.items() if r.verdict is RoundVerdict.FROZEN))
    if verdicts and len(frozen) / len(verdicts) >= transport_share:
        return BlindRound(
            kind=BlindKind.CANNOT_SEE,
            reason=_cannot_see(frozen, outcomes, len(verdicts), transport_share),
            affected=frozen,
            endpoints=len(verdicts),
        )
    return None


def _cannot_see(
    frozen: Sequence[str],
    outcomes: Mapping[str, Sequence[Outcome]],
    judged: int,
    transport_share: float,
) -> str:
    """The reason of a round that could not see: misrouted endpoints (served by another
    provider than pinned) are counted apart from transport failures."""
    misrouted = [
        t for t in frozen if any(o.status is OutcomeStatus.MISROUTED for o in outcomes.get(t, ()))
    ]
    threshold = f"(threshold {transport_share:.0%}): the canary could not see the providers"
    if not misrouted:
        return f"{len(frozen)} of {judged} endpoints ended in transport errors {threshold}"
    cut = len(frozen) - len(misrouted)
    return (
        f"{len(frozen)} of {judged} endpoints could not be judged: {cut} ended in transport "
        f"errors, {len(misrouted)} were misrouted (served by another provider than pinned) "
        f"{threshold}"
    )


def blind_discovery(exc: DiscoveryError, base_url: str | None = None) -> BlindRound | None:
    """A discovery failure that blinds the round (our key, credits, or reachability), or
    None for one that is a real error of the request (unknown model, malformed listing).
    `base_url` (credentials in it are dropped) names where the listing was asked for."""
    at = f" at {_without_userinfo(base_url)}" if base_url else ""
    if isinstance(exc, DiscoveryAuthError) or exc.status == KEY_REFUSED:
        why = f"upstream{at} rejected the API key (discovery HTTP {exc.status})"
    elif exc.status == CREDITS_REFUSED:
        why = f"upstream{at} refused our credits (discovery HTTP 402)"
    elif isinstance(exc, DiscoveryTransportError):
        what = f"HTTP {exc.status}" if exc.status is not None else exc.detail
        why = f"the endpoint listing{at} could not be read ({what}): the canary could not see"
    else:
        return None
    return BlindRound(kind=BlindKind.DISCOVERY, reason=why)


def _without_userinfo(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    host, slash, path = rest.partition("/")
    return f"{scheme}{sep}{host.rpartition('@')[2]}{slash}{path}" if sep else url
