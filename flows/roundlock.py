"""The round lock of a model, as the round flow holds it: a renewed lease
(`quarantine/adapters/lease.py`) naming this flow run, and the check that marks the run of
a dead holder Crashed when a later round takes the lock over (a killed CLI's run would
otherwise stay Running for ever)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from uuid import UUID

from prefect import get_client
from prefect.runtime import flow_run
from prefect.states import Crashed

from ground.settings import Settings
from quarantine.adapters.lease import Lease, LeaseView, held_lease, lease_name

log = logging.getLogger(__name__)


async def mark_crashed(view: LeaseView, why: str) -> str | None:
    """Mark the flow run of a stale lock holder Crashed if it is not final yet; returns
    the run id marked, or None."""
    run_id = view.record.flow_run_id if view.record else None
    if not run_id:
        return None
    async with get_client() as client:
        run = await client.read_flow_run(UUID(run_id))
        if run.state is not None and run.state.is_final():
            return None
        by = flow_run.id or "a canary command"
        await client.set_flow_run_state(
            UUID(run_id),
            Crashed(message=f"the round's process stopped: {why}; marked Crashed by {by}"),
            force=True,
        )
    log.warning("marked flow run %s Crashed: %s", run_id, why)
    return run_id


@asynccontextmanager
async def round_lock(model: str, settings: Settings) -> AsyncIterator[Lease]:
    """Hold `model`'s round lock for the block (one round per model at a time, O2)."""
    async with held_lease(
        lease_name(model),
        lease_s=settings.round_lease_s,
        wait_s=settings.round_lock_wait_s,
        purpose=f"canary round of {model}",
        flow_run_id=flow_run.id,
        on_stale=_report,
    ) as lease:
        yield lease


async def _report(view: LeaseView, why: str) -> None:
    await mark_crashed(view, why)
