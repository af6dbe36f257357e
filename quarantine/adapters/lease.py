"""A model's round lock: a lease record in a Prefect Variable that cannot outlive its holder.

Why not a Prefect global concurrency limit (what rounds held before)? In Prefect 3.9
(PREFECT.md, and the server's `concurrency_limits_v2` API and repossessor service):

- the server keeps concurrency *leases* in memory by default, while the limit's
  `active_slots` count lives in its database: a server restart under a held slot forgets
  the lease and never gives the slot back, and no API lists leases to repair it;
- a lease lasts at least 60 s (the API's minimum; 300 s with `concurrency()`'s default)
  and expired leases are revoked by a loop every 15 s: a killed holder keeps a model
  locked for 75-315 s.

A Variable is a row of the server's database, so it survives restarts, and two checks the
server already makes give a compare-and-swap without any new server feature:

- creating a Variable under an existing name fails (HTTP 409): one process wins a free lock;
- each Variable gets a fresh UUID, and PATCH / DELETE by id touch only that row: a renewal
  or release by a holder whose record was taken over fails (404) instead of overwriting
  the new holder's record.

The record, Variable `canary-lock-<model slug>` (readable in the UI, `canary lock status`)::

    {"holder": <uuid of this acquisition>, "purpose", "flow_run_id", "host", "pid",
     "machine", "pid_start", "acquired_at", "renewed_at", "expires_at", "lease_s"}

Lifecycle: acquire (create; if the name is taken by a *stale* record, delete that record by
its id and create again) -> renew every `lease_s / 3` (PATCH by id) -> release (DELETE by
id). A record is stale when its `expires_at` has passed (holder and waiter clocks are
assumed NTP-synchronised; seconds matter, not milliseconds) or, seen from the same machine
and pid namespace, when the holder's process is gone (pid and its start time): a killed
round frees the lock at once on its own machine and within `lease_s` from anywhere. Only
the process whose delete succeeded reports the stale holder (`on_stale`), so the previous
flow run is marked Crashed exactly once.

A holder that cannot renew before its own expiry (Prefect API gone), or whose record was
removed (`canary lock release`) or taken over, has *lost* the lease: `Lease.check()`
raises `LeaseLostError`, and the round calls it before applying anything.

Calls go through `ground.prefect_api.busy_retry_client`: a release right after a round's
burst of task runs would otherwise often meet a busy SQLite server and wait Prefect's 2 s.

Time comes from a `LeaseClock` (the record's times and expiry checks, the acquirer's wait,
the renewal and poll sleeps), the real one unless a caller passes another: tests move a
clock of their own instead of sleeping through leases, against the real Prefect API.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any, Protocol
from uuid import UUID

import httpx
from prefect.client.orchestration import PrefectClient
from prefect.client.schemas.actions import VariableCreate
from prefect.exceptions import ObjectAlreadyExists
from pydantic import BaseModel, ValidationError

from ground.clock import UtcDatetime, as_utc
from ground.prefect_api import busy_retry_client
from ground.slugs import model_slug
from quarantine.errors import LeaseLostError, LeaseTimeoutError

log = logging.getLogger(__name__)

RENEWALS_PER_LEASE = 3
RETRY_S = 1.0  # after a failed renewal
CALL_TIMEOUT_S = 10.0  # bound on one API call outside a lease's own deadline


class LeaseClock(Protocol):
    """Where a lease reads the time and waits."""

    def now(self) -> datetime:
        """Aware UTC: the record's times, and whether a record has expired."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back: how long an acquirer has waited."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait `seconds` (between renewals, between polls of a held lock)."""
        ...


class SystemClock:
    """The real clock: `datetime.now(UTC)`, `time.monotonic()`, `asyncio.sleep`."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


SYSTEM_CLOCK = SystemClock()


def lease_name(model: str) -> str:
    """The Variable holding `model`'s round lock."""
    return f"canary-lock-{model_slug(model)}"


# ---- who holds it --------------------------------------------------------------------


