"""Hedged requests (SPEC R5, optional): only for latency-critical, side-effect-free workloads.

start primary ──(hedge_after_s passes, still running)──► start backup (if one is offered)
first result that `won(result)` ──► return it; the other is cancelled (its cost is the
caller's to count: a cancelled attempt records itself as cancelled and billed)
neither wins ──► return the last result to finish
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any


async def hedged[T](
    primary: Coroutine[Any, Any, T],
    *,
    after_s: float,
    backup: Callable[[], Coroutine[Any, Any, T] | None],
    won: Callable[[T], bool],
) -> tuple[T, bool]:
    """Return (result, whether a backup was started)."""
    first = asyncio.ensure_future(primary)
    tasks: set[asyncio.Future[T]] = {first}
    try:
        done, _ = await asyncio.wait(tasks, timeout=after_s)
        if done:
            return first.result(), False
        second = backup()
        if second is None:
            return await first, False
        tasks.add(asyncio.ensure_future(second))
        last: T | None = None
        pending = set(tasks)
        while pending:
            finished, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in finished:
                last = task.result()
                if won(last):
                    return last, True
        assert last is not None
        return last, True
    finally:
        losers = [t for t in tasks if not t.done()]
        for t in losers:
            t.cancel()
        await asyncio.gather(*losers, return_exceptions=True)
