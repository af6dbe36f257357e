"""The canary round (O1): one flow run per model per round.

    discover ─► pinned probes (one task run for every endpoint, suspended ones and
                 controls too), each endpoint's language confirmations (2 more attempts per
                 language failure) right after its own probes
             ─► majority vote (2 of 3) ─► peer comparison (each rate contract against the
                 other endpoints; model-level findings) ─► round verdicts (controls judge
                 the refusal probe; against what each endpoint is held to) and the round's
                 bill                                                (flows/judging.py)
             ─► policy step with the capacity floor ─► apply (enforce) / record (observe),
                 under the round lock and the state-write lock                (`_apply`)
             ─► a `verdict` task run per endpoint with a story (red when a contract
                 failed) and one for the clean ones (flows/graph.py), with the ledger rows
                 and artifacts (flows/round_audit.py, flows/round_artifacts.py)
                 ─► events, admin notifications                               (`_audit`)

`at` is the round's logical time (default now), so rounds can be replayed and
the 1/3/7-day ladder exercised without waiting; an `at` more than one slot in the
future is refused unless `allow_future` (a typo would block the model's later rounds).
Only one round per model runs at a time (O2): rounds of one model hold its round
lock, a renewed lease that a killed or cut-off round cannot keep (`flows/roundlock.py`),
and a round whose logical time was already applied ends `Cancelled` without touching
state, so two rounds started at once for the same slot count once (the deployment's own
`CANCEL_NEW` limit does the same for schedules).

Before probing, the round's budget (flows/budget.py, quarantine/budget.py) decides how it
probes: in full, with fewer start samples, with its contracts rotated, or (when not even
that is affordable) not at all: every endpoint frozen with the reason `budget`, an alert.

The canary distrusts itself: a *blind* round (our key or credits refused, or too many
endpoints unreachable; `quarantine/blind.py`) applies nothing, ends Failed with its
one-line reason and alerts admins; its slot stays open. A stored last round in the
future fails the round with the repair (`canary clock reset`). A discovery failure fails
the run and changes no state; one misbehaving provider never crashes the round (its
probes end in typed outcomes). A ledger that cannot be written leaves the round
`Completed` under the name "Completed with warnings", with an alert.
"""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from typing import Any, Literal
from uuid import UUID

from prefect import flow, get_run_logger
from prefect.runtime import flow_run
from prefect.states import Cancelled, Completed, Failed, State

from flows import tasks
from flows.applied import AppliedRound
from flows.blind import end_blind
from flows.budget import round_budget
from flows.judging import (
    Judged,
    frozen_for_budget,
    mark_verdicts,
    probe_and_judge,
    round_report,
    stored_mode,
)
from flows.round_audit import RoundSummary, publish
from flows.roundlock import round_lock
from flows.roundplan import RoundPlan, plan_round, round_id, round_index
from flows.tasks import unwalked
from ground.clock import as_utc
from ground.heap import freeze_loaded
from ground.prefect_api import busy_retry_client, shared_busy_retry_client
from ground.settings import DEFAULT_MODEL, load_settings
from probes.errors import DiscoveryError
from quarantine.adapters.ignore import aread_layers
from quarantine.adapters.lease import Lease
from quarantine.adapters.locking import serialised
from quarantine.adapters.store import aload_state, state_lock_name
from quarantine.blind import blind_discovery, blind_round
from quarantine.budget import BudgetLevel
from quarantine.clock import clock_ahead, future_at
from quarantine.errors import LeaseLostError, LeaseTimeoutError
from quarantine.models import Mode, ModelState


def _run_name() -> str:
    params = flow_run.parameters
    at = params.get("at") or datetime.now(UTC)
    if isinstance(at, str):
        at = datetime.fromisoformat(at)
    return f"{params.get('model', DEFAULT_MODEL)} @ {as_utc(at):%Y-%m-%d %H:%MZ}"


