"""The R11 rates over the ledger for a time window, with pandas (`canary gateway report`).

    from routing.report import router_report
    router_report(url, since=datetime(...), until=None, config=settings.routing)
        -> dict of rates, latency by final route, and the masking warning

The same definitions as `RouterMetrics.snapshot()`, computed from the
`routing_requests` / `routing_attempts` tables instead of process counters,
so they survive restarts and cover every gateway replica writing the ledger. The warning
(`routing/masking.py`) compares the window's earlier half with its later half. Portable
SQLAlchemy Core: the embedded SQLite and PostgreSQL alike.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pandas as pd
from sqlalchemy import Table, select

from ground.clock import as_utc
from ground.db import open_engine
from ground.settings import RoutingConfig
from routing.events import AttemptEvent, RequestEvent
from routing.masking import Rates, masking_warning


def _frame(
    engine: Any, table: Table, since: datetime | None, until: datetime | None
) -> pd.DataFrame:
    query = select(table)
    if since is not None:
        query = query.where(table.c.at >= as_utc(since))
    if until is not None:
        query = query.where(table.c.at < as_utc(until))
    with engine.connect() as conn:
        return pd.read_sql(query, conn)


def _ratio(a: float, b: float) -> float:
    return float(a) / float(b) if b else 0.0


def _rates(att: pd.DataFrame) -> Rates:
    """Attempts, HTTP-successful ones, and those of them acceptance rejected."""
    if not len(att):
        return Rates()
    ok = att[att["http_success"].astype(bool)]
    rejected = ok[ok["validation"].notna() & (ok["validation"] != "accepted")]
    return Rates(len(att), len(ok), len(rejected))


def _latency(accepted: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Median and p95 latency (ms) and the requests, by final route."""
    if not len(accepted):
        return {}
    by = accepted.groupby("final_route")["latency_ms"]
    p50, p95, n = by.quantile(0.5), by.quantile(0.95), by.size()
    return {
        str(route): {
            "p50_ms": round(float(p50[route]), 1),
            "p95_ms": round(float(p95[route]), 1),
            "requests": int(n[route]),
        }
        for route in p50.index
    }


def _halves(att: pd.DataFrame, since: datetime | None, until: datetime) -> tuple[Rates, Rates]:
    """The window's earlier and later half (from its first attempt when `since` is None)."""
    if not len(att):
        return Rates(), Rates()
    at = pd.to_datetime(att["at"], utc=True)
    start = as_utc(since) if since is not None else at.min().to_pydatetime()
    middle = pd.Timestamp(start + (as_utc(until) - start) / 2)
    return _rates(att[at < middle]), _rates(att[at >= middle])


def router_report(
    url: str,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    config: RoutingConfig | None = None,
) -> dict[str, Any]:
    """Fallback rate, attempts per completed request, deadline exhaustion, validation rejection
    vs HTTP success, ambiguous outcomes, cost per accepted answer, latency by final route, and
    the masking warning (None when there is none)."""
    engine = open_engine(url)
    try:
        req = _frame(engine, RequestEvent.__table__, since, until)  # type: ignore[attr-defined]
        att = _frame(engine, AttemptEvent.__table__, since, until)  # type: ignore[attr-defined]
    finally:
        engine.dispose()
    n_req = len(req)
    accepted = req[req["outcome"] == "accepted"] if n_req else req
    rates = _rates(att)
    earlier, later = _halves(att, since, until or datetime.now(UTC))
    latency = _latency(accepted)
    return {
        "requests": n_req,
        "accepted": len(accepted),
        "fallback_rate": _ratio((req["fallbacks"] > 0).sum() if n_req else 0, n_req),
        "attempts_per_completed_request": _ratio(len(att), len(accepted)),
        "deadline_exhaustion_rate": _ratio(
            (req["outcome"] == "deadline_exhausted").sum() if n_req else 0, n_req
        ),
        "http_success_rate": rates.http_success,
        "validation_rejection_rate": rates.rejection,
        "ambiguous": int((att["failure_class"] == "ambiguous_completion").sum()) if len(att) else 0,
        "cost_per_accepted_usd": _ratio(att["cost_usd"].sum() if len(att) else 0.0, len(accepted)),
        "p50_latency_ms_by_final_route": {k: v["p50_ms"] for k, v in latency.items()},
        "latency_ms_by_final_route": latency,
        "halves": {
            "earlier": {
                "http_success_rate": earlier.http_success,
                "validation_rejection_rate": earlier.rejection,
                "attempts": earlier.attempts,
            },
            "later": {
                "http_success_rate": later.http_success,
                "validation_rejection_rate": later.rejection,
                "attempts": later.attempts,
            },
        },
        "warning": masking_warning(earlier, later, config or RoutingConfig()),
    }
