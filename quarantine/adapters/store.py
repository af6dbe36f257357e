"""Per-model quarantine state in a custom Prefect Block, with serialised, revision-checked writes.

One block document per model, named `model_slug(model)`, of block type
`canary-quarantine-state` (never rename the slug: stored documents are found by it). Its
fields are structured so the Blocks page of the Prefect UI shows them (schema version 2):

    model, mode, revision, updated_at, last_round_id, last_round_at
    suspended   one readable line per suspended or shadow-suspended endpoint
    endpoints   one entry per endpoint: state, until, rung, streaks, last reasons, last round,
                the contracts it is held to and what its last round could not judge
    providers   the policy's full memory per endpoint (`ProviderState`): what is read back
    refusal_probe, controls_missing_since   the refusal probe's standing (C5)
    bill        what the canary's rounds of the model cost today (C13)

`endpoints` and `suspended` are views written for analysts (as of `updated_at`); the state is
read from `providers`. Version 1 documents held the whole `ModelState` as one JSON string in
`state_json` (which the UI shows as "None"): they are read as before and rewritten in the
structured form by the next write (migrate on read, nothing lost). Every block field is
optional so documents written by older versions still load.

`aupdate_state(model, fn)` is the only writer: under a global concurrency limit of 1
(`canary-quarantine-<slug>`, created on first use) it reads the document (or starts from
the state the caller already read, `known`), applies the pure `fn`, then re-reads the stored
revision just before saving. Prefect's `save(overwrite=True)` is last-writer-wins, so the
re-read catches a writer that bypassed the lock: the update is re-applied on the fresh state
(up to `MAX_ATTEMPTS`), then refused with `StaleRevisionError`. Never a silent lost update.
The save is one update of the document just re-read when it already uses this block schema
(Prefect's own save registers type and schema and looks the document up again: five calls).
A document that cannot be parsed raises `StateCorruptError` and is left as it is.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from contextlib import AsyncExitStack, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import Any, ClassVar

from prefect.blocks.core import Block
from prefect.client.schemas.actions import BlockDocumentUpdate
from prefect.client.schemas.objects import BlockDocument
from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound, PrefectHTTPStatusError
from pydantic import BaseModel, Field, ValidationError

from ground.clock import UtcDatetime
from ground.prefect_api import busy_retry_client
from ground.slugs import model_slug
from quarantine.adapters.locking import serialised
from quarantine.budget import DayBill
from quarantine.errors import StaleRevisionError, StateCorruptError, UnknownModelError
from quarantine.models import Decision, Mode, ModelState, ProviderState
from quarantine.overview import EndpointView, Standing, endpoint_views

BLOCK_TYPE_SLUG = "canary-quarantine-state"
SCHEMA_VERSION = 2
MAX_ATTEMPTS = 3
log = logging.getLogger(__name__)

Update = Callable[[ModelState], tuple[ModelState, list[Decision]]]


class EndpointEntry(BaseModel):
    """One endpoint as the Blocks page shows it (a view; the state is read from `providers`)."""

    state: str  # active | suspended | shadow-suspended, as of the block's updated_at
    until: UtcDatetime | None = None
    rung: int = 0
    failed_streak: int = 0
    clean_streak: int = 0
    last_reasons: list[str] = Field(default_factory=list)
    last_round: str | None = None  # "<verdict> at <logical time>"
    held_to: list[str] = Field(default_factory=list)  # the contracts it is held to (C5)
    not_judged: list[str] = Field(default_factory=list)  # "contract: why", its last round


class QuarantineStateBlock(Block):
    """Quarantine state of one model (provider-canary). Written only by `aupdate_state`."""

    _block_type_name = "Canary Quarantine State"
    _block_type_slug = BLOCK_TYPE_SLUG  # documented, never rename
    _description = (
        "Per-model provider quarantine state of provider-canary: who is suspended, until when "
        "and why; one entry per endpoint."
    )
    _logo_url: ClassVar = None

    model: str | None = None
    mode: str | None = None
    revision: int | None = None
    updated_at: UtcDatetime | None = None
    last_round_id: str | None = None
    last_round_at: UtcDatetime | None = None
    suspended: list[str] | None = None
    endpoints: dict[str, EndpointEntry] | None = None
    providers: dict[str, ProviderState] | None = None
    refusal_probe: str | None = None
    controls_missing_since: UtcDatetime | None = None
    bill: DayBill | None = None
    state_json: str | None = None  # schema version 1 only; read, never written
    schema_version: int | None = SCHEMA_VERSION


def block_name(model: str) -> str:
    return model_slug(model)


@dataclass(frozen=True)
class Stored:
    """A stored state and the document holding it (its id and schema, for the next save)."""

    state: ModelState
    document: BlockDocument


async def _read_stored(model: str) -> Stored | None:
    """The stored state, `None` if there is no document; `StateCorruptError` if unreadable."""
    name = block_name(model)
    async with busy_retry_client() as client:
        try:
            doc = await client.read_block_document_by_name(name, BLOCK_TYPE_SLUG)
        except ObjectNotFound:
            return None
    data = doc.data or {}
    revision = data.get("revision")
    where = f"block document {BLOCK_TYPE_SLUG}/{name}"
    if not isinstance(revision, int) or isinstance(revision, bool):
        raise StateCorruptError(f"{where}: missing or mistyped 'revision'; unchanged")
    state = _state_of(data, where)
    if state.model != model:
        raise StateCorruptError(
            f"{where}: holds model {state.model!r}, expected {model!r}; unchanged"
        )
    return Stored(state.model_copy(update={"revision": revision}), doc)


async def _read(model: str) -> ModelState | None:
    """The stored state, `None` if there is no document; `StateCorruptError` if unreadable."""
    stored = await _read_stored(model)
    return stored.state if stored else None


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


def _state_of(data: dict[str, Any], where: str) -> ModelState:
    """The `ModelState` held by a document's data: the structured fields (version 2), or the
    JSON string of version 1. `StateCorruptError` when neither is readable."""
    providers, raw = data.get("providers"), data.get("state_json")
    try:
        if isinstance(providers, dict):
            return ModelState.model_validate(
                {
                    "model": data.get("model"),
                    "mode": data.get("mode") or Mode.OBSERVE.value,
                    "providers": providers,
                    "updated_at": data.get("updated_at"),
                    "last_round_id": data.get("last_round_id"),
                    "last_round_at": data.get("last_round_at"),
                    "refusal_probe": data.get("refusal_probe"),
                    "controls_missing_since": data.get("controls_missing_since"),
                    "bill": data.get("bill"),
                }
            )
        if isinstance(raw, str):
            return ModelState.model_validate(json.loads(raw))
    except (json.JSONDecodeError, ValidationError) as exc:
        raise StateCorruptError(f"{where}: not a valid ModelState ({exc}); unchanged") from None
    raise StateCorruptError(f"{where}: neither 'providers' nor 'state_json' is present; unchanged")


def _line(view: EndpointView) -> str:
    until = f" until {view.until:%Y-%m-%d %H:%M}Z" if view.until else ""
    return f"{view.tag}: {view.standing.value}{until}, rung {view.rung} ({view.reason})"


def _entry(v: EndpointView, ps: ProviderState) -> EndpointEntry:
    return EndpointEntry(
        state=v.standing.value,
        until=v.until,
        rung=v.rung,
        failed_streak=v.failed_streak,
        clean_streak=v.clean_streak,
        last_reasons=list(ps.last_reasons),
        last_round=(
            f"{v.last_verdict} at {v.last_round_at:%Y-%m-%d %H:%M}Z" if v.last_round_at else None
        ),
        held_to=list(v.held_to),
        not_judged=list(v.last_unjudged),
    )


def to_block(state: ModelState) -> QuarantineStateBlock:
    """The block document of `state`: structured fields plus the analysts' views, computed as
    of the state's own time (its last update), never the wall clock (pure)."""
    as_of = state.updated_at or state.last_round_at or datetime.fromtimestamp(0, UTC)
    views = endpoint_views(state, [], as_of)
    return QuarantineStateBlock(
        model=state.model,
        mode=state.mode.value,
        revision=state.revision,
        updated_at=state.updated_at,
        last_round_id=state.last_round_id,
        last_round_at=state.last_round_at,
        suspended=[_line(v) for v in views if v.standing is not Standing.ACTIVE],
        endpoints={v.tag: _entry(v, state.providers[v.tag]) for v in views},
        providers=dict(state.providers),
        refusal_probe=state.refusal_probe,
        controls_missing_since=state.controls_missing_since,
        bill=state.bill,
        state_json=None,
        schema_version=SCHEMA_VERSION,
    )


