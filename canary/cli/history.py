"""`canary history`: one endpoint's rounds and decisions from the ledger, with evidence."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from canary.cli.common import ModelOpt, model_or_default, settings_or_exit
from canary.cli.errors import cli_errors, exit_with_error
from canary.cli.since import since_or_exit
from ground.clock import utc_now

app = typer.Typer()

SinceOpt = Annotated[
    str, typer.Option("--since", help="How far back: 30m, 12h, 7d or 2w.", metavar="DURATION")
]


@app.command("history")
@cli_errors
def history_cmd(
    provider: Annotated[str, typer.Option("--provider", "-p", help="Endpoint tag.")],
    model: ModelOpt = None,
    since: SinceOpt = "7d",
    as_json: Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")] = False,
) -> None:
    """One endpoint's verdict in every round and every decision about it, with the numbers
    behind each failure (read from the ledger; no Prefect server needed)."""
    settings = settings_or_exit()
    target = model_or_default(settings, model)
    start = since_or_exit(since, utc_now())
    from reports.build import read_ledger
    from reports.frames import endpoint_history

    probes, decisions = read_ledger(settings.resolved_ledger_url, target, start)
    decisions = decisions[decisions["at"] >= start] if not decisions.empty else decisions
    history = endpoint_history(probes, decisions, provider)
    if history.empty:
        known = sorted(probes["tag"].unique()) if not probes.empty else []
        exit_with_error(
            f"no rounds or decisions of {provider!r} for model {target!r} since "
            f"{start:%Y-%m-%d %H:%M}Z in the ledger (endpoints recorded: "
            f"{', '.join(known) or 'none'})"
        )
    if as_json:
        records = history.assign(at=history["at"].map(lambda t: t.isoformat()))
        typer.echo(json.dumps(records.to_dict("records"), indent=2, default=str))
        return
    from canary.cli.tables import print_history

    print_history(target, provider, history)
