"""Serialise read-modify-write on Prefect objects (blocks and Variables are last-writer-wins).

`serialised(name)` holds one slot of a global concurrency limit of 1 named `name` (across
processes and machines). Writers in the same process first queue on a local `asyncio.Lock`,
so they hand over at once instead of polling the server for the slot. It creates the limit first (`strict=True` with a missing limit raises; without `strict` a missing limit
would silently mean no lock at all, see PREFECT.md). Only short writes hold these limits:
a canary round's own long hold is a lease record (`lease.py`), because a concurrency slot
held across a server restart is never given back (the server keeps leases in memory).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

from prefect.client.orchestration import get_client
from prefect.concurrency.asyncio import concurrency
from prefect.exceptions import ObjectAlreadyExists
from prefect.settings import PREFECT_API_URL

LOCK_TIMEOUT_S = 120.0  # writes are short; a canary round holds its own lease, not this lock
LEASE_S = 60.0  # the API's minimum: a killed writer frees the slot within ~75 s, not 315 s
_ensured: set[tuple[str, str]] = set()
_local: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Lock]] = (
    weakref.WeakKeyDictionary()
)


async def ensure_limit(name: str) -> None:
    """Create the global concurrency limit `name` (limit 1) unless it already exists."""
    key = (str(PREFECT_API_URL.value()), name)
    if key in _ensured:
        return
    async with get_client() as client:
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
        async with concurrency(
            name, occupy=1, strict=True, timeout_seconds=timeout_s, lease_duration=LEASE_S
        ):
            yield


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