@dataclass(frozen=True)
class ProcessIdentity:
    host: str  # hostname, for people
    machine: str  # hostname + boot id + pid namespace: where a pid means one process
    pid: int
    pid_start: str | None  # start time of the process in clock ticks since boot (Linux)


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def _pid_start(pid: int) -> str | None:
    stat = _read(f"/proc/{pid}/stat")
    if not stat:
        return None
    fields = stat.rsplit(")", 1)[-1].split()  # the command name may hold spaces
    return fields[19] if len(fields) > 19 else None  # field 22 of proc(5)


@cache
def this_process() -> ProcessIdentity:
    host = socket.gethostname()
    boot = _read("/proc/sys/kernel/random/boot_id")
    try:
        pidns = os.readlink("/proc/self/ns/pid")
    except OSError:
        pidns = ""
    return ProcessIdentity(host, f"{host}|{boot}|{pidns}", os.getpid(), _pid_start(os.getpid()))


def process_alive(pid: int, pid_start: str | None) -> bool:
    """Whether process `pid` (started at `pid_start`, if known) still runs on this machine."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    if pid_start is None:
        return True
    status = _read(f"/proc/{pid}/status")
    if "State:\tZ" in status:  # a zombie waiting for its parent: the process is over
        return False
    current = _pid_start(pid)
    return current is None or current == pid_start


# ---- the record ------------------------------------------------------------------------


class LeaseRecord(BaseModel):
    holder: str
    purpose: str = ""
    flow_run_id: str | None = None
    host: str = ""
    machine: str = ""
    pid: int | None = None
    pid_start: str | None = None
    acquired_at: UtcDatetime
    renewed_at: UtcDatetime
    expires_at: UtcDatetime
    lease_s: float

    @classmethod
    def new(
        cls,
        holder: str,
        me: ProcessIdentity,
        *,
        purpose: str,
        flow_run_id: str | None,
        lease_s: float,
        now: datetime,
    ) -> LeaseRecord:
        """A fresh record of `me` holding the lock from `now` for `lease_s`."""
        return cls(
            holder=holder,
            purpose=purpose,
            flow_run_id=flow_run_id,
            host=me.host,
            machine=me.machine,
            pid=me.pid,
            pid_start=me.pid_start,
            acquired_at=now,
            renewed_at=now,
            expires_at=now + timedelta(seconds=lease_s),
            lease_s=lease_s,
        )

    def stale_reason(
        self,
        now: datetime,
        me: ProcessIdentity,
        alive: Callable[[int, str | None], bool] = process_alive,
    ) -> str | None:
        """Why this record no longer protects a live holder at `now`, or None."""
        if self.expires_at <= as_utc(now):
            return f"its lease expired at {self.expires_at:%Y-%m-%d %H:%M:%S}Z"
        pid, same_machine = self.pid, bool(self.machine) and self.machine == me.machine
        if same_machine and pid is not None and pid != me.pid and not alive(pid, self.pid_start):
            return f"its process {pid} on {self.host} is gone"
        return None

    def describe(self) -> str:
        run = f" (flow run {self.flow_run_id})" if self.flow_run_id else ""
        return (
            f"{self.purpose or 'a holder'}{run}, pid {self.pid} on {self.host}, "
            f"lease until {self.expires_at:%Y-%m-%d %H:%M:%S}Z"
        )


@dataclass(frozen=True)
class LeaseView:
    """The lock as stored: the Variable's id and its record (None if not a lease record)."""

    name: str
    variable_id: UUID
    record: LeaseRecord | None
    problem: str | None = None  # why `record` is None

    def stale_reason(self, now: datetime, me: ProcessIdentity | None = None) -> str | None:
        if self.record is None:
            return f"it is not a lease record ({self.problem})"
        return self.record.stale_reason(now, me or this_process())

    def describe(self) -> str:
        return self.record.describe() if self.record else f"an unreadable record ({self.problem})"

    def to_json(self, now: datetime) -> dict[str, Any]:
        stale = self.stale_reason(now)
        data: dict[str, Any] = {
            "name": self.name,
            "state": "stale" if stale else "held",
            "stale_reason": stale,
        }
        if self.record is not None:
            data.update(self.record.model_dump(mode="json"))
        else:
            data["problem"] = self.problem
        return data


