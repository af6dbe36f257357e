"""The R11 rates over the ledger for a time window, with pandas.

    from routing.report import router_report
    router_report(url, since=datetime(...), until=None)  -> dict of rates (+ per-route latency)

The same definitions as `RouterMetrics.snapshot()`, computed from the
`routing_requests` / `routing_attempts` tables instead of process counters,
so they survive restarts and cover every gateway replica writing the ledger.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pandas as pd
from sqlalchemy import create_engine, text


def _frame(engine: Any, table: str, since: datetime | None, until: datetime | None) -> pd.DataFrame:
    clauses, params = [], {}
    if since is not None:
        clauses.append("at >= :since")
        params["since"] = since.astimezone(UTC).replace(tzinfo=None).isoformat(sep=" ")
    if until is not None:
        clauses.append("at < :until")
        params["until"] = until.astimezone(UTC).replace(tzinfo=None).isoformat(sep=" ")
    where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
    with engine.connect() as conn:
        return pd.read_sql_query(text(f"SELECT * FROM {table}{where}"), conn, params=params)


def router_report(
    url: str, *, since: datetime | None = None, until: datetime | None = None
) -> dict[str, Any]:
    """Fallback rate, attempts per completed request, deadline exhaustion, validation rejection
    vs HTTP success, ambiguous outcomes, cost per accepted answer, latency by final route."""
    engine = create_engine(url)
    try:
        req = _frame(engine, "routing_requests", since, until)
        att = _frame(engine, "routing_attempts", since, until)
    finally:
        engine.dispose()
    n_req = len(req)
    accepted = req[req["outcome"] == "accepted"] if n_req else req
    http_ok = att[att["http_success"].astype(bool)] if len(att) else att
    rejected = (
        http_ok[~http_ok["validation"].isin(["accepted"]) & http_ok["validation"].notna()]
        if len(http_ok)
        else http_ok
    )

    def ratio(a: float, b: float) -> float:
        return float(a) / float(b) if b else 0.0

    latency = (
        accepted.groupby("final_route")["latency_ms"].quantile(0.5).round(1).to_dict()
        if len(accepted)
        else {}
    )
    return {
        "requests": n_req,
        "accepted": len(accepted),
        "fallback_rate": ratio((req["fallbacks"] > 0).sum() if n_req else 0, n_req),
        "attempts_per_completed_request": ratio(len(att), len(accepted)),
        "deadline_exhaustion_rate": ratio(
            (req["outcome"] == "deadline_exhausted").sum() if n_req else 0, n_req
        ),
        "http_success_rate": ratio(len(http_ok), len(att)),
        "validation_rejection_rate": ratio(len(rejected), len(http_ok)),
        "ambiguous": int((att["failure_class"] == "ambiguous_completion").sum()) if len(att) else 0,
        "cost_per_accepted_usd": ratio(att["cost_usd"].sum() if len(att) else 0.0, len(accepted)),
        "p50_latency_ms_by_final_route": latency,
    }
