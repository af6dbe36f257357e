"""`canary ledger prune`: the ledger's retention by hand (O9).

A real prune is an audited flow run (`flows/retention.py`: an artifact, an event, a
`ledger_prunes` row); `--dry-run` only counts what would go, needs no Prefect API and
changes nothing. A window under a day is refused without `--force` (`30m` is minutes, not
months: it would leave half an hour of history).
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Annotated, Any

import typer

from canary.cli.common import run_with_api, settings_or_exit
from canary.cli.errors import BAD_INPUT, cli_errors, exit_with_error
from canary.cli.since import parse_duration
from ground.clock import utc_now

app = typer.Typer(help="The ledger (probe rows, decisions, gateway events).", no_args_is_help=True)

SHORTEST_WINDOW = timedelta(days=1)  # shorter only with --force


def _window(older_than: str | None, default_days: float, force: bool) -> timedelta:
    if older_than is None:
        return timedelta(days=default_days)
    try:
        window = parse_duration(older_than)
    except ValueError:
        exit_with_error(
            f"--older-than takes a duration such as 30d, 12h or 2w, got {older_than!r}", BAD_INPUT
        )
    if window <= timedelta(0):
        exit_with_error("--older-than must be more than 0", BAD_INPUT)
    if window < SHORTEST_WINDOW and not force:
        exit_with_error(
            f"--older-than {older_than} would keep less than a day of history "
            "(m is minutes); use --force if that is meant",
            BAD_INPUT,
        )
    return window


@app.command("prune")
@cli_errors
def ledger_prune(
    older_than: Annotated[
        str | None,
        typer.Option(
            "--older-than",
            help="Delete rows older than this (30d, 12h, 2w); default CANARY_LEDGER__RETENTION_DAYS.",
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Count what would be deleted; change nothing.")
    ] = False,
    reason: Annotated[str, typer.Option(help="Why (kept in the audit history).")] = "retention",
    author: Annotated[str, typer.Option(help="Who prunes.")] = "cli",
    force: Annotated[bool, typer.Option("--force", help="Allow a window under a day.")] = False,
) -> None:
    """Delete the ledger's rows older than the window, in every table (an audited flow run)."""
    from canary.cli.preflight import check_reason
    from quarantine.adapters.retention import cutoff_for, preview

    settings = settings_or_exit()
    window = _window(older_than, settings.ledger.retention_days, force)
    check_reason(reason)
    now = utc_now()
    if dry_run:
        typer.echo(
            json.dumps(preview(settings.resolved_ledger_url, cutoff_for(now, window)).to_json())
        )
        return

    async def go() -> Any:
        from flows.retention import prune_ledger

        return await prune_ledger(
            older_than_days=window / timedelta(days=1), author=author, reason=reason, at=now
        )

    typer.echo(json.dumps(run_with_api(settings, go), default=str))
