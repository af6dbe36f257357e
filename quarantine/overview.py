"""Where each endpoint stands, as an analyst asks it (pure): suspended, shadow-suspended,
excluded by a built-in or incident entry, or active; with the layer and reason that put it
there, until when, its ladder rung, its streaks and its last round.

    endpoint_views(state, ignore, now)   one `EndpointView` per endpoint, most severe first

`canary status`, the `canary-status-<model>` artifact and the state block's readable fields
all read this one view. An endpoint excluded by a built-in or incident entry shows as
`excluded` with that layer even when the canary also suspended it: the exclusion is what
keeps traffic off it first (the same precedence as `provider.ignore`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from ground.clock import UtcDatetime, as_utc
from quarantine.exclusions import IgnoreEntry, Layer
from quarantine.models import Mode, ModelState, ProviderState


class Standing(StrEnum):
    SUSPENDED = "suspended"  # canary suspension in force (enforce mode): in provider.ignore
    SHADOW_SUSPENDED = "shadow-suspended"  # observe mode (or not enforced): recorded only
    EXCLUDED = "excluded"  # a built-in or runtime incident entry: in provider.ignore
    ACTIVE = "active"


_ORDER = {s: i for i, s in enumerate(Standing)}


class EndpointView(BaseModel):
    model_config = ConfigDict(frozen=True)

    tag: str
    standing: Standing
    layer: Layer | None = None  # what keeps it out of traffic (None: nothing, or shadow only)
    reason: str = ""  # why it stands there (suspension reasons or the exclusion's reason)
    until: UtcDatetime | None = None
    rung: int = 0
    failed_streak: int = 0
    clean_streak: int = 0
    last_round_id: str | None = None
    last_round_at: UtcDatetime | None = None
    last_verdict: str | None = None
    last_reasons: list[str] = Field(default_factory=list)
    last_unjudged: list[str] = Field(default_factory=list)  # "contract: why" (C5)
    held_to: list[str] = Field(default_factory=list)  # the contracts it is held to

    @property
    def why(self) -> str:
        """The last round in a few words: `clean`, `not judged: refusal (weak probe ...)`,
        `failed: start:stray_start`, `frozen`: an analyst tells a clean round from one
        that proved nothing."""
        verdict = self.last_verdict
        if verdict == "unjudged":
            return "not judged: " + "; ".join(self.last_unjudged)
        if verdict == "failed":
            return "failed: " + ", ".join(self.last_reasons)
        if verdict == "frozen" and self.last_unjudged:
            whys = sorted({line.partition(": ")[2] for line in self.last_unjudged})
            return "frozen: " + "; ".join(whys)
        return verdict or "-"


def _exclusion(entries: Sequence[IgnoreEntry], tag: str) -> IgnoreEntry | None:
    """The built-in or incident entry covering `tag` (full tag or base slug), built-in first."""
    base = tag.split("/", 1)[0]
    hits = [
        e for e in entries if e.layer in (Layer.BUILTIN, Layer.INCIDENT) and e.tag in (tag, base)
    ]
    hits.sort(key=lambda e: (e.layer is not Layer.BUILTIN, e.tag != tag))
    return hits[0] if hits else None


def _view(
    tag: str, ps: ProviderState, mode: Mode, entry: IgnoreEntry | None, now: datetime
) -> EndpointView:
    last = ps.recent_rounds[-1] if ps.recent_rounds else None
    common = {
        "tag": tag,
        "rung": ps.suspensions,
        "failed_streak": ps.consecutive_failed_rounds,
        "clean_streak": ps.consecutive_clean_rounds,
        "last_round_id": last.round_id if last else None,
        "last_round_at": last.at if last else None,
        "last_verdict": last.verdict.value if last else None,
        "last_reasons": list(last.reasons) if last else [],
        "last_unjudged": list(last.unjudged) if last else [],
        "held_to": list(ps.held_to),
    }
    suspended = ps.suspended(now)
    why = "; ".join(ps.last_reasons) or "failed consecutive canary rounds"
    if entry is not None:
        return EndpointView(
            standing=Standing.EXCLUDED,
            layer=entry.layer,
            reason=entry.reason,
            until=entry.until,
            **common,
        )
    if suspended and ps.suspended_until is not None and mode is Mode.ENFORCE:
        return EndpointView(
            standing=Standing.SUSPENDED, layer=Layer.CANARY, reason=why, until=ps.until, **common
        )
    if suspended:
        return EndpointView(
            standing=Standing.SHADOW_SUSPENDED, reason=why, until=ps.until, **common
        )
    return EndpointView(standing=Standing.ACTIVE, **common)


def endpoint_views(
    state: ModelState,
    ignore: Sequence[IgnoreEntry],
    now: datetime,
    extra_tags: Iterable[str] = (),
) -> list[EndpointView]:
    """Every endpoint of `state` (plus `extra_tags`, e.g. excluded ones the canary never
    judged) at `now`: suspended, shadow-suspended, excluded, active; then by tag."""
    now = as_utc(now)
    tags = set(state.providers) | set(extra_tags)
    views = [
        _view(
            tag, state.providers.get(tag, ProviderState()), state.mode, _exclusion(ignore, tag), now
        )
        for tag in tags
    ]
    return sorted(views, key=lambda v: (_ORDER[v.standing], v.tag))
