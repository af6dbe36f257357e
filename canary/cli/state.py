"""`canary status`, `canary ignore` and `canary lift`: the quarantine's state, by hand."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from canary.cli.common import ModelOpt, model_or_default, run_with_api, settings_or_exit
from canary.cli.errors import cli_errors
from ground.clock import utc_now

app = typer.Typer()


@app.command("status")
@cli_errors
def status_cmd(
    model: ModelOpt = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Where each endpoint of a model stands: suspended, shadow-suspended, excluded or active,
    until when, its ladder rung, streaks and last round, and why it is out of traffic; then
    the gateways' local ejections in force (from the ledger)."""
    from canary.cli.preflight import check_model_id

    settings = settings_or_exit()
    target = model_or_default(settings, model)
    check_model_id(target)

    async def go() -> Any:
        from quarantine.adapters.admin import astatus

        return await astatus(target, utc_now())

    status = run_with_api(settings, go)
    gateway, unread = gateway_ejections(settings.resolved_ledger_url, target)
    if as_json:
        typer.echo(json.dumps({**status.to_json(), "gateway_ejections": gateway}, indent=2))
        return
    from canary.cli.tables import print_status

    print_status(status.to_json())
    print_gateway(gateway)
    for warning in [*status.warnings, *unread]:
        typer.echo(f"warning: {warning}", err=True)


def gateway_ejections(url: str, model: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The gateway's local ejections of `model` in force now (SPEC O8), as the gateways
    recorded them in the ledger they write; and a warning when it cannot be read."""
    from routing.passive_ledger import active_ejections

    try:
        rows = active_ejections(url, model, utc_now())
    except Exception as exc:  # the quarantine's own status stands without it
        return [], [f"gateway ejections unreadable from the ledger ({type(exc).__name__})"]
    return [
        {"tag": r.tag, "provider": r.provider, "reason": r.reason, "times": r.times,
         "since": r.at.isoformat(), "until": r.until.isoformat() if r.until else None,
         "evidence": r.evidence, "gateway": r.gateway}
        for r in rows
    ], []  # fmt: skip


def print_gateway(rows: list[dict[str, Any]]) -> None:
    """Each ejection in two lines of at most 80 columns."""
    if not rows:
        return
    typer.echo("")
    typer.echo("ejected by a gateway (production evidence; that gateway's memory only):")
    for r in rows:
        until = (r["until"] or "")[11:19]
        typer.echo(f"  {r['tag'] or r['provider']}  until {until}Z  {r['reason']}"
                   f" (#{r['times']})  {r['gateway'][:24]}")  # fmt: skip
        typer.echo(f"    {r['evidence'][:74]}")


@app.command("ignore")
@cli_errors
def ignore_cmd(model: ModelOpt = None) -> None:
    """The merged provider.ignore for a model, as a JSON array of tags (exit 1 for a model
    the canary does not know; invalid runtime entries are skipped with a warning)."""
    from canary.cli.preflight import check_known_model, check_model_id

    settings = settings_or_exit()
    target = model_or_default(settings, model)
    check_model_id(target)

    async def go() -> tuple[list[str], list[str]]:
        from quarantine.adapters.ignore import aignore_report
        from quarantine.exclusions import ignore_tags

        await check_known_model(target, settings.models)
        report = await aignore_report(target, utc_now())
        return ignore_tags(report.entries), report.warnings

    tags, warnings = run_with_api(settings, go)
    typer.echo(json.dumps(tags))
    for warning in warnings:
        typer.echo(f"warning: {warning}", err=True)


@app.command("lift")
@cli_errors
def lift_cmd(
    tag: str,
    reason: Annotated[str, typer.Option("--reason")],
    model: ModelOpt = None,
    author: Annotated[str, typer.Option(help="Who lifts it.")] = "cli",
) -> None:
    """Lift a canary suspension by hand (the ladder rung is kept)."""
    from canary.cli.preflight import check_model_id, check_reason, check_suspended_tag

    settings = settings_or_exit()
    target = model_or_default(settings, model)
    check_model_id(target)
    check_reason(reason)

    async def go() -> Any:
        from flows.admin import lift_suspension

        await check_suspended_tag(target, tag, utc_now())
        return await lift_suspension(model=target, tag=tag, reason=reason, author=author)

    typer.echo(json.dumps(run_with_api(settings, go), default=str))
