"""Where the router learns the quarantine's `provider.ignore` (SPEC R6, R14, Q7).

    IgnoreSource = Callable[[model, now], Awaitable[list[tag]]]

`CachedIgnoreSource` wraps any source so a request adds ~0 ms: it answers from the list it
holds per model and refreshes it off the request path (each fetch bounded by
`ignore_fetch_timeout_s`, one at a time per model). Run by the gateway (`start_loading`:
the lists of every workload's models fetched at start and every `ignore_ttl_s`, written to
`IgnoreFile` after each round that fetched one), or on its own (a list older than
`ignore_ttl_s` is returned at once while one background refresh runs). A runtime exclusion
reaches the router within about `ignore_ttl_s` plus one refresh.

When the source fails (unreachable, slow, erroring), the last list is kept: the one fetched
before, else the one the file kept from an earlier run (read at start, used only after a
fetch failed); a log line says so when the failing starts, the gauges of `status()` while
it lasts (`routing/metrics.py`). A model with no list at all has its requests wait up to
`ignore_wait_s` for the first fetch, then refused (`QuarantineNotLoadedError`, 503): the
router never routes with the built-in layer alone, nor without the quarantine. All settings
from `settings.routing`, taken whole. What is logged and kept names models, tags, times and
exception types only: no key, no exception text.

`quarantine_source()` is the production default: the three merged layers
(built-in file, runtime Prefect Variable, canary suspensions).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ground.settings import RoutingConfig
from routing.errors import QuarantineNotLoadedError
from routing.ignore_lists import (
    IgnoreFileError,
    KnownList,
    ListStatus,
    decode_lists,
    encode_lists,
    not_ready,
)

IgnoreSource = Callable[[str, datetime], Awaitable[list[str]]]

log = logging.getLogger(__name__)


class IgnoreFile:
    """The file that keeps the last provider.ignore lists (settings.resolved_ignore_file):
    written whole and atomically (a temporary file in the same directory, synced, renamed
    over), read at start."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> dict[str, KnownList]:
        """The kept lists ({} when there is no file); `IgnoreFileError` when it cannot be
        used, naming the file and what is wrong."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise IgnoreFileError(f"{self.path}: unreadable ({type(exc).__name__})") from None
        return decode_lists(raw, str(self.path))

    def write(self, lists: dict[str, KnownList]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".ignore-", suffix=".tmp", dir=self.path.parent)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(encode_lists(lists))
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise


@dataclass
class _Entry:
    known: KnownList
    checked: float  # monotonic: when the source was last asked (a refresh is due ttl after)


class CachedIgnoreSource:
    def __init__(
        self,
        source: IgnoreSource,
        config: RoutingConfig | None = None,
        *,
        store: IgnoreFile | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        """`config`: settings.routing (`ignore_ttl_s`, `ignore_fetch_timeout_s`,
        `ignore_wait_s`); `store`: where the last lists are kept (None: nowhere)."""
        config = config or RoutingConfig()
        self._source = source
        self._ttl_s = config.ignore_ttl_s
        self._fetch_timeout_s = config.ignore_fetch_timeout_s
        self._wait_s = config.ignore_wait_s
        self._store = store
        self._clock = clock
        self._wall = wall
        self._entries: dict[str, _Entry] = {}
        self._kept: dict[str, KnownList] = {}  # what the file held at start
        self._file_problem: str | None = None
        self._errors: dict[str, str] = {}  # model -> the failing source's exception type
        self._failures: dict[str, int] = {}
        self._inflight: dict[str, asyncio.Task[None]] = {}
        self._models: tuple[str, ...] = ()  # what `start_loading` keeps loaded
        self._loading = False

    @property
    def ttl_s(self) -> float:
        """How often a list is re-read (settings.routing.ignore_ttl_s)."""
        return self._ttl_s

    @property
    def fetch_timeout_s(self) -> float:
        """The bound on one fetch (settings.routing.ignore_fetch_timeout_s)."""
        return self._fetch_timeout_s

    # ---- fetching ---------------------------------------------------------------------------

    def _refresh(self, model: str) -> asyncio.Task[None]:
        """The model's fetch in flight, started when there is none."""
        task = self._inflight.get(model)
        if task is None or task.done():
            task = self._inflight[model] = asyncio.create_task(self._fetch(model))
        return task

    async def _fetch(self, model: str) -> None:
        now = self._wall()
        try:
            async with asyncio.timeout(self._fetch_timeout_s):
                tags = tuple(sorted(set(await self._source(model, now))))
        except Exception as exc:  # TimeoutError included: a hanging store must not stall requests
            self._failed(model, type(exc).__name__)
            return
        if model in self._errors:
            log.warning("ignore source answers again for %s", model)
            del self._errors[model]
        self._entries[model] = _Entry(KnownList(tags, now), self._clock())

    def _failed(self, model: str, error: str) -> None:
        """A failed fetch: keep the last list (the one fetched, else the file's), say so."""
        first = model not in self._errors
        self._errors[model] = error
        self._failures[model] = self._failures.get(model, 0) + 1
        entry, kept = self._entries.get(model), "keeping the last list"
        if entry is None and model in self._kept:
            entry = self._entries[model] = _Entry(self._kept[model], self._clock())
            kept = f"using the list kept in {self._store.path if self._store else 'memory'}"
        if entry is not None:
            entry.checked = self._clock()  # retried after ttl, not on every request
        if not first:
            return  # said when the failing started; the gauges say it lasts
        if entry is None:
            log.error(
                "ignore source failed for %s (%s); no list fetched or kept: its requests are"
                " refused (503 quarantine_not_loaded) until one is fetched",
                model, error,
            )  # fmt: skip
            return
        age = (self._wall() - entry.known.fetched_at).total_seconds()
        log.warning(
            "ignore source failed for %s (%s); %s (fetched %s, %.0f s ago), never the"
            " built-in layer alone",
            model, error, kept, entry.known.fetched_at.isoformat(timespec="seconds"), age,
        )  # fmt: skip

    # ---- the request path -------------------------------------------------------------------

    async def __call__(self, model: str, now: datetime | None = None) -> list[str]:
        entry = self._entries.get(model)
        if entry is None:
            entry = await self._first_list(model)
        elif not self._loading and self._clock() - entry.checked > self._ttl_s:
            self._refresh(model)  # stale-while-revalidate (the gateway's loader refreshes)
        return list(entry.known.tags)

    async def _first_list(self, model: str) -> _Entry:
        """Wait up to `ignore_wait_s` for the model's first list; else refuse the request."""
        task = self._refresh(model)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(task), self._wait_s)
        entry = self._entries.get(model)
        if entry is not None:
            return entry
        status = self._status(model)
        raise QuarantineNotLoadedError(
            f"provider.ignore of {model} is not loaded ({status.why_missing()}); no request is"
            " routed without the quarantine's exclusions",
            reason="quarantine_not_loaded",
        )

    # ---- the gateway's loader -----------------------------------------------------------------

    def read_kept(self) -> None:
        """Read the lists the file kept (used only for a model whose fetch fails); a file
        that cannot be used is logged and ignored, never partly used."""
        if self._store is None:
            return
        try:
            self._kept = self._store.read()
        except IgnoreFileError as exc:
            self._file_problem = str(exc)
            log.error("ignore-list file not used: %s", exc)

    def start_loading(self, models: Iterable[str]) -> asyncio.Task[None]:
        """The gateway's loader of `models`' lists, started (its task: cancel it to stop);
        from this call on `not_ready()` answers for them (so no request finds the gateway
        ready before the loader ran), the kept file already read."""
        self._models = tuple(sorted(set(models)))
        self._loading = True
        self.read_kept()
        return asyncio.create_task(self._keep_loaded())

    async def _keep_loaded(self) -> None:
        """Fetch every model's list now and every `ignore_ttl_s` after (forever), and keep
        the lists in the file after each round that fetched one."""
        written: dict[str, KnownList] = {}
        try:
            while True:
                await asyncio.gather(*(self._refresh(m) for m in self._models))
                written = await self._keep(written)
                await asyncio.sleep(self._ttl_s)
        finally:
            self._loading = False

    async def _keep(self, written: dict[str, KnownList]) -> dict[str, KnownList]:
        """Write the lists after a round that fetched one (with its time: a restart knows
        how old what it kept is); the file's other models (another gateway's) are kept."""
        fetched = {m: e.known for m, e in self._entries.items() if e.known.origin == "fetched"}
        if self._store is None or not fetched or fetched == written:
            return written
        try:
            await asyncio.to_thread(self._store.write, {**self._kept, **fetched})
        except OSError as exc:
            log.error("ignore-list file %s not written (%s)", self._store.path, type(exc).__name__)
            return written
        return fetched

    def _status(self, model: str) -> ListStatus:
        entry = self._entries.get(model)
        return ListStatus(
            model, entry.known if entry else None, model in self._errors,
            self._errors.get(model), self._failures.get(model, 0),
        )  # fmt: skip

    def status(self) -> list[ListStatus]:
        """Each model's standing: the loader's models and every model asked for."""
        models = sorted(set(self._models) | set(self._entries) | set(self._errors))
        return [self._status(m) for m in models]

    def not_ready(self) -> str | None:
        """Why the loader's models are not all routable yet (None: they are)."""
        return not_ready([self._status(m) for m in self._models], self._file_problem)

    def scrape(self) -> tuple[datetime, list[ListStatus]]:
        """Now (wall clock) and `status()`: what /metrics and /healthz show."""
        return self._wall(), self.status()

    async def aclose(self) -> None:
        for task in self._inflight.values():
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
