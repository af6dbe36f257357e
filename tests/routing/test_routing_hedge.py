"""The hedging race on its own (SPEC R5): winner returned, loser cancelled, no hedge when fast."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from routing.hedge import hedged


async def _job(value: str, delay_s: float, log: list[str]) -> str:
    try:
        await asyncio.sleep(delay_s)
    except asyncio.CancelledError:
        log.append(f"cancelled:{value}")
        raise
    return value


async def test_r5_backup_wins_and_the_slow_primary_is_cancelled() -> None:
    """A slow primary is hedged after `after_s`; the backup's answer wins and the primary is cancelled (R5)."""
    log: list[str] = []
    result, hedged_ = await hedged(
        _job("primary", 5, log),
        after_s=0.02,
        backup=lambda: _job("backup", 0.01, log),
        won=lambda r: True,
    )
    assert (result, hedged_) == ("backup", True) and log == ["cancelled:primary"]


async def test_r5_fast_primary_is_never_hedged_and_a_missing_backup_waits() -> None:
    """A primary that finishes before `after_s` starts no backup; with no backup offered the primary is awaited (R5)."""
    log: list[str] = []
    started: list[int] = []

    def backup() -> Coroutine[Any, Any, str]:
        started.append(1)
        return _job("backup", 0, log)

    assert await hedged(
        _job("primary", 0, log), after_s=0.5, backup=backup, won=lambda r: True
    ) == ("primary", False)
    assert started == []
    assert await hedged(
        _job("primary", 0.05, log), after_s=0.01, backup=lambda: None, won=lambda r: True
    ) == ("primary", False)


async def test_r5_a_losing_first_result_waits_for_the_other() -> None:
    """A result that does not win (rejected) does not end the race: the other attempt's answer is used (R5)."""
    log: list[str] = []
    result, _ = await hedged(
        _job("bad", 0.03, log),
        after_s=0.01,
        backup=lambda: _job("good", 0.06, log),
        won=lambda r: r == "good",
    )
    assert result == "good" and log == []
