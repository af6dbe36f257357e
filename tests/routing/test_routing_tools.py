"""Idempotent tool execution on real SQLite (SPEC R8)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from routing.errors import AmbiguousCompletionError
from routing.tools import ExecutionState, ToolFailedError, ToolStore, execution_key


@pytest.fixture
def store(tmp_path: Path) -> ToolStore:
    return ToolStore(f"sqlite:///{tmp_path / 'tools.db'}")


class Counter:
    def __init__(self, delay_s: float = 0.0, result: Any = None, fail: bool = False) -> None:
        self.calls = 0
        self.delay_s = delay_s
        self.result = result
        self.fail = fail

    async def __call__(self, args: dict[str, Any]) -> Any:
        self.calls += 1
        await asyncio.sleep(self.delay_s)
        if self.fail:
            raise RuntimeError("printer on fire")
        return (
            self.result
            if self.result is not None
            else {"ticket": f"T-{self.calls}", "title": args["title"]}
        )


def test_r8_execution_key_is_canonical() -> None:
    """Argument order and whitespace never change the key; values do (R8)."""
    a = execution_key("op-1", "create_ticket", {"title": "x", "priority": "high"})
    b = execution_key("op-1", "create_ticket", {"priority": "high", "title": "x"})
    c = execution_key("op-1", "create_ticket", {"priority": "low", "title": "x"})
    assert a == b != c
    assert a.startswith("op-1:create_ticket:") and len(a.rsplit(":", 1)[1]) == 64


async def test_r8_concurrent_duplicates_run_the_tool_once(store: ToolStore) -> None:
    """Ten concurrent duplicates of one operation run the side effect once and all get its result (R8)."""
    tool = Counter(delay_s=0.1)
    args = {"title": "printer on fire", "priority": "high"}
    results = await asyncio.gather(
        *(store.run("op-dup", "create_ticket", args, tool) for _ in range(10))
    )
    assert tool.calls == 1
    assert all(r == {"ticket": "T-1", "title": "printer on fire"} for r in results)
    row = await store.get(execution_key("op-dup", "create_ticket", args))
    assert row is not None and row.state == ExecutionState.COMPLETED


async def test_r8_completed_execution_returns_stored_result_across_stores(tmp_path: Path) -> None:
    """A completed execution is durable: a new store on the same database returns it without running (R8)."""
    url = f"sqlite:///{tmp_path / 't.db'}"
    tool = Counter()
    first = await ToolStore(url).run("op-2", "create_ticket", {"title": "a"}, tool)
    again = await ToolStore(url).run("op-2", "create_ticket", {"title": "a"}, tool)
    other = await ToolStore(url).run("op-3", "create_ticket", {"title": "a"}, tool)
    assert first == again and tool.calls == 2 and other["ticket"] == "T-2"


async def test_r8_failed_execution_is_stored_and_not_rerun(store: ToolStore) -> None:
    """A tool that reported failure is recorded failed; a duplicate gets the failure, not a second run (R8)."""
    tool = Counter(fail=True)
    for _ in range(2):
        with pytest.raises(ToolFailedError):
            await store.run("op-f", "create_ticket", {"title": "x"}, tool)
    assert tool.calls == 1


async def test_r8_ambiguous_timeout_is_unknown_and_policy_fail_never_replays(
    store: ToolStore,
) -> None:
    """A timeout is recorded unknown; policy fail raises explicitly now and on every duplicate (R8)."""
    tool = Counter(delay_s=1.0)
    args = {"title": "x"}
    for _ in range(2):
        with pytest.raises(AmbiguousCompletionError):
            await store.run("op-u", "create_ticket", args, tool, policy="fail", timeout_s=0.05)
    assert tool.calls == 1
    row = await store.get(execution_key("op-u", "create_ticket", args))
    assert row is not None and row.state == ExecutionState.UNKNOWN


async def test_r8_unknown_with_reconcile_and_with_explicit_replay(store: ToolStore) -> None:
    """Reconcile adopts the outcome found elsewhere; replay (explicitly allowed) runs once more (R8)."""
    slow = Counter(delay_s=1.0)

    async def found(args: dict[str, Any]) -> Any:
        return {"ticket": "T-found"}

    result = await store.run(
        "op-r",
        "create_ticket",
        {"title": "x"},
        slow,
        policy="reconcile",
        timeout_s=0.05,
        reconcile=found,
    )
    assert result == {"ticket": "T-found"} and slow.calls == 1
    assert await store.run("op-r", "create_ticket", {"title": "x"}, slow) == {"ticket": "T-found"}

    flaky = Counter(delay_s=0.2)
    first = asyncio.create_task(
        store.run("op-p", "create_ticket", {"title": "y"}, flaky, policy="replay", timeout_s=0.1)
    )
    with pytest.raises(AmbiguousCompletionError):  # timed out, replayed once, timed out again
        await first
    assert flaky.calls == 2
