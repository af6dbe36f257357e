"""`canary exclude add|remove|list`: runtime incident exclusions, effective immediately."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from canary.cli.common import (
    ModelOpt,
    model_or_default,
    parse_at,
    run_with_api,
    settings_or_exit,
)
from canary.cli.errors import cli_errors
from ground.clock import utc_now

app = typer.Typer(
    help="Runtime incident exclusions (effective immediately, no deploy).",
    no_args_is_help=True,
)


@app.command("add")
@cli_errors
def exclude_add(
    tag: Annotated[str, typer.Argument(help="Endpoint tag or base provider slug.")],
    reason: Annotated[str, typer.Option("--reason", help="Why (kept with the entry).")],
    model: ModelOpt = None,
    until: Annotated[str | None, typer.Option(help="Expiry (ISO-8601); default none.")] = None,
    author: Annotated[str, typer.Option(help="Who adds it.")] = "cli",
    force: Annotated[
        bool, typer.Option("--force", help="Accept a tag the canary has never seen.")
    ] = False,
) -> None:
    """Exclude an endpoint for a model now (an admin flow run records it)."""
    from canary.cli import preflight

    settings = settings_or_exit()
    target = model_or_default(settings, model)
    expiry = parse_at(until, "--until")
    preflight.check_model_id(target)
    preflight.check_reason(reason)
    preflight.check_until(expiry, utc_now())

    async def go() -> Any:
        from flows.admin import add_exclusion

        if not force:
            await preflight.check_known_tag(target, tag)
        return await add_exclusion(
            model=target, tag=tag, reason=reason, author=author, until=expiry, force=force
        )

    typer.echo(json.dumps(run_with_api(settings, go), default=str))


@app.command("remove")
@cli_errors
def exclude_remove(
    tag: str,
    model: ModelOpt = None,
    author: Annotated[str, typer.Option(help="Who removes it.")] = "cli",
) -> None:
    """Remove a runtime incident exclusion."""
    from canary.cli import preflight

    settings = settings_or_exit()
    target = model_or_default(settings, model)
    preflight.check_model_id(target)

    async def go() -> Any:
        from flows.admin import remove_exclusion

        await preflight.check_active_exclusion(target, tag, utc_now())

        return await remove_exclusion(model=target, tag=tag, author=author)

    typer.echo(json.dumps(run_with_api(settings, go), default=str))


@app.command("list")
@cli_errors
def exclude_list(
    model: ModelOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the entries as JSON.")] = False,
) -> None:
    """The built-in and runtime incident exclusions of a model, with reason, author and
    expiry (expired runtime entries are shown as such)."""
    settings = settings_or_exit()
    target = model_or_default(settings, model)

    async def go() -> list[dict[str, Any]]:
        from quarantine.adapters.incidents import aread_runtime_exclusions
        from quarantine.builtin import load_builtin

        now = utc_now()
        rows: list[dict[str, Any]] = [
            {"tag": b.slug, "layer": "builtin", "reason": b.reason, "by": "config",
             "added": b.added.isoformat(), "until": None, "active": True}
            for b in load_builtin() if b.matches(target)
        ]  # fmt: skip
        rows += [
            {"tag": r.tag, "layer": "incident", "reason": r.reason, "by": r.author,
             "added": r.added_at.isoformat(), "until": r.until.isoformat() if r.until else None,
             "active": r.active(now)}
            for r in await aread_runtime_exclusions(target)
        ]  # fmt: skip
        return rows

    rows = run_with_api(settings, go)
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    from canary.cli.tables import print_exclusions

    print_exclusions(target, rows)