def _view(name: str, variable: Any) -> LeaseView:
    try:
        return LeaseView(name, variable.id, LeaseRecord.model_validate(variable.value))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "value"
        return LeaseView(name, variable.id, None, f"{where}: {first['msg']}")


async def _read_view(client: PrefectClient, name: str) -> LeaseView | None:
    variable = await client.read_variable_by_name(name)
    return None if variable is None else _view(name, variable)


async def _delete(client: PrefectClient, variable_id: UUID) -> bool:
    """Delete the Variable row `variable_id`; False if it was already gone."""
    try:
        await client.request("DELETE", "/variables/{id}", path_params={"id": variable_id})
    except httpx.HTTPStatusError as exc:
        if exc.response.status_code == 404:
            return False
        raise
    return True


async def _patch(client: PrefectClient, variable_id: UUID, record: LeaseRecord) -> bool:
    """Overwrite row `variable_id` with `record`; False if the row is gone (taken over)."""
    try:
        await client.request(
            "PATCH",
            "/variables/{id}",
            path_params={"id": variable_id},
            json={"value": record.model_dump(mode="json")},
        )
    except httpx.HTTPStatusError as exc:
        if exc.response.status_code == 404:
            return False
        raise
    return True


async def aread_lease(name: str) -> LeaseView | None:
    """The lock `name` as stored, None when free."""
    async with busy_retry_client() as client:
        return await _read_view(client, name)


async def arelease_lease(name: str) -> LeaseView | None:
    """Remove the lock record `name`, whoever holds it (a human's release); returns what
    was removed, None when the lock was free. A live holder notices at its next renewal."""
    async with busy_retry_client() as client:
        while True:
            view = await _read_view(client, name)
            if view is None:
                return None
            if await _delete(client, view.variable_id):
                return view


# ---- holding it ------------------------------------------------------------------------

OnStale = Callable[[LeaseView, str], Awaitable[None]]