async def _tag_run(*tags: str) -> None:
    """Tags say model and mode (O3), however the run was started (CLI, schedule, UI)."""
    run_id = flow_run.id
    if run_id is None:
        return
    async with busy_retry_client() as client:
        await client.update_flow_run(UUID(run_id), tags=sorted({*flow_run.tags, *tags}))


@flow(name="canary-round", flow_run_name=_run_name, log_prints=False)
async def canary_round(
    model: str = DEFAULT_MODEL,
    mode: Literal["observe", "enforce"] | None = None,
    at: datetime | None = None,
    endpoints: list[str] | None = None,
    allow_future: bool = False,
) -> RoundSummary | State[Any]:
    """Probe every endpoint of `model` pinned, and apply (enforce) or record (observe).
    `mode` None keeps the model's stored mode (CANARY_MODE for a new model): a round
    switches modes only when asked to. `at` more than one slot ahead of now is refused
    unless `allow_future`."""
    freeze_loaded()  # no full collection walks the loaded modules mid-probe (ground/heap.py)
    logger = get_run_logger()
    settings = load_settings()
    wall = datetime.now(UTC)
    at = as_utc(at or wall)
    if future_at(at, wall) and not allow_future:
        message = (
            f"at={at:%Y-%m-%d %H:%MZ} is more than one half-hour slot after now "
            f"({wall:%Y-%m-%d %H:%MZ}); nothing done (allow_future replays a future slot)"
        )
        logger.error(message)
        return Failed(message=message)
    try:
        async with shared_busy_retry_client(), round_lock(model, settings) as lease:
            return await _locked_round(model, mode, at, wall, endpoints, lease, logger)
    except LeaseTimeoutError as exc:
        message = (
            f"the round lock of {model} stayed held by {exc.view.describe()} for "
            f"{settings.round_lock_wait_s:.0f} s; this run changed nothing"
        )
        logger.warning(message)
        return Cancelled(message=message)
    except LeaseLostError as exc:
        message = f"{exc}; nothing applied"
        logger.error(message)
        return Failed(message=message)


async def _locked_round(
    model: str,
    mode: str | None,
    at: datetime,
    wall: datetime,
    endpoints: list[str] | None,
    lease: Lease,
    logger: Any,
) -> RoundSummary | State[Any]:
    settings = load_settings()
    state = await aload_state(model)
    run_mode = Mode(mode) if mode else stored_mode(state, settings.mode)
    tagging = asyncio.create_task(_tag_run(f"model:{model}", f"mode:{run_mode.value}"))
    try:
        refused = slot_refusal(model, state, at, wall)
        if refused is not None:
            (logger.error if refused.is_failed() else logger.warning)(refused.message)
            return refused
        return await _round(model, run_mode, at, endpoints, state, lease, logger)
    finally:
        await tagging


def slot_refusal(model: str, state: ModelState, at: datetime, wall: datetime) -> State[Any] | None:
    """None when the half-hour slot of `at` is after the last applied round; otherwise the
    run's end: `Cancelled` (the slot was applied), `Failed` naming the repair when the
    stored last round lies in the future of `wall`."""
    if state.last_round_at is None or round_index(at) > round_index(state.last_round_at):
        return None
    if clock_ahead(state, wall) and not future_at(at, wall):
        return Failed(
            message=(
                f"the last applied round of {model} ({state.last_round_id}) is in the future, "
                f"so every round until then changes nothing; `canary clock reset --model {model} "
                "--reason ...` repairs it"
            )
        )
    return Cancelled(
        message=(
            f"the half-hour slot of {at:%Y-%m-%d %H:%MZ} is not after the last applied round "
            f"({state.last_round_id}); this run changed nothing"
        )
    )


