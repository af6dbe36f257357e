"""Request and attempt events (SPEC R10) in the ledger.

One `RequestEvent` per request and one `AttemptEvent` per model call, in the
tables `routing_requests` and `routing_attempts`, and one `SuspectEvent` per provider the
gateway found suspect from production traffic (O8), in `routing_suspects` (own SQLModel metadata, so
other folders' tables on the same URL are neither created nor touched).
Prompts, outputs and tool arguments appear only as SHA-256 hashes; the API
key never appears at all. Times (`at`) are aware UTC.

The router builds plain `AttemptRecord` / `RequestRecord` dataclasses
(`routing/records.py`, cheap on the request path); `EventLog` is the ledger's
`EventSink`: `emit()` is an O(1) append, and `aflush()` (run periodically by the
gateway, and at shutdown) writes the buffer with two Core bulk inserts in one
transaction on a worker thread. A failed periodic flush is logged and that batch
is dropped (serving never blocks on the ledger).

A ledger written by an earlier version lacks the newer (nullable) columns: opening it adds
them, and their indexes (`add_missing_columns`), on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import fields
from datetime import datetime

from sqlalchemy import MetaData, insert, inspect, text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import registry
from sqlmodel import Field, SQLModel

from ground.clock import as_utc
from ground.db import open_engine
from routing.records import AttemptRecord, Record, RequestRecord, SuspectRecord, utcnow

_FIELDS = {
    kind: tuple(f.name for f in fields(kind))
    for kind in (AttemptRecord, RequestRecord, SuspectRecord)
}


class _RoutingBase(SQLModel, registry=registry()):
    pass


ROUTING_METADATA = _RoutingBase.metadata


class AttemptEvent(_RoutingBase, table=True):
    __tablename__ = "routing_attempts"

    id: int | None = Field(default=None, primary_key=True)
    at: datetime = Field(default_factory=utcnow, index=True)
    operation_id: str = Field(index=True)
    attempt_id: str
    attempt_index: int
    workload: str
    route_id: str
    model: str
    provider: str | None = None  # who served it (the response's `provider`)
    failure_class: str | None = None  # None = accepted
    reason: str | None = None
    status_code: int | None = None
    http_success: bool = False  # the upstream said 200 (whatever acceptance then said)
    latency_ms: float = 0.0
    ttft_ms: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    fallback_reason: str | None = None  # why this attempt is not the first choice
    validation: str | None = None  # "accepted" | rejection reason | None (no response)
    circuit_state: str = "closed"
    hedged: bool = False
    cancelled: bool = False
    waited_s: float = 0.0  # backoff / Retry-After slept before this attempt
    request_id: str | None = Field(default=None, index=True)  # X-Request-Id
    provider_tag: str | None = None  # the endpoint tag of `provider`, when the listing has one
    budget_ms: float | None = None  # the attempt's total budget (R13)
    ttft_budget_ms: float | None = None  # its first-token budget (None: no cut before the total)
    kept_ms: float | None = None  # kept for one fallback when it started
    excluded: str | None = None  # providers this request excluded by then (tags, comma-joined)
    passive: str | None = None  # production evidence: "ok", a failure reason, None (none)
    malformed_events: int | None = None  # `data:` events not a JSON object, skipped (R15)


class RequestEvent(_RoutingBase, table=True):
    __tablename__ = "routing_requests"

    id: int | None = Field(default=None, primary_key=True)
    at: datetime = Field(default_factory=utcnow, index=True)
    operation_id: str = Field(index=True)
    workload: str
    contract_version: int
    outcome: str  # "accepted" or a failure class
    reason: str | None = None
    final_route: str | None = None
    final_provider: str | None = None
    attempts: int = 0
    fallbacks: int = 0
    latency_ms: float = 0.0
    cost_usd: float = 0.0  # every attempt, hedged losers included
    prompt_sha256: str = ""
    output_sha256: str | None = None
    stream: bool = False
    request_id: str | None = Field(default=None, index=True)  # X-Request-Id


class SuspectEvent(_RoutingBase, table=True):
    """A provider the gateway found suspect (O8) and what it did (records.SuspectRecord)."""

    __tablename__ = "routing_suspects"

    id: int | None = Field(default=None, primary_key=True)
    at: datetime = Field(default_factory=utcnow, index=True)
    model: str = Field(index=True)
    provider: str
    provider_tag: str | None = None
    reason: str
    action: str  # "ejected", "observed", "held_share", "kept_for_capacity", "held_unlisted"
    host_k: int
    host_n: int
    peers_k: int
    peers_n: int
    p_adjusted: float
    times: int | None = None
    until: datetime | None = None
    evidence: str = ""
    gateway: str = ""


def _row(record: Record) -> dict[str, object]:
    """A record as a row, its time in UTC (the column is timezone-aware). Its fields are
    plain values (strings, numbers, times), so a shallow copy is the row: `asdict` deep-copies
    every value and was most of the flush thread's time, which it takes from serving (GIL)."""
    row = {name: getattr(record, name) for name in _FIELDS[type(record)]}
    row["at"] = as_utc(record.at)
    if isinstance(record, SuspectRecord) and record.until is not None:
        row["until"] = as_utc(record.until)
    return row


def add_missing_columns(engine: Engine, metadata: MetaData) -> list[str]:
    """The columns of `metadata`'s tables an existing table lacks, added (every column added
    since a table's first version is nullable), then every index not there yet; returns
    `table.column` of each column added."""
    found = inspect(engine)
    added: list[str] = []
    with engine.begin() as conn:
        for table in metadata.sorted_tables:
            if not found.has_table(table.name):
                continue
            have = {c["name"] for c in found.get_columns(table.name)}
            for column in table.columns:
                if column.name in have:
                    continue
                kind = column.type.compile(dialect=engine.dialect)
                conn.execute(text(f"ALTER TABLE {table.name} ADD COLUMN {column.name} {kind}"))
                added.append(f"{table.name}.{column.name}")
    for table in metadata.sorted_tables:
        for index in table.indexes:
            index.create(engine, checkfirst=True)
    return added


class EventLog:
    """Buffered writer of routing events to a SQLAlchemy URL."""

    def __init__(self, url: str) -> None:
        self.engine: Engine = open_engine(url)
        ROUTING_METADATA.create_all(self.engine)
        add_missing_columns(self.engine, ROUTING_METADATA)
        self._buffer: list[Record] = []
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"EventLog({self.engine.url.render_as_string(hide_password=True)!r})"

    def emit(self, record: Record) -> None:
        """O(1) on the request path; the ORM row is built on the flush thread."""
        self._buffer.append(record)

    def flush(self) -> int:
        with self._lock:
            batch, self._buffer = self._buffer, []
            if not batch:
                return 0
            attempts = [_row(r) for r in batch if isinstance(r, AttemptRecord)]
            requests = [_row(r) for r in batch if isinstance(r, RequestRecord)]
            suspects = [_row(r) for r in batch if isinstance(r, SuspectRecord)]
            # Core bulk inserts: no ORM objects on the flush thread (it shares the GIL with serving)
            with self.engine.begin() as conn:
                if attempts:
                    conn.execute(insert(AttemptEvent), attempts)
                if requests:
                    conn.execute(insert(RequestEvent), requests)
                if suspects:
                    conn.execute(insert(SuspectEvent), suspects)
            return len(batch)

    async def aflush(self) -> int:
        return await asyncio.to_thread(self.flush)

    def close(self) -> None:
        self.flush()
        self.engine.dispose()
