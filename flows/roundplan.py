"""Pure planning of one canary round: which endpoints, which locale each one
gets, which are positive controls, and the ids that name the round.

No I/O and no clock: the round's logical time `at` is a parameter, so a
round can be replayed and the locale rotation is a function of `at` alone.

Rotation (C7, C8): rounds are numbered by half-hour slot since the epoch
(`round_index`); endpoint i (in sorted tag order) gets locale
`locales[(round_index + i) % len(locales)]`, so in one round the endpoints
cover different locales and over 17 rounds each endpoint sees every locale.
An endpoint whose language probe failed keeps that locale for its next round
(`sticky`), so it cannot escape the consecutive-rounds rule because the
rotation moved on.

Start samples (C9) are comparable across endpoints only when they answer the same
prompt: every endpoint of a round gets its extra start prompts in one shared
locale, `locales[round_index % len(locales)]` (`start_locale`), so the round's
endpoints form one locale group for the peer comparison (probes/peer_round.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from ground.clock import as_utc
from ground.errors import CanaryError
from ground.slugs import readable_slug
from probes.types import Endpoint

ROUND_SECONDS = 30 * 60


class PlanError(CanaryError, ValueError):
    """The requested round cannot be planned (e.g. an unknown endpoint subset)."""


def round_index(at: datetime) -> int:
    """The half-hour slot number of `at` (UTC)."""
    return int(as_utc(at).timestamp() // ROUND_SECONDS)


def round_id(model: str, at: datetime) -> str:
    """`<model-slug>@<ISO minute>`, unique per model and logical time."""
    return f"{readable_slug(model)}@{as_utc(at):%Y-%m-%dT%H:%M:%SZ}"


def assign_locales(
    tags: Iterable[str],
    locales: Sequence[str],
    index: int,
    sticky: Mapping[str, str | None] | None = None,
) -> dict[str, str]:
    """The locale each endpoint is probed in this round (see module docstring)."""
    if not locales:
        raise PlanError("at least one locale is required")
    sticky = sticky or {}
    plan: dict[str, str] = {}
    for i, tag in enumerate(sorted(set(tags))):
        kept = sticky.get(tag)
        plan[tag] = (
            kept if kept is not None and kept in locales else locales[(index + i) % len(locales)]
        )
    return plan


@dataclass(frozen=True)
class RoundPlan:
    round_id: str
    model: str
    at: datetime
    targets: tuple[Endpoint, ...]  # every endpoint probed (production, suspended, controls)
    controls: frozenset[str]  # positive-control tags among the targets
    locales: Mapping[str, str] = field(default_factory=dict)  # tag -> locale
    # discovered endpoints that serve traffic (usable, not a control), probed or not:
    # the capacity floor counts these even when a round probes a subset (Q4)
    production_tags: frozenset[str] = frozenset()
    start_locale: str | None = None  # the locale of every endpoint's start samples


def start_locale(locales: Sequence[str], index: int) -> str:
    """The locale all endpoints' start samples share in round `index`."""
    if not locales:
        raise PlanError("at least one locale is required")
    return locales[index % len(locales)]


def plan_round(
    model: str,
    at: datetime,
    endpoints: Sequence[Endpoint],
    *,
    locales: Sequence[str],
    controls: Iterable[str] = (),
    subset: Iterable[str] | None = None,
    sticky: Mapping[str, str | None] | None = None,
) -> RoundPlan:
    """Choose the targets and their locales. Every discovered endpoint is probed,
    suspended ones included (Q5); `subset` narrows it to known tags, and the
    positive controls are always added so the refusal probe is judged (C5)."""
    by_tag = {e.tag: e for e in endpoints}
    control_set = frozenset(controls) & set(by_tag)
    if subset is not None:
        wanted = list(dict.fromkeys(subset))
        unknown = [t for t in wanted if t not in by_tag]
        if unknown:
            raise PlanError(
                f"unknown endpoint(s) {unknown} for model {model}; known: {sorted(by_tag)}"
            )
        wanted += sorted(control_set - set(wanted))
        targets = tuple(by_tag[t] for t in wanted)
    else:
        targets = tuple(sorted(endpoints, key=lambda e: e.tag))
    at = as_utc(at)
    return RoundPlan(
        round_id=round_id(model, at),
        model=model,
        at=at,
        targets=targets,
        controls=control_set,
        locales=assign_locales(by_tag, locales, round_index(at), sticky),
        production_tags=frozenset(
            e.tag for e in endpoints if e.usable and e.tag not in control_set
        ),
        start_locale=start_locale(locales, round_index(at)),
    )


def launch_order(targets: Sequence[Endpoint]) -> list[Endpoint]:
    """The order a round starts its probes in: slowest first, by the aggregator's reported
    median first-token latency (`latency_p50_ms`), an endpoint without one first of all (it may be the
    slowest), ties in plan order. Longest first keeps the round near its slowest endpoint's
    chain: with bounded probe concurrency no slow endpoint waits for a slot behind fast
    ones, and at any concurrency the slow ones are not the last to open their clients."""
    return sorted(
        targets,
        key=lambda e: -e.latency_p50_ms if e.latency_p50_ms is not None else -math.inf,
    )


def next_slot_with_locale(
    tags: Iterable[str], locales: Sequence[str], tag: str, locale: str, after: datetime
) -> datetime | None:
    """The first half-hour slot after `after` at which the rotation probes `tag` in
    `locale` (None if `locale` is not configured or `tag` is not among `tags`)."""
    tags = list(tags)
    if locale not in locales or tag not in tags:
        return None
    first = (int(as_utc(after).timestamp()) // ROUND_SECONDS + 1) * ROUND_SECONDS
    for k in range(len(locales)):
        at = datetime.fromtimestamp(first + k * ROUND_SECONDS, UTC)
        if assign_locales(tags, locales, round_index(at))[tag] == locale:
            return at
    return None  # pragma: no cover - the rotation visits every locale within len(locales) slots
