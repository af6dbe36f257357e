"""Quarantine state in a Prefect block under Prefect's real test harness (SPEC O4, Q8)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest
from prefect import get_client
from prefect.utilities.asyncutils import run_coro_as_sync

from quarantine.adapters.store import (
    BLOCK_TYPE_SLUG,
    QuarantineStateBlock,
    aload_state,
    aupdate_state,
    block_data,
    block_name,
    to_block,
)
from quarantine.errors import StaleRevisionError, StateCorruptError, UnknownModelError
from quarantine.models import Mode, ModelState, ProviderState, RoundNote
from quarantine.verdicts import RoundVerdict
from tests.fixtures.quarantine_support import HALF_HOUR, T0, F, run

pytestmark = pytest.mark.usefixtures("prefect_api")


def new_model() -> str:
    return f"test/{uuid.uuid4().hex[:10]}"


async def _raw_data(model: str) -> dict:
    async with get_client() as client:
        doc = await client.read_block_document_by_name(block_name(model), BLOCK_TYPE_SLUG)
    return dict(doc.data)


def _full_state(model: str) -> ModelState:
    """A state with every field set to a non-default value."""
    ps = ProviderState(
        consecutive_failed_rounds=3,
        consecutive_clean_rounds=1,
        suspended_at=T0,
        suspended_until=T0 + timedelta(days=3),
        shadow_suspended_until=T0 + timedelta(days=1),
        suspensions=2,
        last_suspension_end=T0 - timedelta(days=2),
        sticky_locale="pt-BR",
        last_reasons=["language:language_mixing"],
        streak_round_ids=["r1", "r2"],
        streak_reasons=["language:language_mixing", "start:stray_prefix"],
        recent_rounds=[
            RoundNote(round_id="r2", at=T0, verdict=RoundVerdict.FAILED, reasons=["x:y"])
        ],
    )
    return ModelState(
        model=model,
        mode=Mode.ENFORCE,
        revision=0,
        providers={"deepinfra/fp8": ps, "b": ProviderState()},
        updated_at=T0 + HALF_HOUR,
        last_round_id="r2",
    )


async def test_o4_missing_state_loads_as_fresh_or_raises_when_required() -> None:
    """O4: no document -> an empty state at revision 0; `missing_ok=False` -> UnknownModelError."""
    model = new_model()
    state = await aload_state(model)
    assert state == ModelState(model=model)
    with pytest.raises(UnknownModelError, match=model):
        await aload_state(model, missing_ok=False)


async def test_o4_round_trip_of_every_field() -> None:
    """O4: every ModelState/ProviderState field survives a save and a load."""
    model = new_model()
    full = _full_state(model)
    saved, decisions = await aupdate_state(model, lambda s: (full, []))
    assert decisions == [] and saved.revision == 1
    loaded = await aload_state(model)
    assert loaded == full.model_copy(update={"revision": 1})
    data = await _raw_data(model)
    assert data["revision"] == 1 and data["model"] == model


def test_o4_block_data_is_what_prefects_own_save_stores() -> None:
    """O4: the one-call save writes the same document data as `Block.asave` would."""
    block = to_block(_full_state("test/data"))
    prefects = block._to_block_document(
        name="x", block_schema_id=uuid.uuid4(), block_type_id=uuid.uuid4(), include_secrets=True
    ).data
    assert block_data(block) == prefects


async def test_o4_a_later_write_updates_the_document_in_place() -> None:
    """O4: after the first save, a write keeps the document (same id, same schema) and
    replaces its data."""
    model = new_model()
    await aupdate_state(model, lambda s: (s, []))
    async with get_client() as client:
        first = await client.read_block_document_by_name(block_name(model), BLOCK_TYPE_SLUG)
    full = _full_state(model)
    await aupdate_state(model, lambda s: (full, []))
    async with get_client() as client:
        second = await client.read_block_document_by_name(block_name(model), BLOCK_TYPE_SLUG)
    assert second.id == first.id and second.block_schema_id == first.block_schema_id
    assert await aload_state(model) == full.model_copy(update={"revision": 2})


async def test_o4_ten_concurrent_writers_all_land() -> None:
    """O4: ten concurrent read-modify-write updates are serialised: none is lost."""
    model = new_model()

    def bump(i: int):
        def fn(state: ModelState):
            new = state.model_copy(deep=True)
            new.providers[f"t{i}"] = ProviderState(consecutive_failed_rounds=i)
            return new, []

        return fn

    await asyncio.gather(*(aupdate_state(model, bump(i)) for i in range(10)))
    state = await aload_state(model)
    assert state.revision == 10
    assert sorted(state.providers) == sorted(f"t{i}" for i in range(10))


def test_o4_writers_on_separate_event_loops_are_serialised_by_the_prefect_limit() -> None:
    """O4: writers that share no local lock (own threads and loops) still all land."""
    import threading

    model = new_model()

    def fn(state: ModelState):
        new = state.model_copy(deep=True)
        new.providers[f"t{state.revision}"] = ProviderState()
        return new, []

    errors: list[BaseException] = []

    def writer() -> None:
        try:
            asyncio.run(aupdate_state(model, fn))
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=writer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    state = run_coro_as_sync(aload_state(model))
    assert (
        state is not None
        and state.revision == 4
        and sorted(state.providers) == ["t0", "t1", "t2", "t3"]
    )


async def test_o4_write_against_a_stale_revision_is_detected_and_reapplied() -> None:
    """O4: a writer bypassing the lock is noticed; the update is re-applied on the fresh state."""
    model = new_model()
    await aupdate_state(model, lambda s: (s, []))
    calls = []

    def sneaky(state: ModelState):
        calls.append(state.revision)
        if len(calls) == 1:  # someone writes behind our back while we compute
            outsider = state.model_copy(update={"revision": 7, "last_round_id": "outsider"})
            block = QuarantineStateBlock(
                model=model, revision=7, state_json=outsider.model_dump_json()
            )
            run_coro_as_sync(block.asave(block_name(model), overwrite=True))
        return state.model_copy(update={"mode": Mode.ENFORCE}), []

    new, _ = await aupdate_state(model, sneaky)
    assert calls == [1, 7]
    assert new.revision == 8 and new.last_round_id == "outsider" and new.mode is Mode.ENFORCE
    assert await aload_state(model) == new


async def test_o4_endlessly_stale_writes_are_refused_loudly() -> None:
    """O4: if the state keeps changing outside the lock, the update is refused, not lost silently."""
    model = new_model()
    await aupdate_state(model, lambda s: (s, []))
    counter = iter(range(100, 200))

    def always_raced(state: ModelState):
        rev = next(counter)
        outsider = state.model_copy(update={"revision": rev})
        block = QuarantineStateBlock(
            model=model, revision=rev, state_json=outsider.model_dump_json()
        )
        run_coro_as_sync(block.asave(block_name(model), overwrite=True))
        return state.model_copy(update={"last_round_id": "mine"}), []

    with pytest.raises(StaleRevisionError, match="refused"):
        await aupdate_state(model, always_raced)
    stored = await aload_state(model)
    assert stored.last_round_id != "mine" and stored.revision == 102


@pytest.mark.parametrize(
    "data",
    [
        {"model": "m", "revision": 3, "state_json": "{not json"},
        {
            "model": "m",
            "revision": 3,
            "state_json": '{"model": "m", "providers": {"a": {"suspensions": "many"}}}',
        },
        {"model": "m", "revision": None, "state_json": "{}"},
    ],
    ids=["not-json", "bad-field", "no-revision"],
)
async def test_o4_corrupted_block_document_is_a_clear_error_and_stays_untouched(data: dict) -> None:
    """O4: an unreadable document raises StateCorruptError on load and update; nothing is written."""
    model = new_model()
    await QuarantineStateBlock(**data).asave(block_name(model), overwrite=True)
    before = await _raw_data(model)
    with pytest.raises(StateCorruptError, match=BLOCK_TYPE_SLUG):
        await aload_state(model)
    with pytest.raises(StateCorruptError):
        await aupdate_state(model, lambda s: (s, []))
    assert await _raw_data(model) == before


async def test_o4_document_of_another_model_is_refused() -> None:
    """O4: a document whose state names another model is treated as corrupt."""
    model = new_model()
    other = ModelState(model="someone/else").model_dump_json()
    await QuarantineStateBlock(model=model, revision=1, state_json=other).asave(
        block_name(model), overwrite=True
    )
    with pytest.raises(StateCorruptError, match="someone/else"):
        await aload_state(model)


async def test_o4_old_documents_with_missing_fields_still_load() -> None:
    """O4: fields added later are optional: a minimal old document loads with defaults."""
    model = new_model()
    old = f'{{"model": "{model}", "providers": {{"a": {{"consecutive_failed_rounds": 1}}}}}}'
    await QuarantineStateBlock(model=model, revision=4, state_json=old).asave(
        block_name(model), overwrite=True
    )
    state = await aload_state(model)
    assert state.revision == 4 and state.providers["a"].consecutive_failed_rounds == 1
    assert state.providers["a"].sticky_locale is None


async def test_o4_failing_update_function_changes_nothing() -> None:
    """O4: an exception inside the update leaves the stored state and revision unchanged."""
    model = new_model()
    await aupdate_state(model, lambda s: run([{"a": F}], state=s))
    before = await _raw_data(model)

    def boom(state: ModelState):
        raise ValueError("bad input")

    with pytest.raises(ValueError, match="bad input"):
        await aupdate_state(model, boom)
    assert await _raw_data(model) == before


async def _write_raw(model: str, data: dict) -> None:
    """Store `data` as the document's whole data, exactly as an older version wrote it."""
    from prefect.client.schemas.actions import BlockDocumentUpdate

    await QuarantineStateBlock(model=model, revision=0).asave(block_name(model), overwrite=True)
    async with get_client() as client:
        doc = await client.read_block_document_by_name(block_name(model), BLOCK_TYPE_SLUG)
        await client.update_block_document(
            doc.id, BlockDocumentUpdate(data=data, merge_existing_data=False)
        )


