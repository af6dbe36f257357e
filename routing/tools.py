"""Idempotent tool execution (SPEC R8): side effects are separate from generation retries.

    execution_key = operation_id + ":" + tool_name + ":" + sha256(canonical JSON arguments)

One row per key in `routing_tool_executions` (SQLModel; SQLite by default,
PostgreSQL by URL), with a state:

    pending ──► completed   (the stored result is returned to every later caller)
       │    └─► failed      (the tool itself reported failure; stored, not re-run)
       └──────► unknown     (timed out / cancelled: it may or may not have happened)

The claim is an INSERT on the primary key, so two concurrent duplicates can
never both run the tool: the loser waits for the winner's result. A pending
row older than `stale_after_s` (a crashed worker) counts as unknown. Unknown
is never assumed not to have happened: the workload's policy decides —
`fail` (explicit AmbiguousCompletionError), `reconcile` (ask a reconcile
function whether it happened and with what result), or `replay` (run again,
explicitly allowed).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal

from sqlalchemy import update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Field, Session

from ground.clock import as_utc
from ground.db import open_engine
from routing.errors import AmbiguousCompletionError, ExecutionPendingError, ToolFailedError
from routing.events import ROUTING_METADATA, _RoutingBase

Policy = Literal["fail", "reconcile", "replay"]
ToolFn = Callable[[dict[str, Any]], Awaitable[Any]]
ReconcileFn = Callable[[dict[str, Any]], Awaitable[Any | None]]  # None = it did not happen


class ExecutionState(StrEnum):
    PENDING = "pending"
    COMPLETED = "completed"
    FAILED = "failed"
    UNKNOWN = "unknown"


class ToolExecution(_RoutingBase, table=True):
    __tablename__ = "routing_tool_executions"

    execution_key: str = Field(primary_key=True)
    operation_id: str = Field(index=True)
    tool_name: str
    args_sha256: str
    state: str
    result_json: str | None = None
    error: str | None = None
    runs: int = 0
    created_at: datetime
    updated_at: datetime


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def execution_key(operation_id: str, tool_name: str, arguments: dict[str, Any]) -> str:
    digest = hashlib.sha256(canonical_json(arguments).encode("utf-8")).hexdigest()
    return f"{operation_id}:{tool_name}:{digest}"


def _now() -> datetime:
    return datetime.now(UTC)


class ToolStore:
    def __init__(self, url: str, *, stale_after_s: float = 300.0, poll_s: float = 0.02) -> None:
        self.engine: Engine = open_engine(url)
        ROUTING_METADATA.create_all(self.engine, tables=[ToolExecution.__table__])  # type: ignore[attr-defined]
        self.stale_after_s = stale_after_s
        self.poll_s = poll_s

    # ---- sync storage primitives (run on a worker thread) -----------------------------------

    def _claim(self, key: str, operation_id: str, tool: str, args: dict[str, Any]) -> bool:
        now = _now()
        row = ToolExecution(
            execution_key=key, operation_id=operation_id, tool_name=tool,
            args_sha256=key.rsplit(":", 1)[1], state=ExecutionState.PENDING, runs=1,
            created_at=now, updated_at=now,
        )  # fmt: skip
        with Session(self.engine) as s:
            s.add(row)
            try:
                s.commit()
            except IntegrityError:
                return False
        return True

    def _get(self, key: str) -> ToolExecution | None:
        with Session(self.engine) as s:
            row = s.get(ToolExecution, key)
            if row is not None:
                s.expunge(row)
            return row

    def _set(
        self, key: str, state: ExecutionState, *, result: Any = None, error: str | None = None
    ) -> None:
        with Session(self.engine) as s:
            row = s.get(ToolExecution, key)
            assert row is not None
            row.state = state
            row.result_json = canonical_json(result) if state is ExecutionState.COMPLETED else None
            row.error = error
            row.updated_at = _now()
            s.add(row)
            s.commit()

    def _reclaim(self, key: str, expected: str) -> bool:
        """Compare-and-set `expected` -> pending (only one caller wins a replay)."""
        with Session(self.engine) as s:
            stmt = (
                update(ToolExecution)
                .where(ToolExecution.execution_key == key)  # type: ignore[arg-type]
                .where(ToolExecution.state == expected)  # type: ignore[arg-type]
                .values(
                    state=ExecutionState.PENDING, updated_at=_now(), runs=ToolExecution.runs + 1
                )
            )
            result = s.exec(stmt)
            s.commit()
            return bool(result.rowcount == 1)

    # ---- the async API ---------------------------------------------------------------------

    async def get(self, key: str) -> ToolExecution | None:
        return await asyncio.to_thread(self._get, key)

    async def run(
        self,
        operation_id: str,
        tool_name: str,
        arguments: dict[str, Any],
        fn: ToolFn,
        *,
        policy: Policy = "fail",
        timeout_s: float | None = None,
        reconcile: ReconcileFn | None = None,
        wait_s: float = 10.0,
    ) -> Any:
        """Run `fn(arguments)` at most once per execution key; return its (stored) result."""
        if policy == "reconcile" and reconcile is None:
            raise ValueError("policy 'reconcile' needs a reconcile function")
        key = execution_key(operation_id, tool_name, arguments)
        loop = asyncio.get_running_loop()
        give_up = loop.time() + wait_s
        while True:
            if await asyncio.to_thread(self._claim, key, operation_id, tool_name, arguments):
                return await self._execute(
                    key, arguments, fn, policy=policy, timeout_s=timeout_s, reconcile=reconcile
                )
            row = await self.get(key)
            if row is None:
                continue
            if row.state == ExecutionState.COMPLETED:
                return json.loads(row.result_json or "null")
            if row.state == ExecutionState.FAILED:
                raise ToolFailedError(
                    f"{tool_name} failed earlier: {row.error}",
                    operation_id=operation_id,
                    reason="tool_failed",
                )
            age = (_now() - as_utc(row.updated_at)).total_seconds()
            if row.state == ExecutionState.UNKNOWN or age > self.stale_after_s:
                return await self._resolve_unknown(
                    key,
                    row.state,
                    arguments,
                    fn,
                    policy=policy,
                    timeout_s=timeout_s,
                    reconcile=reconcile,
                )
            if loop.time() > give_up:
                raise ExecutionPendingError(
                    f"{tool_name} is still running for operation {operation_id}",
                    operation_id=operation_id,
                    reason="pending",
                )
            await asyncio.sleep(self.poll_s)

    async def _execute(
        self,
        key: str,
        args: dict[str, Any],
        fn: ToolFn,
        *,
        policy: Policy,
        timeout_s: float | None,
        reconcile: ReconcileFn | None,
        replayed: bool = False,
    ) -> Any:
        try:
            async with asyncio.timeout(timeout_s):
                result = await fn(args)
        except (TimeoutError, asyncio.CancelledError) as exc:
            await asyncio.shield(
                asyncio.to_thread(self._set, key, ExecutionState.UNKNOWN, error=type(exc).__name__)
            )
            if isinstance(exc, asyncio.CancelledError):
                raise
            if replayed:
                raise AmbiguousCompletionError(
                    f"{key.split(':')[1]} timed out again after a replay", reason="unknown"
                ) from None
            return await self._resolve_unknown(
                key,
                ExecutionState.UNKNOWN,
                args,
                fn,
                policy=policy,
                timeout_s=timeout_s,
                reconcile=reconcile,
            )
        except Exception as exc:
            await asyncio.to_thread(
                self._set,
                key,
                ExecutionState.FAILED,
                error=f"{type(exc).__name__}: {str(exc)[:300]}",
            )
            raise ToolFailedError(
                f"{key.split(':')[1]} failed: {type(exc).__name__}", reason="tool_failed"
            ) from exc
        await asyncio.to_thread(self._set, key, ExecutionState.COMPLETED, result=result)
        return result

    async def _resolve_unknown(
        self,
        key: str,
        state: str,
        args: dict[str, Any],
        fn: ToolFn,
        *,
        policy: Policy,
        timeout_s: float | None,
        reconcile: ReconcileFn | None,
    ) -> Any:
        tool = key.split(":")[1]
        if policy == "fail":
            raise AmbiguousCompletionError(
                f"{tool} may or may not have run (state unknown); policy 'fail' forbids a replay",
                reason="unknown",
            )
        if policy == "reconcile":
            assert reconcile is not None
            found = await reconcile(args)
            if found is None:
                raise AmbiguousCompletionError(
                    f"{tool}: reconcile could not confirm the outcome", reason="unknown"
                )
            await asyncio.to_thread(self._set, key, ExecutionState.COMPLETED, result=found)
            return found
        if not await asyncio.to_thread(self._reclaim, key, state):
            raise ExecutionPendingError(
                f"{tool} is being replayed by another caller", reason="pending"
            )
        return await self._execute(
            key, args, fn, policy=policy, timeout_s=timeout_s, reconcile=reconcile, replayed=True
        )

    def close(self) -> None:
        self.engine.dispose()
