"""`canary clock reset`: repair a model whose stored last round is in the future."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from canary.cli.common import ModelOpt, model_or_default, run_with_api, settings_or_exit
from canary.cli.errors import cli_errors
from ground.clock import utc_now

app = typer.Typer(help="The model's logical clock.", no_args_is_help=True)


@app.command("reset")
@cli_errors
def clock_reset(
    reason: Annotated[str, typer.Option("--reason", help="Why (kept in the audit history).")],
    model: ModelOpt = None,
    author: Annotated[str, typer.Option(help="Who resets it.")] = "cli",
) -> None:
    """Bring back a model whose last applied round is in the future (a mistyped --at):
    rounds run again from now; suspensions that started in the future start now."""
    from canary.cli.preflight import check_model_id, check_reason

    settings = settings_or_exit()
    target = model_or_default(settings, model)
    check_model_id(target)
    check_reason(reason)

    async def go() -> Any:
        from flows.maintenance import reset_clock
        from quarantine.adapters.store import aload_state
        from quarantine.clock import reset_clock as dry_run

        now = utc_now()
        state = await aload_state(target, missing_ok=False)  # exit 1: unknown model
        dry_run(state, now=now, reason=reason, actor=author)  # exit 1: nothing to reset
        return await reset_clock(model=target, reason=reason, author=author, at=now)

    typer.echo(json.dumps(run_with_api(settings, go), default=str))
