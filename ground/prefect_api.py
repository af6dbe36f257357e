"""A Prefect API client for short, latency-critical writes: a server answering 503 is asked
again within a fraction of a second (for up to 10 s), before Prefect's own client retry
(which waits 2 s, then 4 s, ...) ever sees the answer.

Why: a Prefect server on SQLite answers 503 when a write transaction that read first meets
another writer (`database is locked`; SQLite refuses to upgrade a read snapshot that went
stale). While a round's task runs are being recorded (seconds at 100 endpoints), most
increments of a concurrency limit, updates of a block document or a Variable and keyed
artifacts are such transactions, so without this each cost 2 s or more. The server changed nothing when it answered 503, so the request is safe to send again.

    async with busy_retry_client() as client:
        await client.update_block_document(...)

Everything else is Prefect's client as `get_client()` builds it (TLS settings, pool
limits, HTTP/2 setting, auth, CSRF, its own retries after ours).
"""

from __future__ import annotations

import asyncio
import random
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from functools import cache

import certifi
import httpx
from prefect.client.orchestration import PrefectClient, get_client
from prefect.settings import (
    PREFECT_API_ENABLE_HTTP2,
    PREFECT_API_SSL_CERT_FILE,
    PREFECT_API_TLS_INSECURE_SKIP_VERIFY,
    PREFECT_API_URL,
)

BUSY_BUDGET_S = 10.0  # how long one request is re-sent while the server answers 503
BUSY_WAIT_S = 0.05  # first wait, doubled per attempt up to BUSY_WAIT_MAX_S, full jitter
BUSY_WAIT_MAX_S = 0.5


def busy_wait_s(attempt: int) -> float:
    """Full jitter: random(0, min(BUSY_WAIT_MAX_S, BUSY_WAIT_S * 2**attempt))."""
    return random.uniform(0, min(BUSY_WAIT_MAX_S, BUSY_WAIT_S * 2**attempt))


class BusyRetryTransport(httpx.AsyncBaseTransport):
    """Sends a request again while the server answers 503, for up to `budget_s`; any other
    answer, or a 503 after the budget, goes up to the client unchanged."""

    def __init__(self, inner: httpx.AsyncBaseTransport, budget_s: float = BUSY_BUDGET_S) -> None:
        self.inner = inner
        self.budget_s = budget_s

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.budget_s
        attempt = 0
        while True:
            response = await self.inner.handle_async_request(request)
            if response.status_code != 503:
                return response
            wait = busy_wait_s(attempt)
            if loop.time() + wait > deadline:
                return response
            await response.aclose()
            await asyncio.sleep(wait)
            attempt += 1

    async def aclose(self) -> None:
        await self.inner.aclose()


@cache
def _tls(insecure: bool, cafile: str) -> ssl.SSLContext:
    """The TLS context `PrefectClient` builds from the same settings, built once (~40 ms)."""
    if insecure:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx
    return ssl.create_default_context(cafile=cafile)


_shared: ContextVar[PrefectClient | None] = ContextVar("busy_retry_client", default=None)


@asynccontextmanager
async def busy_retry_client() -> AsyncIterator[PrefectClient]:
    """A Prefect client whose transport re-sends on 503 (module docstring): the one shared
    by an enclosing `shared_busy_retry_client()`, else a new one for the block. Prefect's
    own client when no API URL is set (its ephemeral mode brings its own transport)."""
    shared = _shared.get()
    if shared is not None:
        yield shared
        return
    if not PREFECT_API_URL.value():
        async with get_client() as plain:
            yield plain
        return
    tls = _tls(
        bool(PREFECT_API_TLS_INSECURE_SKIP_VERIFY.value()),
        PREFECT_API_SSL_CERT_FILE.value() or certifi.where(),
    )
    inner = httpx.AsyncHTTPTransport(
        verify=tls,
        http2=bool(PREFECT_API_ENABLE_HTTP2.value()),
        retries=3,  # connection retries, as PrefectClient sets on its own pool
        limits=httpx.Limits(max_connections=16, max_keepalive_connections=8, keepalive_expiry=25),
    )
    settings = {"transport": BusyRetryTransport(inner), "verify": tls}
    async with get_client(httpx_settings=settings) as client:
        yield client


@asynccontextmanager
async def shared_busy_retry_client() -> AsyncIterator[PrefectClient]:
    """One busy-retry client for every `busy_retry_client()` in the block (and in the tasks
    it starts): one connection pool and one CSRF handshake instead of one per call."""
    async with busy_retry_client() as client:
        token = _shared.set(client)
        try:
            yield client
        finally:
            _shared.reset(token)
