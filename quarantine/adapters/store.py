"""Per-model quarantine state in a custom Prefect Block, with serialised, revision-checked writes.

One block document per model, named `model_slug(model)`, of block type
`canary-quarantine-state` (never rename the slug: stored documents are found by it). The
document holds the `ModelState` as JSON plus its revision; every block field is optional so
documents written by older versions still load.

`aupdate_state(model, fn)` is the only writer: under a global concurrency limit of 1
(`canary-quarantine-<slug>`, created on first use) it reads the document, applies the pure
`fn`, then re-reads the stored revision just before saving. Prefect's `save(overwrite=True)`
is last-writer-wins, so the re-read catches a writer that bypassed the lock: the update is
re-applied on the fresh state (up to `MAX_ATTEMPTS`), then refused with
`StaleRevisionError`. Never a silent lost update. A document that cannot be parsed raises
`StateCorruptError` and is left as it is.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import ClassVar

from prefect.blocks.core import Block
from prefect.client.orchestration import get_client
from prefect.exceptions import ObjectNotFound
from pydantic import ValidationError

from ground.slugs import model_slug
from quarantine.adapters.locking import serialised
from quarantine.errors import StaleRevisionError, StateCorruptError, UnknownModelError
from quarantine.models import Decision, ModelState

BLOCK_TYPE_SLUG = "canary-quarantine-state"
MAX_ATTEMPTS = 3
log = logging.getLogger(__name__)

Update = Callable[[ModelState], tuple[ModelState, list[Decision]]]


class QuarantineStateBlock(Block):
    """Quarantine state of one model (provider-canary). Written only by `aupdate_state`."""

    _block_type_name = "Canary Quarantine State"
    _block_type_slug = BLOCK_TYPE_SLUG  # documented, never rename
    _description = "Per-model provider quarantine state of provider-canary (JSON + revision)."
    _logo_url: ClassVar = None

    model: str | None = None
    revision: int | None = None
    state_json: str | None = None
    schema_version: int | None = 1


def block_name(model: str) -> str:
    return model_slug(model)


async def _read(model: str) -> ModelState | None:
    """The stored state, `None` if there is no document; `StateCorruptError` if unreadable."""
    name = block_name(model)
    async with get_client() as client:
        try:
            doc = await client.read_block_document_by_name(name, BLOCK_TYPE_SLUG)
        except ObjectNotFound:
            return None
    data = doc.data or {}
    raw, revision = data.get("state_json"), data.get("revision")
    where = f"block document {BLOCK_TYPE_SLUG}/{name}"
    if not isinstance(raw, str) or not isinstance(revision, int) or isinstance(revision, bool):
        raise StateCorruptError(f"{where}: missing or mistyped 'state_json'/'revision'; unchanged")
    try:
        state = ModelState.model_validate(json.loads(raw))
    except (json.JSONDecodeError, ValidationError) as exc:
        raise StateCorruptError(
            f"{where}: state_json is not a valid ModelState ({exc}); unchanged"
        ) from None
    if state.model != model:
        raise StateCorruptError(
            f"{where}: holds model {state.model!r}, expected {model!r}; unchanged"
        )
    return state.model_copy(update={"revision": revision})


async def aload_state(model: str, *, missing_ok: bool = True) -> ModelState:
    """The model's state; a fresh empty one (revision 0) if none is stored and `missing_ok`."""
    state = await _read(model)
    if state is None:
        if not missing_ok:
            raise UnknownModelError(
                f"no quarantine state stored for model {model!r} (no canary round has run for it)"
            )
        return ModelState(model=model)
    return state


async def _save(state: ModelState) -> None:
    block = QuarantineStateBlock(
        model=state.model, revision=state.revision, state_json=state.model_dump_json()
    )
    await block.asave(block_name(state.model), overwrite=True)


def state_lock_name(model: str) -> str:
    """The global concurrency limit that serialises writers of `model`'s state, held for
    one read-modify-write (rounds, lifts, clock resets). Rounds of a model are serialised
    by their own round lock (`lease.py`), not by this one."""
    return f"canary-quarantine-{model_slug(model)}"


async def aupdate_state(
    model: str, fn: Update, *, lock_held: bool = False
) -> tuple[ModelState, list[Decision]]:
    """Apply pure `fn` to the stored state, serialised and revision-checked; save and return.
    `lock_held=True` is for a caller that already holds `state_lock_name(model)`."""
    async with AsyncExitStack() as stack:
        if not lock_held:
            await stack.enter_async_context(serialised(state_lock_name(model)))
        for attempt in range(1, MAX_ATTEMPTS + 1):
            current = await aload_state(model)
            new, decisions = fn(current)
            if new.model != model:
                raise ValueError(f"update returned state of {new.model!r} for {model!r}")
            new = new.model_copy(update={"revision": current.revision + 1})
            stored = await _read(model)
            stored_revision = stored.revision if stored else 0
            if stored_revision != current.revision:
                log.warning(
                    "quarantine state of %s changed under us (revision %d -> %d, attempt %d); "
                    "re-applying",
                    model,
                    current.revision,
                    stored_revision,
                    attempt,
                )
                continue
            await _save(new)
            return new, decisions
    raise StaleRevisionError(
        f"quarantine state of {model!r} kept changing outside the lock for {MAX_ATTEMPTS} "
        "attempts; update refused, stored state untouched by this writer"
    )
