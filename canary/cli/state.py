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
    until when, its ladder rung, streaks and last round, and why it is out of traffic."""
    from canary.cli.preflight import check_model_id

    settings = settings_or_exit()
    target = model_or_default(settings, model)
    check_model_id(target)

    async def go() -> Any:
        from quarantine.adapters.admin import astatus

        return await astatus(target, utc_now())

    status = run_with_api(settings, go)
    if as_json:
        typer.echo(json.dumps(status.to_json(), indent=2))
        return
    from canary.cli.tables import print_status

    print_status(status.to_json())
    for warning in status.warnings:
        typer.echo(f"warning: {warning}", err=True)


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
