"""What the router records of each request and each attempt (SPEC R10), as plain data.

    AttemptRecord   one per model call: route, provider (and its endpoint tag when the
                    listing names one), failure class, status, latency, tokens, cost,
                    fallback reason, validation, circuit state, waits, the attempt's
                    budgets (R13) and the providers the request excluded by then
    RequestRecord   one per request: outcome, final route, attempts, fallbacks, totals, and
                    the prompt and the output only as SHA-256 hashes
    SuspectRecord   a provider found suspect from production traffic (O8) and whether it
                    was ejected, with the numbers against its peers

Both carry the gateway's request id (one per HTTP request, returned as `X-Request-Id`) and
the operation id (the client's idempotency key, or a new one).
    EventSink       where the router sends them (`emit`, O(1) on the request path) and how
                    the gateway has them written (`aflush`); `routing.events.EventLog` is the
                    ledger's

Cheap dataclasses built on the request path, so the router's pure parts (accounting,
metrics) import them without the ledger's SQL; `routing.events` maps them onto its tables.
Prompts, outputs and tool arguments appear only as hashes (`sha256_text`); the API key never
appears at all. A record is stamped with the wall-clock time it was made (`at`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol


def utcnow() -> datetime:
    return datetime.now(UTC)


def sha256_text(value: Any) -> str:
    """Hash of a prompt/output/arguments (canonical JSON for non-strings)."""
    if not isinstance(value, str):
        value = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(value.encode("utf-8")).hexdigest()


@dataclass(slots=True)
class AttemptRecord:
    operation_id: str
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
    request_id: str | None = None  # the gateway's id of the HTTP request (X-Request-Id)
    provider_tag: str | None = None  # the endpoint tag of `provider`, when the listing has one
    budget_ms: float | None = None  # the attempt's total budget (R13)
    ttft_budget_ms: float | None = None  # its first-token budget (None: no cut before the total)
    kept_ms: float | None = None  # kept for one fallback when it started
    excluded: str | None = None  # providers this request excluded by then (tags, comma-joined)
    # what the attempt says of its provider as production evidence (routing/passive.py): "ok",
    # a failure reason, or None (no evidence: transport, a client's error or shaping, ...)
    passive: str | None = None
    malformed_events: int = 0  # `data:` events not a JSON object, skipped (R15)
    at: datetime = field(default_factory=utcnow)


@dataclass(slots=True)
class RequestRecord:
    operation_id: str
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
    request_id: str | None = None  # the gateway's id of the HTTP request (X-Request-Id)
    at: datetime = field(default_factory=utcnow)


@dataclass(slots=True)
class SuspectRecord:
    """A provider the gateway found suspect from production traffic (SPEC O8), and what it
    did: `ejected` (until `until`), `observed` (ejection off), or held by the share ceiling,
    the capacity floor or a missing listing (routing/ejection.py)."""

    model: str
    provider: str  # as the replies name it
    reason: str  # routing.passive.Reason
    action: str  # "ejected" or routing.ejection.Held
    host_k: int
    host_n: int
    peers_k: int
    peers_n: int
    p_adjusted: float
    provider_tag: str | None = None  # its endpoint tags from the listing (comma-joined)
    times: int | None = None  # the n-th ejection on its ladder
    until: datetime | None = None  # when the ejection ends by itself
    evidence: str = ""  # in words: 14 of 120 replies rejected for a stray start, peers 0 of 900
    gateway: str = ""  # which gateway process (host:pid): the ejection is that process's
    at: datetime = field(default_factory=utcnow)


Record = AttemptRecord | RequestRecord | SuspectRecord


class EventSink(Protocol):
    """Where the router's records go: `emit` never blocks serving (an append); `aflush`
    writes what was emitted and returns how many records it wrote."""

    def emit(self, record: Record) -> None: ...

    async def aflush(self) -> int: ...
