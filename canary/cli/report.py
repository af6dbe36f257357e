"""`canary report`: the health report of a model as an HTML page with plots (offline)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from canary.cli.common import ModelOpt, model_or_default, settings_or_exit
from canary.cli.errors import cli_errors
from canary.cli.history import SinceOpt
from canary.cli.since import since_or_exit
from ground.clock import utc_now

app = typer.Typer()


@app.command("report")
@cli_errors
def report_cmd(
    model: ModelOpt = None,
    since: SinceOpt = "7d",
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", help="Directory for report.html and the PNGs; default under CANARY_HOME."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Write a self-contained HTML report with plots from the ledger: verdicts per round and
    endpoint, failure rate by contract, first-token times against the bar, suspensions over
    time, the observe-mode false-positive estimate, and the canary's own daily spend with
    today's forecast."""
    settings = settings_or_exit()
    target = model_or_default(settings, model)
    now = utc_now()
    start = since_or_exit(since, now)
    from flows.report import report_dir
    from reports.build import report_for

    out_dir = out or report_dir(settings, target)
    report, paths = report_for(
        settings.resolved_ledger_url,
        target,
        now=now,
        since=start,
        ttft_bar_s=settings.probe.ttft_threshold_s,
        clean_rounds=settings.policy.clean_rounds,
        out_dir=out_dir,
        cron=settings.round_cron,
        budget_usd=settings.budget.for_model(target),
    )
    summary = report.summary()
    if as_json:
        typer.echo(
            json.dumps({**summary, "files": {k: str(p) for k, p in paths.items()}}, indent=2)
        )
        return
    typer.echo(
        f"{target}: {summary['rounds']} rounds, {summary['endpoints']} endpoints, "
        f"{summary['failed_endpoint_rounds']} failed endpoint-rounds, "
        f"{summary['suspensions']} suspension(s), {summary['shadow_suspensions']} shadow"
    )
    bill = summary["bill"]
    if bill.get("forecast_usd") is not None:
        typer.echo(
            f"bill {bill['day']}: spent ${bill['spent_usd']:.4f} in {bill['rounds']} rounds, "
            f"forecast ${bill['forecast_usd']:.4f} for the day at {bill['rounds_per_day']} "
            f"rounds a day; ${summary['spent_usd']:.4f} in the window"
        )
    typer.echo(f"report: {paths['html']}")
    typer.echo("figures: " + ", ".join(str(p) for k, p in paths.items() if k != "html"))
