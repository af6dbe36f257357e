"""Serialise read-modify-write on Prefect objects (blocks and Variables are last-writer-wins).

`serialised(name)` holds one slot of a global concurrency limit of 1 named `name` (across
processes and machines). Writers in the same process first queue on a local `asyncio.Lock`,
so they hand over at once instead of polling the server for the slot. It creates the limit first (`strict=True` with a missing limit raises; without `strict` a missing limit
would silently mean no lock at all, see PREFECT.md). Only short writes hold these limits:
a canary round's own long hold is a lease record (`lease.py`), because a concurrency slot
held across a server restart is never given back (the server keeps leases in memory).

The slot is taken, renewed and given back with Prefect's lease API, as
`prefect.concurrency.asyncio.concurrency(strict=True)` does, with one difference: a server
answering 503 is asked again within a fraction of a second (`ground.prefect_api`) instead of
after Prefect's client backoff of 2 s. A Prefect server on SQLite answers 503 when the
increment's read-then-write transaction meets another writer (`database is locked`), which
happened to nearly every round's state write while the server recorded the round's task
runs. A 423 (another writer holds the slot) waits the server's `Retry-After`, as Prefect
does. (Prefect's `concurrency-limit.acquired/released` events are not emitted.)
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from uuid import UUID

import httpx
from prefect.client.orchestration import get_client
from prefect.concurrency.asyncio import (
    AcquireConcurrencySlotTimeoutError,
    ConcurrencySlotAcquisitionError,
)
from prefect.exceptions import ObjectAlreadyExists
from prefect.settings import PREFECT_API_URL

from ground.prefect_api import busy_retry_client

LOCK_TIMEOUT_S = 120.0  # writes are short; a canary round holds its own lease, not this lock
LEASE_S = 60.0  # the API's minimum: a killed writer frees the slot within ~75 s, not 315 s
log = logging.getLogger(__name__)
_ensured: set[tuple[str, str]] = set()
_local: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Lock]] = (
    weakref.WeakKeyDictionary()
)


async def ensure_limit(name: str) -> None:
    """Create the global concurrency limit `name` (limit 1) unless it already exists."""
    key = (str(PREFECT_API_URL.value()), name)
    if key in _ensured:
        return
    async with busy_retry_client() as client:
        # a concurrent caller may create it between upsert's read and create
        with suppress(ObjectAlreadyExists):
            await client.upsert_global_concurrency_limit_by_name(name, limit=1)
    _ensured.add(key)


@asynccontextmanager
async def serialised(name: str, timeout_s: float = LOCK_TIMEOUT_S) -> AsyncIterator[None]:
    """Hold the only slot of limit `name` for the duration of the block."""
    locks = _local.setdefault(asyncio.get_running_loop(), {})
    async with locks.setdefault(name, asyncio.Lock()):
        await ensure_limit(name)
        lease_id = await _acquire(name, timeout_s)
        renewing = asyncio.create_task(_renew(name, lease_id))
        try:
            yield
        finally:
            renewing.cancel()
            with suppress(asyncio.CancelledError):
                await renewing
            await _release(name, lease_id)


async def _acquire(name: str, timeout_s: float) -> UUID:
    """One slot of `name` with a lease of LEASE_S; a 423 (held by another writer) waits the
    server's Retry-After, a busy server is asked again at once (`busy_retry_client`)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    async with busy_retry_client() as client:
        while True:
            try:
                response = await client.increment_concurrency_slots_with_lease(
                    names=[name], slots=1, mode="concurrency", lease_duration=LEASE_S
                )
                break
            except httpx.HTTPStatusError as exc:
                if exc.response.status_code != 423:
                    raise ConcurrencySlotAcquisitionError(
                        f"Unable to acquire concurrency slots on {[name]!r}: {exc}"
                    ) from exc
                wait = float(exc.response.headers.get("Retry-After", 1.0))
                if loop.time() + wait > deadline:
                    raise AcquireConcurrencySlotTimeoutError(
                        f"Attempt to acquire concurrency slots timed out after {timeout_s} "
                        "second(s)"
                    ) from exc
                await asyncio.sleep(wait)
    body = response.json()
    if not body.get("limits"):  # strict: a missing limit must never mean no lock
        raise ConcurrencySlotAcquisitionError(
            f"Concurrency limits {[name]!r} must be created before acquiring slots"
        )
    return UUID(body["lease_id"])


async def _renew(name: str, lease_id: UUID) -> None:
    """Keep the lease alive while a (slow) write holds it."""
    while True:
        await asyncio.sleep(LEASE_S / 3)
        try:
            async with busy_retry_client() as client:
                await client.renew_concurrency_lease(lease_id, lease_duration=LEASE_S)
        except Exception as exc:
            log.warning("renewing the slot of %s failed (%r); retrying", name, exc)


async def _release(name: str, lease_id: UUID) -> None:
    async with busy_retry_client() as client:
        await client.release_concurrency_slots_with_lease(lease_id)


async def active_slots(name: str) -> int | None:
    """Slots of limit `name` held now (None if the limit does not exist)."""
    from prefect.exceptions import ObjectNotFound

    async with get_client() as client:
        try:
            limit = await client.read_global_concurrency_limit_by_name(name)
        except ObjectNotFound:
            return None
    return int(limit.active_slots)


async def reset_slots(name: str) -> int:
    """Give back every slot of limit `name` (a human's repair of a slot whose holder is
    gone, e.g. held across a server restart); returns how many were held."""
    from prefect.client.schemas.actions import GlobalConcurrencyLimitUpdate

    held = await active_slots(name) or 0
    if held:
        async with get_client() as client:
            await client.update_global_concurrency_limit(
                name, GlobalConcurrencyLimitUpdate(active_slots=0)
            )
    return held
