"""The gateway's production evidence read back from the ledger (SPEC O8): what the next round
of a model shows beside its probes, and what `canary status` says of the gateway's ejections.

    production_figures(url, model, since, until) -> list[ProviderFigures]
        per provider of `model`: the replies the gateway judged as evidence in the window
        and how many failed, by reason (each attempt's `passive` verdict, so the same
        figures as the gateway's window: client-shaped requests and transport never count)
    suspects(url, model, since, until) -> list[SuspectRow]
        the suspect providers the gateway recorded in the window (ejected or held), oldest first
    active_ejections(url, model, now) -> list[SuspectRow]
        the ejections recorded as in force at `now` (the latest one per provider)

The ledger is the one the gateway already writes (`CANARY_LEDGER_URL`): every gateway
process writes its own records, so the figures cover them all, and the queries are portable
SQLAlchemy Core (the embedded SQLite, PostgreSQL on the scale path). An ejection lives in the
memory of the gateway process that decided it (`gateway`): a row says until when it was
decided, and a gateway restarted since has forgotten it earlier.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from ground.clock import as_utc
from ground.db import open_engine
from routing.events import ROUTING_METADATA, AttemptEvent, SuspectEvent, add_missing_columns
from routing.passive import OK


@dataclass(frozen=True)
class ProviderFigures:
    provider: str
    tag: str | None
    replies: int
    failures: dict[str, int] = field(default_factory=dict)  # reason -> replies


@dataclass(frozen=True)
class SuspectRow:
    at: datetime
    provider: str
    tag: str | None
    reason: str
    action: str
    evidence: str
    times: int | None
    until: datetime | None
    gateway: str


def _open(url: str) -> Engine:
    engine = open_engine(url)
    ROUTING_METADATA.create_all(engine)
    add_missing_columns(engine, ROUTING_METADATA)
    return engine


def _cols(table: Any) -> Any:
    return table.__table__.c


def production_figures(
    url: str, model: str, since: datetime, until: datetime
) -> list[ProviderFigures]:
    """Judged replies and failures by reason per provider of `model` in [since, until)."""
    a = _cols(AttemptEvent)
    query = (
        select(a.provider, a.provider_tag, a.passive, func.count())
        .where(a.model == model, a.at >= as_utc(since), a.at < as_utc(until))
        .where(a.passive.is_not(None), a.provider.is_not(None))
        .group_by(a.provider, a.provider_tag, a.passive)
    )
    engine = _open(url)
    try:
        with engine.connect() as conn:
            rows = list(conn.execute(query))
    finally:
        engine.dispose()
    replies: Counter[str] = Counter()
    tags: dict[str, Counter[str]] = {}
    failures: dict[str, Counter[str]] = {}
    for provider, tag, verdict, count in rows:
        replies[provider] += count
        tags.setdefault(provider, Counter())[tag or ""] += count
        if verdict != OK:
            failures.setdefault(provider, Counter())[verdict] += count
    return [
        ProviderFigures(
            provider=p,
            tag=next((t for t, _ in tags[p].most_common() if t), None),
            replies=n,
            failures=dict(sorted(failures.get(p, Counter()).items())),
        )
        for p, n in sorted(replies.items())
    ]


def _suspect_row(row: Any) -> SuspectRow:
    return SuspectRow(
        at=as_utc(row.at), provider=row.provider, tag=row.provider_tag, reason=row.reason,
        action=row.action, evidence=row.evidence, times=row.times,
        until=as_utc(row.until) if row.until is not None else None, gateway=row.gateway,
    )  # fmt: skip


def suspects(url: str, model: str, since: datetime, until: datetime) -> list[SuspectRow]:
    """The suspect providers of `model` the gateway recorded in [since, until), oldest first."""
    s = _cols(SuspectEvent)
    query = (
        select(s)
        .where(s.model == model, s.at >= as_utc(since), s.at < as_utc(until))
        .order_by(s.at, s.id)
    )
    engine = _open(url)
    try:
        with engine.connect() as conn:
            return [_suspect_row(r) for r in conn.execute(query)]
    finally:
        engine.dispose()


def active_ejections(url: str, model: str, now: datetime) -> list[SuspectRow]:
    """The latest ejection per provider (and gateway) of `model` still in force at `now`."""
    s = _cols(SuspectEvent)
    query = (
        select(s)
        .where(s.model == model, s.action == "ejected", s.at <= as_utc(now))
        .where(s.until > as_utc(now))
        .order_by(s.at, s.id)
    )
    engine = _open(url)
    try:
        with engine.connect() as conn:
            latest = {(r.provider, r.gateway): _suspect_row(r) for r in conn.execute(query)}
    finally:
        engine.dispose()
    return sorted(latest.values(), key=lambda r: (r.provider, r.gateway))
