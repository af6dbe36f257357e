"""Which provider served me? (SPEC O7) A user reports "the model name and the approximate
time", or the request id the gateway returned (`X-Request-Id`, `request_id` in an error
body); this finds what served them, from the gateway's events and the canary's ledger.

    served_around(url, model, around, window) -> list[ServedBy]
        each provider that served attempts of `model` within `around` +- `window`: its
        requests, attempts, accepted answers, rejections by reason, median first token, and
        its canary standing then (the last round verdict and the last decision about its
        endpoint before `around`, `quarantine/adapters/ledger.py`'s tables), and the
        requests whose cut stream it continued (R15)
    request_trail(url, request_id) -> Trail | None
        one request (by request id; else by operation id, the latest request) and its
        attempts, oldest first, each with why it was made (`note`) and, for a mid-stream
        continuation, the attempt whose cut stream it continued (`continues`)

Portable SQLAlchemy Core on any ledger URL (the embedded SQLite, PostgreSQL on the scale
path); every time is aware UTC.
A provider is joined to its endpoint by the tag the listing gave the attempt
(`provider_tag`); without one, by a ledger tag whose base slug is the provider's name
(`DeepInfra` -> `deepinfra/...`) when exactly one is.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.engine import Engine

from ground.clock import as_utc
from ground.db import open_engine
from quarantine.adapters.ledger import LEDGER_METADATA, DecisionRow, ProbeRow
from routing.continuation import continued_cause
from routing.events import ROUTING_METADATA, AttemptEvent, RequestEvent, add_missing_columns

NO_PROVIDER = "(no reply)"  # attempts no reply named a provider for (refused, cut, slow)


@dataclass(frozen=True)
class Standing:
    """The canary's word on one endpoint before a time."""

    tag: str
    verdict: str | None = None
    verdict_at: datetime | None = None
    reasons: tuple[str, ...] = ()
    decision: str | None = None
    decision_at: datetime | None = None
    decision_reason: str | None = None
    until: datetime | None = None


@dataclass(frozen=True)
class ServedBy:
    provider: str
    tag: str | None
    requests: int
    attempts: int
    accepted: int
    rejected: dict[str, int] = field(default_factory=dict)  # reason -> attempts
    median_ttft_ms: float | None = None
    standing: Standing | None = None
    continued: int = 0  # requests whose cut stream it continued, accepted (R15)


@dataclass(frozen=True)
class Trail:
    request: dict[str, Any] | None  # the request's row (None: not recorded yet)
    attempts: list[dict[str, Any]]


def _continues(earlier: list[dict[str, Any]], cause: str) -> dict[str, Any] | None:
    """The attempt whose released stream a continuation took over: the latest earlier one
    that ended with `cause` (a refused continuation before it ended otherwise)."""
    for a in reversed(earlier):
        if a.get("reason") == cause:
            return {k: a.get(k) for k in ("attempt_index", "route_id", "model", "provider")}
    return None


def _note(attempt: dict[str, Any], cause: str | None, cut: dict[str, Any] | None) -> str | None:
    """Why the attempt was made, in words; None for a request's first choice."""
    if cause is None:
        why = attempt.get("fallback_reason")
        return f"fallback reason: {why}" if why else None
    verb = "continued" if attempt.get("failure_class") is None else "tried to continue"
    where = f" on {cut['model']} (#{cut['attempt_index']})" if cut is not None else ""
    return f"{verb} the answer after {cause}{where}"


