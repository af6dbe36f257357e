"""`canary lock status|release`: a model's round lock, for a human."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from canary.cli.common import ModelOpt, model_or_default, run_with_api, settings_or_exit
from canary.cli.errors import cli_errors
from ground.clock import utc_now

app = typer.Typer(help="A model's round lock (one round per model at a time).")


async def _status(model: str) -> dict[str, Any]:
    from quarantine.adapters.lease import aread_lease, lease_name
    from quarantine.adapters.locking import active_slots
    from quarantine.adapters.store import state_lock_name

    now = utc_now()
    view = await aread_lease(lease_name(model))
    return {
        "model": model,
        "round_lock": view.to_json(now) if view else {"name": lease_name(model), "state": "free"},
        "state_lock": {
            "name": state_lock_name(model),
            "active_slots": await active_slots(state_lock_name(model)),
        },
    }


@app.command("status")
@cli_errors
def lock_status(model: ModelOpt = None) -> None:
    """Who holds the model's round lock (held / stale / free) and its state-write slots."""
    from canary.cli.preflight import check_model_id

    settings = settings_or_exit()
    target = model_or_default(settings, model)
    check_model_id(target)
    typer.echo(json.dumps(run_with_api(settings, lambda: _status(target)), indent=2))


@app.command("release")
@cli_errors
def lock_release(
    reason: Annotated[str, typer.Option("--reason", help="Why (kept in the audit history).")],
    model: ModelOpt = None,
    author: Annotated[str, typer.Option(help="Who releases it.")] = "cli",
) -> None:
    """Free the model's round lock whoever holds it (an audited flow run). A live round that
    loses it applies nothing; a dead one's run is marked Crashed."""
    from canary.cli.preflight import check_model_id, check_reason

    settings = settings_or_exit()
    target = model_or_default(settings, model)
    check_model_id(target)
    check_reason(reason)

    async def go() -> Any:
        from flows.maintenance import release_lock

        status = await _status(target)
        if status["round_lock"]["state"] == "free" and not status["state_lock"]["active_slots"]:
            return "nothing to release: the round lock of " + target + " is free"
        return await release_lock(model=target, reason=reason, author=author)

    result = run_with_api(settings, go)
    typer.echo(result if isinstance(result, str) else json.dumps(result, default=str))
