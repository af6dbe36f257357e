"""Where the router learns the quarantine's `provider.ignore` (SPEC R6, Q7).

    IgnoreSource = Callable[[model, now], Awaitable[list[tag]]]

`CachedIgnoreSource` wraps any source with a small TTL cache so a request
adds ~0 ms: a fresh entry is returned at once; a stale one is returned at
once too while one background refresh runs (stale-while-revalidate), so a
runtime exclusion reaches the router within about `ignore_ttl_s` plus one refresh.
A failing or slow source (each fetch is bounded by `ignore_fetch_timeout_s`; both
from `settings.routing`, taken whole) keeps the last known list; when there is none yet it falls back to the built-in layer
(`builtin_tags`), so exclusions never fail open because the quarantine store
blinked; the error is logged.

`quarantine_source()` is the production default: the three merged layers
(built-in file, runtime Prefect Variable, canary suspensions).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ground.settings import RoutingConfig

IgnoreSource = Callable[[str, datetime], Awaitable[list[str]]]

log = logging.getLogger(__name__)


@dataclass
class _Entry:
    tags: list[str]
    fetched_at: float


def builtin_tags(model: str, path: Path | str | None = None) -> list[str]:
    """The built-in layer's tags for `model` (quarantine/builtin_exclusions.yaml): the floor
    used when the merged source cannot be read. An unreadable file is logged, gives []."""
    from quarantine.builtin import load_builtin

    try:
        entries = load_builtin(path)
    except Exception as exc:
        log.error("built-in exclusions unreadable (%s): %s", type(exc).__name__, exc)
        return []
    return sorted({e.slug for e in entries if e.matches(model)})


class CachedIgnoreSource:
    def __init__(
        self,
        source: IgnoreSource,
        config: RoutingConfig | None = None,
        *,
        fallback: Callable[[str], list[str]] = builtin_tags,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        """`config`: settings.routing (`ignore_ttl_s`, `ignore_fetch_timeout_s`)."""
        config = config or RoutingConfig()
        self._source = source
        self._ttl_s = config.ignore_ttl_s
        self._fetch_timeout_s = config.ignore_fetch_timeout_s
        self._fallback = fallback
        self._clock = clock
        self._wall = wall
        self._entries: dict[str, _Entry] = {}
        self._refreshing: dict[str, asyncio.Task[None]] = {}

    @property
    def ttl_s(self) -> float:
        """How long a fetched list is fresh (settings.routing.ignore_ttl_s)."""
        return self._ttl_s

    @property
    def fetch_timeout_s(self) -> float:
        """The bound on one fetch (settings.routing.ignore_fetch_timeout_s)."""
        return self._fetch_timeout_s

    async def _fetch(self, model: str) -> None:
        try:
            async with asyncio.timeout(self._fetch_timeout_s):
                tags = sorted(set(await self._source(model, self._wall())))
        except Exception as exc:  # TimeoutError included: a hanging store must not stall requests
            known = model in self._entries
            log.warning(
                "ignore source failed for %s (%s); %s",
                model,
                type(exc).__name__,
                "keeping the last known list" if known else "using the built-in layer",
            )
            if not known:  # stale at once, so the next request refreshes in the background
                self._entries[model] = _Entry(self._fallback(model), self._clock() - self._ttl_s)
            return
        self._entries[model] = _Entry(tags, self._clock())

    async def __call__(self, model: str, now: datetime | None = None) -> list[str]:
        entry = self._entries.get(model)
        if entry is None:
            await self._fetch(model)
            return list(self._entries[model].tags)
        if self._clock() - entry.fetched_at > self._ttl_s:
            task = self._refreshing.get(model)
            if task is None or task.done():
                self._refreshing[model] = asyncio.create_task(self._fetch(model))
        return list(entry.tags)

    async def aclose(self) -> None:
        for task in self._refreshing.values():
            task.cancel()


def static_source(tags: dict[str, list[str]] | None = None) -> IgnoreSource:
    """A plain source: fixed tags per model (tests, or a router without a quarantine)."""
    table = dict(tags or {})

    async def source(model: str, now: datetime) -> list[str]:
        return list(table.get(model, []))

    return source


def quarantine_source() -> IgnoreSource:
    """The quarantine's merged exclusions: built-in file + runtime Variable + canary suspensions."""

    async def source(model: str, now: datetime) -> list[str]:
        from quarantine.adapters.ignore import aignore_list
        from quarantine.exclusions import ignore_tags

        return list(ignore_tags(await aignore_list(model, now)))

    return source