def _explained(attempts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The attempts, each with `continues` (the attempt whose cut stream it continued, or
    None) and `note` (why it was made, in words)."""
    out = []
    for i, a in enumerate(attempts):
        cause = continued_cause(a.get("fallback_reason"))
        cut = _continues(attempts[:i], cause) if cause is not None else None
        out.append({**a, "continues": cut, "note": _note(a, cause, cut)})
    return out


def _open(url: str) -> Engine:
    engine = open_engine(url)
    ROUTING_METADATA.create_all(engine)
    add_missing_columns(engine, ROUTING_METADATA)
    LEDGER_METADATA.create_all(engine)
    return engine


def _by_provider(rows: list[Any]) -> dict[str, list[Any]]:
    groups: dict[str, list[Any]] = {}
    for row in rows:
        groups.setdefault(row.provider or NO_PROVIDER, []).append(row)
    return groups


def _summary(provider: str, rows: list[Any]) -> ServedBy:
    tags = Counter(r.provider_tag for r in rows if r.provider_tag)
    ttfts = [r.ttft_ms for r in rows if r.ttft_ms is not None]
    accepted = [r for r in rows if r.failure_class is None and not r.cancelled]
    rejected = Counter(r.reason or r.failure_class for r in rows if r.failure_class is not None)
    continued = {
        r.request_id or r.operation_id for r in accepted if continued_cause(r.fallback_reason)
    }
    return ServedBy(
        provider=provider,
        tag=tags.most_common(1)[0][0] if tags else None,
        requests=len({r.request_id or r.operation_id for r in rows}),
        attempts=len(rows),
        accepted=len(accepted),
        rejected=dict(sorted(rejected.items(), key=lambda kv: (-kv[1], kv[0]))),
        median_ttft_ms=round(statistics.median(ttfts), 1) if ttfts else None,
        continued=len(continued),
    )


def served_around(url: str, model: str, around: datetime, window: timedelta) -> list[ServedBy]:
    """The providers that served attempts of `model` within `around` +- `window`, most
    requests first, each with its canary standing before `around`."""
    engine = _open(url)
    a = AttemptEvent.__table__.c  # type: ignore[attr-defined]
    query = select(a).where(
        a.model == model, a.at >= as_utc(around - window), a.at <= as_utc(around + window)
    )
    try:
        with engine.connect() as conn:
            rows = list(conn.execute(query))
            out = [_summary(p, group) for p, group in _by_provider(rows).items()]
            out = [_with_standing(conn, model, s, around) for s in out]
    finally:
        engine.dispose()
    return sorted(out, key=lambda s: (-s.requests, s.provider))


def _ledger_tag(conn: Any, model: str, provider: str) -> str | None:
    """The ledger tag whose base slug is the provider's name, when exactly one is."""
    p = ProbeRow.__table__.c  # type: ignore[attr-defined]
    tags = {t for (t,) in conn.execute(select(p.tag).where(p.model == model).distinct())}
    base = provider.lower().replace(" ", "")
    mine = [t for t in tags if t.split("/", 1)[0].lower() == base]
    return mine[0] if len(mine) == 1 else None


def _with_standing(conn: Any, model: str, served: ServedBy, around: datetime) -> ServedBy:
    if served.provider == NO_PROVIDER:
        return served
    tag = served.tag or _ledger_tag(conn, model, served.provider)
    if tag is None:
        return served
    before = as_utc(around)
    p = ProbeRow.__table__.c  # type: ignore[attr-defined]
    d = DecisionRow.__table__.c  # type: ignore[attr-defined]
    probe = conn.execute(
        select(p.at, p.verdict, p.reasons).where(p.model == model, p.tag == tag, p.at <= before)
        .order_by(p.at.desc(), p.id.desc()).limit(1)
    ).first()  # fmt: skip
    decision = conn.execute(
        select(d.at, d.kind, d.reason, d.until).where(d.model == model, d.tag == tag, d.at <= before)
        .order_by(d.at.desc(), d.id.desc()).limit(1)
    ).first()  # fmt: skip
    standing = Standing(
        tag=tag,
        verdict=probe.verdict if probe else None,
        verdict_at=as_utc(probe.at) if probe else None,
        reasons=tuple(probe.reasons or ()) if probe else (),
        decision=decision.kind if decision else None,
        decision_at=as_utc(decision.at) if decision else None,
        decision_reason=decision.reason if decision else None,
        until=as_utc(decision.until) if decision and decision.until else None,
    )
    return ServedBy(**{**served.__dict__, "tag": tag, "standing": standing})


def request_trail(url: str, request_id: str) -> Trail | None:
    """One request and its attempts, by the gateway's request id, else by operation id (its
    latest request); None when nothing of it is recorded."""
    engine = _open(url)
    a = AttemptEvent.__table__.c  # type: ignore[attr-defined]
    r = RequestEvent.__table__.c  # type: ignore[attr-defined]
    try:
        with engine.connect() as conn:
            req = conn.execute(
                select(r).where(or_(r.request_id == request_id, r.operation_id == request_id))
                .order_by(r.at.desc(), r.id.desc()).limit(1)
            ).first()  # fmt: skip
            rid = req.request_id if req is not None else request_id
            attempts = list(
                conn.execute(select(a).where(a.request_id == rid).order_by(a.attempt_index, a.id))
            )
            if not attempts and req is None:
                attempts = list(conn.execute(
                    select(a).where(a.operation_id == request_id).order_by(a.at, a.attempt_index)
                ))  # fmt: skip
    finally:
        engine.dispose()
    if req is None and not attempts:
        return None
    return Trail(
        request=dict(req._mapping) if req is not None else None,
        attempts=_explained([dict(row._mapping) for row in attempts]),
    )