class Lease:
    """A held lease: renewed in the background until `release()`."""

    def __init__(
        self, name: str, variable_id: UUID, record: LeaseRecord, clock: LeaseClock = SYSTEM_CLOCK
    ) -> None:
        self.name = name
        self.variable_id = variable_id
        self.record = record
        self._clock = clock
        self.lost: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._release: asyncio.Task[None] | None = None

    async def check(self) -> None:
        """Raise `LeaseLostError` unless this process still holds the lease (one read)."""
        if self.lost is None:
            try:
                async with asyncio.timeout(CALL_TIMEOUT_S), busy_retry_client() as client:
                    view = await _read_view(client, self.name)
            except Exception as exc:
                if self._expired():
                    self.lost = f"could not confirm the lease before it expired ({exc!r})"
            else:
                if view is None or view.variable_id != self.variable_id:
                    self.lost = "the lock record was released or taken over"
        if self.lost is not None:
            raise LeaseLostError(f"lost the round lock {self.name}: {self.lost}")

    def _expired(self) -> bool:
        return self._clock.now() >= self.record.expires_at

    async def _renew_forever(self) -> None:
        interval = self.record.lease_s / RENEWALS_PER_LEASE
        wait = interval
        while self.lost is None:
            await self._clock.sleep(wait)
            now = self._clock.now()
            fresh = self.record.model_copy(
                update={
                    "renewed_at": now,
                    "expires_at": now + timedelta(seconds=self.record.lease_s),
                }
            )
            left = (self.record.expires_at - now).total_seconds()
            try:
                async with asyncio.timeout(max(0.5, min(left, CALL_TIMEOUT_S))):
                    async with busy_retry_client() as client:
                        renewed = await _patch(client, self.variable_id, fresh)
            except Exception as exc:
                if self._expired():
                    self.lost = f"could not renew it before it expired ({type(exc).__name__})"
                    log.error("%s: %s", self.name, self.lost)
                    return
                log.warning("renewing %s failed (%s); retrying", self.name, type(exc).__name__)
                wait = RETRY_S
                continue
            if not renewed:
                self.lost = "the lock record was released or taken over"
                log.error("%s: %s", self.name, self.lost)
                return
            self.record, wait = fresh, interval

    def start(self) -> None:
        self._task = asyncio.create_task(self._renew_forever(), name=f"renew {self.name}")

    async def release(self) -> None:
        """Stop renewing and delete our record (best effort: it expires by itself). A
        second call waits for the first one's delete and sends none of its own."""
        if self._release is None:
            self._release = asyncio.create_task(self._released(), name=f"release {self.name}")
        await asyncio.shield(self._release)

    async def _released(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with suppress(asyncio.CancelledError, Exception):
                await self._task
        if self.lost is not None:
            return
        try:
            async with asyncio.timeout(CALL_TIMEOUT_S), busy_retry_client() as client:
                await _delete(client, self.variable_id)
        except Exception as exc:
            log.warning(
                "could not release %s (%s); it expires at %s",
                self.name,
                type(exc).__name__,
                self.record.expires_at,
            )


async def aacquire_lease(
    name: str,
    *,
    lease_s: float,
    wait_s: float,
    purpose: str = "",
    flow_run_id: str | None = None,
    poll_s: float = 0.5,
    on_stale: OnStale | None = None,
    clock: LeaseClock = SYSTEM_CLOCK,
) -> Lease:
    """Acquire lock `name`, waiting up to `wait_s` for a live holder; `LeaseTimeoutError`
    names that holder. A stale record is removed (and reported to `on_stale`) at once."""
    if lease_s <= 0:
        raise ValueError(f"lease_s must be > 0, got {lease_s!r}")
    me = this_process()
    holder = uuid.uuid4().hex
    deadline = clock.monotonic() + wait_s
    async with busy_retry_client() as client:
        while True:
            now = clock.now()
            record = LeaseRecord.new(
                holder, me, purpose=purpose, flow_run_id=flow_run_id, lease_s=lease_s, now=now
            )
            variable_id = await _create(client, name, record)
            if variable_id is not None:
                lease = Lease(name, variable_id, record, clock)
                lease.start()
                return lease
            view = await _read_view(client, name)
            if view is None:
                continue  # released between our create and read: try again at once
            if await _remove_if_stale(client, view, me, clock.now(), on_stale):
                continue
            left = deadline - clock.monotonic()
            if left <= 0:
                raise LeaseTimeoutError(f"the lock {name} is held by {view.describe()}", view)
            await clock.sleep(min(poll_s, left))


async def _create(client: PrefectClient, name: str, record: LeaseRecord) -> UUID | None:
    """Create the Variable `name` holding `record`: its id, None when the name is taken."""
    try:
        variable = await client.create_variable(
            VariableCreate(name=name, value=record.model_dump(mode="json"), tags=["canary", "lock"])
        )
    except ObjectAlreadyExists:
        return None
    return variable.id


async def _remove_if_stale(
    client: PrefectClient,
    view: LeaseView,
    me: ProcessIdentity,
    now: datetime,
    on_stale: OnStale | None,
) -> bool:
    """Whether `view` was stale at `now`; if so its record is deleted, and the process whose
    delete succeeded (only one does) reports the stale holder to `on_stale`."""
    why = view.stale_reason(now, me)
    if why is None:
        return False
    if await _delete(client, view.variable_id):
        log.warning("took over %s from %s: %s", view.name, view.describe(), why)
        if on_stale is not None:
            try:
                await on_stale(view, why)
            except Exception as exc:  # reporting must not cost us the lock
                log.error("reporting the stale holder of %s failed: %s", view.name, exc)
    return True


@asynccontextmanager
async def held_lease(
    name: str,
    *,
    lease_s: float,
    wait_s: float,
    purpose: str = "",
    flow_run_id: str | None = None,
    poll_s: float = 0.5,
    on_stale: OnStale | None = None,
    clock: LeaseClock = SYSTEM_CLOCK,
) -> AsyncIterator[Lease]:
    """`async with held_lease(...) as lease:` holds lock `name` for the block, renewed in
    the background; call `await lease.check()` before acting on what the lock protects."""
    lease = await aacquire_lease(
        name,
        lease_s=lease_s,
        wait_s=wait_s,
        purpose=purpose,
        flow_run_id=flow_run_id,
        poll_s=poll_s,
        on_stale=on_stale,
        clock=clock,
    )
    try:
        yield lease
    finally:
        await lease.release()
