"""Reading the three exclusion layers of a model and merging them (Q7).

The built-in file, the runtime Variable and the canary's state block are read here; the
merge itself is the pure `quarantine.exclusions.merge_ignore`. Only Prefect's client API
(blocks and variables) is used: the gateway imports this without Prefect's flow engine.

A runtime Variable with invalid entries never costs the other layers: those entries are
skipped with a warning (`aignore_report` returns the warnings for status and the CLI),
and the built-in and canary layers still apply.

A canary round reads the built-in and runtime layers once (`aread_layers`) and merges them
with the state it holds: before its policy step and again with the state it applied.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from quarantine.adapters.incidents import RuntimeLayer, aread_runtime_layer
from quarantine.adapters.store import aload_state
from quarantine.builtin import BuiltinExclusion, load_builtin
from quarantine.exclusions import IgnoreEntry, merge_ignore
from quarantine.models import ModelState


@dataclass(frozen=True)
class ExclusionLayers:
    """The built-in and runtime layers of `model` as read once; the canary layer is the
    quarantine state's, merged in by `entries`."""

    model: str
    builtin: list[BuiltinExclusion]
    runtime: RuntimeLayer

    def entries(self, state: ModelState | None, now: datetime) -> list[IgnoreEntry]:
        """The merged entries at `now` with `state`'s canary suspensions (pure)."""
        return merge_ignore(self.model, self.builtin, self.runtime.entries, state, now)


async def aread_layers(model: str, *, builtin_path: Path | str | None = None) -> ExclusionLayers:
    """Read the built-in file and the runtime Variable of `model` (one API call)."""
    return ExclusionLayers(model, load_builtin(builtin_path), await aread_runtime_layer(model))


@dataclass
class IgnoreReport:
    entries: list[IgnoreEntry]
    warnings: list[str] = field(default_factory=list)


async def aignore_report(
    model: str, now: datetime, *, builtin_path: Path | str | None = None
) -> IgnoreReport:
    """The merged entries of `model` at `now`, and a warning per invalid runtime entry."""
    layers = await aread_layers(model, builtin_path=builtin_path)
    state = await aload_state(model)
    return IgnoreReport(layers.entries(state, now), layers.runtime.problems)


async def aignore_list(
    model: str, now: datetime, *, builtin_path: Path | str | None = None
) -> list[IgnoreEntry]:
    """Read the three layers of `model` and merge them at `now`."""
    return (await aignore_report(model, now, builtin_path=builtin_path)).entries
