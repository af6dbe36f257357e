"""The round lock as a lease record in a Prefect Variable (O2): one holder at a time,
renewed while held, taken over at once from a dead or expired holder (whose flow run is
marked Crashed), and lost (never silently kept) when a human releases it. Real Prefect
API (the test harness), real processes for the dead-holder case; time is a `TestClock`
the tests move (no test sleeps through a lease)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from collections.abc import Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import pytest
from prefect import flow, get_client
from prefect.client.schemas.actions import VariableCreate
from prefect.states import Running

from flows.roundlock import mark_crashed
from quarantine.adapters.lease import (
    LeaseClock,
    LeaseLostError,
    LeaseRecord,
    LeaseTimeoutError,
    LeaseView,
    aacquire_lease,
    aread_lease,
    arelease_lease,
    held_lease,
    this_process,
)

pytestmark = pytest.mark.usefixtures("prefect_api")
NOW = datetime.now(UTC)
SETTLE_S = 30.0  # bound on the real Prefect calls a woken task makes before it waits again
T = TypeVar("T")


class TestClock:
    """A `LeaseClock` that moves only when the test moves it.

    `advance(s)` wakes, in time order, every task sleeping on the clock whose wake-up falls
    within the next `s` seconds, and returns once each woken task sleeps on the clock again
    or has ended: its renewals and polls are real Prefect calls that take real time, so
    after `advance` everything due in that span has happened (and nothing else has)."""

    __test__ = False  # not a test class

    def __init__(self) -> None:
        self._start = datetime.now(UTC)
        self._elapsed_s = 0.0
        self._sleepers: dict[asyncio.Task[Any], tuple[float, asyncio.Future[None]]] = {}
        self._slept = asyncio.Event()

    def now(self) -> datetime:
        return self._start + timedelta(seconds=self._elapsed_s)

    def monotonic(self) -> float:
        return self._elapsed_s

    async def sleep(self, seconds: float) -> None:
        task = asyncio.current_task()
        assert task is not None
        wake = asyncio.get_running_loop().create_future()
        self._sleepers[task] = (self._elapsed_s + max(0.0, seconds), wake)
        self._slept.set()
        try:
            await wake
        finally:
            self._sleepers.pop(task, None)

    def sleeping(self) -> int:
        """How many tasks wait on this clock."""
        return sum(not wake.done() for _, wake in self._sleepers.values())

    async def advance(self, seconds: float) -> None:
        await asyncio.sleep(0)  # a task created just now reaches its first wait first
        target = self._elapsed_s + seconds
        while due := [
            (at, task) for task, (at, wake) in self._sleepers.items()
            if not wake.done() and at <= target
        ]:  # fmt: skip
            self._elapsed_s = max(self._elapsed_s, min(at for at, _ in due))
            woken = [task for at, task in due if at <= self._elapsed_s]
            for task in woken:
                self._sleepers[task][1].set_result(None)
            for task in woken:
                await self.settled(task)
        self._elapsed_s = target

    async def started(self, coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """`coro` as a task, returned once it waits on this clock (or has ended)."""
        task = asyncio.create_task(coro)
        await self.settled(task)
        return task

    async def settled(self, task: asyncio.Task[Any]) -> None:
        """Wait (on the clock's own signal, never a fixed time) until `task` sleeps on the
        clock or has ended."""
        async with asyncio.timeout(SETTLE_S):
            while not task.done() and not self._asleep(task):
                self._slept.clear()
                signal = asyncio.ensure_future(self._slept.wait())
                try:
                    await asyncio.wait({task, signal}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    signal.cancel()

    def _asleep(self, task: asyncio.Task[Any]) -> bool:
        entry = self._sleepers.get(task)
        return entry is not None and not entry[1].done()


def _clock() -> LeaseClock:
    return TestClock()  # typed as the protocol: proves the test clock is a LeaseClock


def _name() -> str:
    return f"canary-lock-test-{uuid.uuid4().hex[:10]}"


async def _plant(name: str, **fields: Any) -> None:
    """A lease record written by someone else (another machine unless `machine` is given)."""
    now = datetime.now(UTC)
    base: dict[str, Any] = {
        "holder": "someone",
        "purpose": "canary round of x/y",
        "host": "elsewhere",
        "machine": "elsewhere|boot|pid:[1]",
        "pid": 4242,
        "acquired_at": now,
        "renewed_at": now,
        "expires_at": now + timedelta(minutes=5),
        "lease_s": 30.0,
    }
    record = LeaseRecord.model_validate({**base, **fields})
    async with get_client() as client:
        await client.create_variable(
            VariableCreate(name=name, value=record.model_dump(mode="json"))
        )


async def test_one_holder_at_a_time_and_release_frees_it() -> None:
    """A live holder keeps the lock (a second acquirer times out naming it); release frees it."""
    name, clock = _name(), TestClock()
    async with held_lease(name, lease_s=30, wait_s=5, purpose="first", clock=clock) as lease:
        view = await aread_lease(name)
        assert view is not None and view.record is not None
        assert view.record.holder == lease.record.holder
        assert view.stale_reason(clock.now()) is None
        second = await clock.started(
            aacquire_lease(name, lease_s=30, wait_s=0.6, poll_s=0.2, clock=clock)
        )
        await clock.advance(0.5)
        assert not second.done()  # still waiting for the live holder
        await clock.advance(0.2)
        with pytest.raises(LeaseTimeoutError, match="first") as info:
            await second
        assert info.value.view.record is not None
        await lease.check()
    assert await aread_lease(name) is None


async def test_an_early_release_frees_the_lock_and_the_blocks_end_touches_no_later_holder() -> None:
    """A round releases its lock as soon as its state is applied, inside the block: the lock
    is free at once, renewal stops, and the block's own release at its end (a second call)
    neither fails nor removes the record of whoever took the lock meanwhile."""
    name, clock = _name(), TestClock()
    async with held_lease(name, lease_s=2, wait_s=1, purpose="early", clock=clock) as lease:
        await lease.release()
        assert await aread_lease(name) is None
        later = await aacquire_lease(name, lease_s=30, wait_s=1, purpose="later", clock=clock)
        await clock.advance(1.0)  # past a renewal time of the released lease (2/3 s)
        assert clock.sleeping() == 1  # only the later holder's renewal waits: ours ended
        assert lease.lost is None  # and never ran again (it would have found its row gone)
    try:
        view = await aread_lease(name)
        assert view is not None and view.record is not None
        assert view.record.holder == later.record.holder
        assert view.record.renewed_at == later.record.renewed_at  # nobody wrote over it
        await later.check()
    finally:
        await later.release()
    assert await aread_lease(name) is None


async def test_renewal_keeps_a_short_lease_alive() -> None:
    """A 2 s lease is renewed every 2/3 s (not before): held for 3.5 s it is still ours,
    its record on the server moved on, and it is still exclusive."""
    name, clock = _name(), TestClock()
    async with held_lease(name, lease_s=2, wait_s=1, clock=clock) as lease:
        first = lease.record
        await clock.advance(0.6)
        assert lease.record == first  # not renewed before a third of the lease
        await clock.advance(0.1)
        assert lease.record.renewed_at == first.renewed_at + timedelta(seconds=2 / 3)
        await clock.advance(2.8)
        await lease.check()
        moved = lease.record.expires_at - first.expires_at  # five renewals in 3.5 s
        assert moved.total_seconds() == pytest.approx(5 * 2 / 3, abs=1e-5)
        stored = await aread_lease(name)
        assert stored is not None and stored.record == lease.record
        rival = await clock.started(
            aacquire_lease(name, lease_s=2, wait_s=0.3, poll_s=0.1, clock=clock)
        )
        await clock.advance(0.4)
        with pytest.raises(LeaseTimeoutError):
            await rival


async def test_expired_record_of_another_machine_is_taken_over_and_reported_once() -> None:
    """A record whose lease has expired is removed at once; only the taker reports it."""
    name, clock = _name(), _clock()
    await _plant(name, expires_at=clock.now() - timedelta(seconds=1))
    reported: list[tuple[LeaseView, str]] = []

    async def report(view: LeaseView, why: str) -> None:
        reported.append((view, why))

    async with held_lease(name, lease_s=30, wait_s=0.5, on_stale=report, clock=clock) as lease:
        view = await aread_lease(name)
        assert view is not None and view.record is not None
        assert view.record.holder == lease.record.holder
    [(old, why)] = reported
    assert old.record is not None and old.record.holder == "someone"
    assert "lease expired" in why


async def test_live_record_of_another_machine_waits_for_its_expiry() -> None:
    """Another machine's live record is respected until its expiry, then taken over."""
    name, clock = _name(), TestClock()
    expiry = clock.now() + timedelta(seconds=2)
    await _plant(name, expires_at=expiry)
    impatient = await clock.started(
        aacquire_lease(name, lease_s=30, wait_s=0.5, poll_s=0.1, clock=clock)
    )
    await clock.advance(0.6)
    with pytest.raises(LeaseTimeoutError, match="elsewhere"):
        await impatient
    patient = await clock.started(
        aacquire_lease(name, lease_s=30, wait_s=10, poll_s=0.2, clock=clock)
    )
    await clock.advance(1.3)  # 1.9 s: the record still protects its holder
    assert not patient.done()
    await clock.advance(0.5)  # 2.4 s: expired at 2 s, taken over at a poll since
    assert patient.done()
    lease = await patient
    assert lease.record.acquired_at >= expiry
    await lease.release()


async def test_dead_process_on_this_machine_frees_the_lock_at_once() -> None:
    """A holder process that is gone (same machine and pid namespace) is stale at once,
    long before its lease ends; a live one is not."""
    me = this_process()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        from quarantine.adapters.lease import _pid_start

        start = _pid_start(child.pid)
        live = LeaseRecord(
            holder="child",
            machine=me.machine,
            host=me.host,
            pid=child.pid,
            pid_start=start,
            acquired_at=NOW,
            renewed_at=NOW,
            expires_at=datetime.now(UTC) + timedelta(minutes=5),
            lease_s=300,
        )
        assert live.stale_reason(datetime.now(UTC), me) is None
    finally:
        child.kill()
        child.wait()
    assert "is gone" in (live.stale_reason(datetime.now(UTC), me) or "")
    name = _name()
    await _plant(name, **live.model_dump(exclude={"acquired_at", "renewed_at"}))
    lease = await aacquire_lease(name, lease_s=30, wait_s=0.5)
    await lease.release()


async def test_a_human_release_makes_the_holder_lose_the_lease() -> None:
    """`canary lock release` removes the record: the holder's check fails and its renewal
    notices; it never writes over the next holder's record."""
    name, clock = _name(), TestClock()
    lease = await aacquire_lease(name, lease_s=2, wait_s=1, clock=clock)
    released = await arelease_lease(name)
    assert released is not None and released.variable_id == lease.variable_id
    successor = await aacquire_lease(name, lease_s=30, wait_s=1, clock=clock)
    assert lease.lost is None  # it notices at its next renewal, not before
    await clock.advance(1.0)  # the old holder renews (by its row id) and must find it gone
    assert lease.lost is not None and "released or taken over" in lease.lost
    view = await aread_lease(name)
    assert view is not None and view.record is not None
    assert view.record.holder == successor.record.holder
    assert view.record.expires_at == successor.record.expires_at  # untouched by the old one
    with pytest.raises(LeaseLostError, match="released or taken over"):
        await lease.check()
    await lease.release()
    await successor.release()
    assert await arelease_lease(name) is None


@flow(name="lease-test-dummy")
def _dummy() -> None:
    return None


async def test_the_flow_run_of_a_stale_holder_is_marked_crashed() -> None:
    """Taking over from a dead holder marks its still-Running flow run Crashed (once)."""
    async with get_client() as client:
        run = await client.create_flow_run(_dummy, state=Running())
    name = _name()
    await _plant(name, flow_run_id=str(run.id), expires_at=datetime.now(UTC) - timedelta(1))

    async def report(view: LeaseView, why: str) -> None:
        await mark_crashed(view, why)

    lease = await aacquire_lease(name, lease_s=30, wait_s=1, on_stale=report)
    await lease.release()
    async with get_client() as client:
        after = await client.read_flow_run(run.id)
    assert after.state is not None and after.state.type.value == "CRASHED"
    assert "lease expired" in (after.state.message or "")
    # a final run is left alone
    view = LeaseView(
        name,
        uuid.uuid4(),
        LeaseRecord.model_validate({**_record_json(), "flow_run_id": str(run.id)}),
    )
    assert await mark_crashed(view, "again") is None


def _record_json() -> dict[str, Any]:
    return {
        "holder": "h",
        "acquired_at": NOW.isoformat(),
        "renewed_at": NOW.isoformat(),
        "expires_at": NOW.isoformat(),
        "lease_s": 1.0,
    }


async def test_an_unreadable_record_is_reported_and_replaced() -> None:
    """A hand-edited lock Variable that is not a lease record does not lock the model."""
    name = _name()
    async with get_client() as client:
        await client.create_variable(VariableCreate(name=name, value={"oops": 1}))
    view = await aread_lease(name)
    assert view is not None and view.record is None and "holder" in (view.problem or "")
    lease = await aacquire_lease(name, lease_s=30, wait_s=1)
    await lease.release()


def test_lock_status_and_release_from_the_cli_are_audited() -> None:
    """`canary lock status` shows the holder; `canary lock release` frees it as an audited
    flow run (artifact), marking a stale holder's run Crashed; then status says free."""
    import json

    from prefect.artifacts import Artifact
    from typer.testing import CliRunner

    from canary.cli import app
    from ground.slugs import model_slug
    from quarantine.adapters.lease import lease_name

    model = f"test/lock-{uuid.uuid4().hex[:6]}"

    async def plant() -> str:
        async with get_client() as client:
            run = await client.create_flow_run(_dummy, state=Running())
        await _plant(
            lease_name(model),
            flow_run_id=str(run.id),
            expires_at=datetime.now(UTC) - timedelta(seconds=5),
        )
        return str(run.id)

    run_id = asyncio.run(plant())
    cli = CliRunner()
    status = cli.invoke(app, ["lock", "status", "--model", model])
    assert status.exit_code == 0, status.output
    lock = json.loads(status.output)["round_lock"]
    assert lock["state"] == "stale" and lock["flow_run_id"] == run_id and lock["pid"] == 4242

    released = cli.invoke(app, ["lock", "release", "--model", model, "--reason", "stuck"])
    assert released.exit_code == 0, released.output
    data = json.loads(released.output)
    assert data["released"]["holder"] == "someone" and data["crashed_run"] == run_id

    async def after() -> tuple[str, str | None]:
        async with get_client() as client:
            run = await client.read_flow_run(uuid.UUID(run_id))
        artifact = await Artifact.aget(f"canary-admin-{model_slug(model)}")
        assert run.state is not None
        return run.state.type.value, artifact.data if artifact else None  # type: ignore[return-value]

    state, markdown = asyncio.run(after())
    assert state == "CRASHED"
    assert markdown is not None and "released by cli (stuck)" in markdown
    status = cli.invoke(app, ["lock", "status", "--model", model])
    assert json.loads(status.output)["round_lock"]["state"] == "free"
    again = cli.invoke(app, ["lock", "release", "--model", model, "--reason", "stuck"])
    assert again.exit_code == 0 and "nothing to release" in again.output