async def test_o4_version_1_document_migrates_on_read_and_is_rewritten_structured() -> None:
    """O4: a document of the previous version (the whole state as one JSON string in
    `state_json`) loads unchanged; the next write stores the structured fields the Blocks
    page shows (suspended lines, one entry per endpoint) and nothing is lost."""
    model = new_model()
    full = _full_state(model)
    v1 = {
        "model": model,
        "revision": 5,
        "state_json": full.model_dump_json(),
        "schema_version": 1,
    }
    await _write_raw(model, v1)
    assert set(await _raw_data(model)) == set(v1)  # really the old shape
    loaded = await aload_state(model)
    assert loaded == full.model_copy(update={"revision": 5})

    saved, _ = await aupdate_state(model, lambda s: (s, []))
    data = await _raw_data(model)
    assert data["schema_version"] == 2 and data["state_json"] is None and data["revision"] == 6
    assert data["mode"] == "enforce" and data["last_round_id"] == "r2"
    entry = data["endpoints"]["deepinfra/fp8"]
    assert entry["state"] == "suspended" and entry["rung"] == 2
    assert entry["last_reasons"] == ["language:language_mixing"]
    assert entry["until"].startswith((T0 + timedelta(days=3)).date().isoformat())
    assert data["suspended"] == [
        f"deepinfra/fp8: suspended until {T0 + timedelta(days=3):%Y-%m-%d %H:%M}Z, rung 2 "
        "(language:language_mixing)"
    ]
    assert data["endpoints"]["b"]["state"] == "active"
    assert await aload_state(model) == full.model_copy(update={"revision": 6}) == saved