SAVE_ATTEMPTS = 3


async def _save(state: ModelState, document: BlockDocument | None = None) -> None:
    """Save under the model's lock (so a retry can only rewrite our own document).

    `document` is the stored document just read: when it already uses this block schema,
    the save is one update of that document by id. Otherwise (the first save, or a document
    of an older schema) Prefect's `Block.asave` registers the block type and schema and
    creates or overwrites the document. The first saves on a fresh Prefect server race
    inside Prefect when several models' rounds save at once (block type and schema
    registration, the server's encryption key: 409, 404 or 500 on PostgreSQL; seen by
    `make scale-test`); such a save is retried."""
    block = to_block(state)
    if document is not None and _same_schema(document):
        with suppress(ObjectNotFound):  # deleted since the read: create it below
            await _update(block, document)
            return
    for attempt in range(1, SAVE_ATTEMPTS + 1):
        try:
            await block.asave(block_name(state.model), overwrite=True)
            return
        except (ObjectAlreadyExists, ObjectNotFound, PrefectHTTPStatusError) as exc:
            if attempt == SAVE_ATTEMPTS or (
                isinstance(exc, PrefectHTTPStatusError) and exc.response.status_code < 500
            ):
                raise
            log.warning("saving the quarantine state of %s failed (%r); retrying", state.model, exc)
            await asyncio.sleep(0.2 * attempt)


