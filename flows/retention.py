"""The ledger's retention as a flow run (O9), audited like the admin actions (`flows/admin.py`):
the run itself, a markdown artifact (`canary-ledger-prune`) with what each table lost, a
`canary.ledger.pruned` event and a `ledger_prunes` row in the ledger (who, why, the
cutoff, the counts; `quarantine/adapters/retention.py`).

Scheduled: the daily `ledger-prune` deployment (05:30 UTC, before the reports) runs it with
no window given, so it prunes what is older than `CANARY_LEDGER__RETENTION_DAYS` (read by
the worker when the run starts). Rounds never prune: a round is the hot path, and one
prune a day for the whole ledger is the same bound as 48 per model. By hand:
`canary ledger prune --older-than 30d [--dry-run]`. No admin notification: a prune
changes no endpoint's standing (Q8 notifies those); the event is there for an automation.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import acreate_markdown_artifact
from prefect.events import emit_event
from prefect.runtime import flow_run

from ground.clock import as_utc
from ground.settings import load_settings
from quarantine.adapters.retention import PruneResult, cutoff_for, prune

ARTIFACT_KEY = "canary-ledger-prune"


def prune_markdown(result: PruneResult, days: float, author: str, reason: str) -> str:
    """The artifact: the window, who and why, and the rows each table lost (pure)."""
    lines = [
        f"# Ledger pruned: rows older than {days:g} days",
        "",
        f"Cutoff {result.cutoff:%Y-%m-%d %H:%M}Z, by {author}: {reason}. "
        f"{result.total} row(s) deleted.",
        "",
        "| table | rows deleted |",
        "|---|---|",
        *(f"| `{table}` | {n} |" for table, n in result.counts.items()),
    ]
    return "\n".join(lines) + "\n"


@flow(name="prune-ledger", flow_run_name="prune ledger ({author})")
async def prune_ledger(
    older_than_days: float | None = None,
    author: str = "schedule",
    reason: str = "retention",
    at: datetime | None = None,
) -> dict[str, Any]:
    """Delete the ledger's rows older than `older_than_days` (default: the retention
    setting) before `at` (default now), and record the prune."""
    settings = load_settings()
    days = settings.ledger.retention_days if older_than_days is None else older_than_days
    now = as_utc(at or datetime.now(UTC))
    cutoff = cutoff_for(now, timedelta(days=days))
    result = await asyncio.to_thread(
        prune,
        settings.resolved_ledger_url,
        cutoff,
        now=now,
        batch_rows=settings.ledger.prune_batch_rows,
        actor=author,
        reason=reason,
        flow_run_id=flow_run.id,
    )
    data = {**result.to_json(), "older_than_days": days, "by": author, "reason": reason}
    emit_event(
        event="canary.ledger.pruned",
        resource={"prefect.resource.id": "canary.ledger"},
        payload=data,
    )
    await acreate_markdown_artifact(
        key=ARTIFACT_KEY,
        markdown=prune_markdown(result, days, author, reason),
        description=f"Ledger pruned: {result.total} row(s) older than {days:g} days",
    )
    get_run_logger().info(
        "ledger pruned by %s (%s): %d row(s) older than %s", author, reason, result.total, cutoff
    )
    return data
