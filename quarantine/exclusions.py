"""The three exclusion layers merged into the routing request's `provider.ignore` (Q7).

    builtin   vetted, versioned file in the repo (`quarantine/builtin.py`)
    incident  runtime exclusions an admin adds or removes at once (`quarantine/adapters/incidents.py`)
    canary    timed canary suspensions from the quarantine state, enforce mode only (Q3)

`merge_ignore` is pure: one entry per tag, sorted by tag; when a tag is in several layers the
first of builtin, incident, canary wins (its reason is shown). Expired incident entries and
ended suspensions drop out by themselves at `now`; shadow (observe) suspensions never enter.
Pure: no Prefect, no I/O. `quarantine.adapters.ignore.aignore_list(model, now)` reads the
three layers and merges them here; the router passes `ignore_tags(entries)` as
`provider.ignore`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from ground.clock import UtcDatetime, as_utc
from quarantine.builtin import BuiltinExclusion
from quarantine.models import Mode, ModelState

MAX_REASON_CHARS = 300


class RuntimeExclusion(BaseModel):
    model_config = ConfigDict(frozen=True)

    tag: str = Field(min_length=1)
    reason: str = Field(min_length=1, max_length=MAX_REASON_CHARS)
    author: str = Field(min_length=1)
    added_at: UtcDatetime
    until: UtcDatetime | None = None

    def active(self, now: datetime) -> bool:
        return self.until is None or self.until > now


class Layer(StrEnum):
    BUILTIN = "builtin"
    INCIDENT = "incident"
    CANARY = "canary"


_PRECEDENCE = {Layer.BUILTIN: 0, Layer.INCIDENT: 1, Layer.CANARY: 2}


class IgnoreEntry(BaseModel):
    model_config = ConfigDict(frozen=True)

    tag: str
    layer: Layer
    reason: str
    until: UtcDatetime | None = None


def merge_ignore(
    model: str,
    builtin: Sequence[BuiltinExclusion],
    runtime: Sequence[RuntimeExclusion],
    state: ModelState | None,
    now: datetime,
) -> list[IgnoreEntry]:
    """The merged, sorted, de-duplicated ignore entries of `model` at `now` (pure)."""
    now = as_utc(now)
    found: list[IgnoreEntry] = [
        IgnoreEntry(tag=b.slug, layer=Layer.BUILTIN, reason=b.reason)
        for b in builtin
        if b.matches(model)
    ]
    found += [
        IgnoreEntry(
            tag=r.tag, layer=Layer.INCIDENT, reason=f"{r.reason} ({r.author})", until=r.until
        )
        for r in runtime
        if r.active(now)
    ]
    if state is not None and state.mode is Mode.ENFORCE:
        for tag, ps in state.providers.items():
            until = ps.suspended_until
            if until is not None and until > now:
                why = "; ".join(ps.last_reasons) or "failed consecutive canary rounds"
                found.append(
                    IgnoreEntry(
                        tag=tag,
                        layer=Layer.CANARY,
                        reason=f"canary suspension, rung {ps.suspensions}: {why}",
                        until=until,
                    )
                )
    best: dict[str, IgnoreEntry] = {}
    for entry in sorted(found, key=lambda e: (e.tag, _PRECEDENCE[e.layer])):
        best.setdefault(entry.tag, entry)
    return [best[tag] for tag in sorted(best)]


def covers(entries: Sequence[IgnoreEntry], tag: str) -> bool:
    """Whether `tag` ("provider/variant") is excluded by an entry (full tag or base slug)."""
    slugs = {e.tag for e in entries}
    return tag in slugs or tag.split("/", 1)[0] in slugs


def excluded_by_layers(
    entries: Sequence[IgnoreEntry],
    tags: Sequence[str],
    layers: Sequence[Layer] = (Layer.BUILTIN, Layer.INCIDENT),
) -> frozenset[str]:
    """Of `tags`, those excluded by `layers`: the round report's `excluded_tags` (Q4)."""
    chosen = [e for e in entries if e.layer in layers]
    return frozenset(t for t in tags if covers(chosen, t))


def ignore_tags(entries: Sequence[IgnoreEntry]) -> list[str]:
    """The `provider.ignore` list: tags only, in order."""
    return [e.tag for e in entries]