async def _round(
    model: str,
    mode: Mode,
    at: datetime,
    subset: list[str] | None,
    state: ModelState,
    lease: Lease,
    logger: Any,
) -> RoundSummary | State[Any]:
    """Discover, plan, probe and judge; then, unless the round is blind, the locked apply
    (`_apply`) and the audit (`_audit`). A blind round and a failed apply show their
    verdicts in the graph too."""
    settings = load_settings()
    try:
        discovered = await tasks.discover_endpoints(model)
    except DiscoveryError as exc:
        blind = blind_discovery(exc, settings.base_url)
        if blind is None:
            raise
        rid = round_id(model, at)
        return await end_blind(model, rid, at, blind, settings.notification_block, logger)
    plan = plan_round(
        model,
        at,
        discovered,
        locales=settings.locales,
        controls=settings.control_providers,
        subset=subset,
        sticky={tag: ps.sticky_locale for tag, ps in state.providers.items()},
    )
    logger.info(
        "round %s: %d endpoints (%d controls), mode %s",
        plan.round_id, len(plan.targets), len(plan.controls), mode.value,
    )  # fmt: skip
    budget = round_budget(plan, state, settings)
    if budget.level is BudgetLevel.FROZEN:  # nothing probed, so nothing to be blind about
        judged, blind = frozen_for_budget(plan, state, budget), None
    else:
        judged = await probe_and_judge(plan, settings.probe.concurrency, state, budget)
        blind = blind_round(
            judged.verdicts, judged.voted, transport_share=settings.blind_transport_share
        )
    audited = False
    try:
        if blind is not None:
            return await end_blind(
                model, plan.round_id, at, blind, settings.notification_block, logger
            )
        applied = await _apply(plan, mode, judged, state, lease)
        audited = True  # the audit marks the verdicts next to its writes
        return await _audit(applied, settings.notification_block, logger)
    finally:
        if not audited:
            await mark_verdicts(judged, logger)


async def _apply(
    plan: RoundPlan, mode: Mode, judged: Judged, state: ModelState, lease: Lease
) -> AppliedRound:
    """The policy step and the state write, under both locks.

    Never apply under a round lock this run no longer holds (checked while the exclusion
    layers are read); the state-write lock is taken meanwhile, not after, so the apply is
    one read and one write. The lock request ends before anything is raised, so a lock taken
    is always given back (by `writing`); a lock that could not be taken fails the round, as
    in `apply`. Both locks protect the state, now applied and marked with this slot (a round
    of the same slot ends Cancelled): they are given back before the audit writes, one after
    the other (two writes at once meet in SQLite, and one is sent again)."""
    model, at = plan.model, plan.at
    async with AsyncExitStack() as writing:
        taking = asyncio.create_task(
            writing.enter_async_context(serialised(state_lock_name(model)))
        )
        try:
            layers, _ = await asyncio.gather(aread_layers(model), lease.check())
        finally:
            await asyncio.wait([taking])  # the lock request ends before anything is raised
        await taking
        report = round_report(plan, judged, mode, layers.entries(state, at))
        planned = await tasks.policy_step(unwalked(state), unwalked(report))
        new_state, decisions = await tasks.apply_report(
            unwalked(report), unwalked(planned), lock_held=True, known=unwalked(state)
        )
        await writing.aclose()  # the state-write lock, then the round lock
        await lease.release()
    ignore = layers.entries(new_state, at)
    return AppliedRound(plan, mode, report, judged, decisions, ignore, new_state)


async def _audit(
    applied: AppliedRound, notification_block: str | None, logger: Any
) -> RoundSummary | State[Any]:
    """Ledger rows, artifacts, events and alerts (`round_audit.publish`, best-effort: the
    state is applied) and the `verdict` task runs, together. The artifact and ledger writes
    start first, the verdict task runs next to them: creating a task run holds the event
    loop a few ms, and the writes are on their way meanwhile. (Started before the state
    write, the server's recording of the verdict task runs held that write up.) A round
    whose audit could not write everything ends "Completed with warnings"."""
    publishing = asyncio.create_task(publish(applied, notification_block, logger))
    marking = asyncio.create_task(mark_verdicts(applied.judged, logger))
    try:
        summary = await publishing
    finally:
        await marking
    if summary.warnings:
        return Completed(
            data=summary, name="Completed with warnings", message="; ".join(summary.warnings)
        )
    return summary
