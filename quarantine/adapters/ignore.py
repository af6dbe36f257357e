"""Reading the three exclusion layers of a model and merging them (Q7).

The built-in file, the runtime Variable and the canary's state block are read here; the
merge itself is the pure `quarantine.exclusions.merge_ignore`. Only Prefect's client API
(blocks and variables) is used: the gateway imports this without Prefect's flow engine.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from quarantine.adapters.incidents import aread_runtime_exclusions
from quarantine.adapters.store import aload_state
from quarantine.builtin import load_builtin
from quarantine.exclusions import IgnoreEntry, merge_ignore


async def aignore_list(
    model: str, now: datetime, *, builtin_path: Path | str | None = None
) -> list[IgnoreEntry]:
    """Read the three layers of `model` and merge them at `now`."""
    builtin = load_builtin(builtin_path)
    runtime = await aread_runtime_exclusions(model)
    state = await aload_state(model)
    return merge_ignore(model, builtin, runtime, state, now)