def _same_schema(document: BlockDocument) -> bool:
    schema = document.block_schema
    return schema is not None and schema.checksum == _schema_checksum()


@cache
def _schema_checksum() -> str:
    return QuarantineStateBlock._calculate_schema_checksum()


async def _update(block: QuarantineStateBlock, document: BlockDocument) -> None:
    """Overwrite `document`'s data with `block`'s, as `Block.asave(overwrite=True)` does."""
    async with busy_retry_client() as client:
        await client.update_block_document(
            document.id,
            BlockDocumentUpdate(block_schema_id=document.block_schema_id, data=block_data(block)),
        )


@cache
def _data_keys() -> frozenset[str]:
    return frozenset(QuarantineStateBlock.model_json_schema(by_alias=False)["properties"])


def block_data(block: QuarantineStateBlock) -> dict[str, Any]:
    """The document data Prefect stores for `block`: its JSON dump (the block has no secret
    fields and no nested blocks). Prefect's `_to_block_document` builds the same dict but
    dumps with a serialization context, pydantic's slow path: ~175 ms per save."""
    return block.model_dump(mode="json", by_alias=True, include=set(_data_keys()))


def state_lock_name(model: str) -> str:
    """The global concurrency limit that serialises writers of `model`'s state, held for
    one read-modify-write (rounds, lifts, clock resets). Rounds of a model are serialised
    by their own round lock (`lease.py`), not by this one."""
    return f"canary-quarantine-{model_slug(model)}"


async def aupdate_state(
    model: str, fn: Update, *, lock_held: bool = False, known: ModelState | None = None
) -> tuple[ModelState, list[Decision]]:
    """Apply pure `fn` to the stored state, serialised and revision-checked; save and return.
    `lock_held=True` is for a caller that already holds `state_lock_name(model)`. `known` is
    the state as the caller last read it: `fn` starts from it instead of a fresh read, and
    the read just before saving checks its revision like any other."""
    async with AsyncExitStack() as stack:
        if not lock_held:
            await stack.enter_async_context(serialised(state_lock_name(model)))
        current = known if known is not None else await aload_state(model)
        for attempt in range(1, MAX_ATTEMPTS + 1):
            new, decisions = fn(current)
            if new.model != model:
                raise ValueError(f"update returned state of {new.model!r} for {model!r}")
            new = new.model_copy(update={"revision": current.revision + 1})
            stored = await _read_stored(model)
            stored_revision = stored.state.revision if stored else 0
            if stored_revision != current.revision:
                log.warning(
                    "quarantine state of %s changed under us (revision %d -> %d, attempt %d); "
                    "re-applying",
                    model,
                    current.revision,
                    stored_revision,
                    attempt,
                )
                current = stored.state if stored else ModelState(model=model)
                continue
            await _save(new, stored.document if stored else None)
            return new, decisions
    raise StaleRevisionError(
        f"quarantine state of {model!r} kept changing outside the lock for {MAX_ATTEMPTS} "
        "attempts; update refused, stored state untouched by this writer"
    )
