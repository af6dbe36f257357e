"""`canary round` and `canary triage`: probing now, as Prefect flow runs."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any

import typer

from canary.cli.common import (
    ModelOpt,
    model_or_default,
    parse_at,
    run_local,
    run_with_api,
    settings_or_exit,
)
from canary.cli.errors import BAD_INPUT, RUNTIME, cli_errors, exit_with_error
from ground.clock import utc_now

app = typer.Typer()


class ModeChoice(StrEnum):
    observe = "observe"
    enforce = "enforce"


@app.command("round")
@cli_errors
def round_cmd(
    model: ModelOpt = None,
    mode: Annotated[ModeChoice | None, typer.Option(help="Default: CANARY_MODE.")] = None,
    at: Annotated[str | None, typer.Option(help="Logical time (ISO-8601); default now.")] = None,
    endpoint: Annotated[
        list[str] | None, typer.Option("--endpoint", "-e", help="Probe only these tags.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    allow_future: Annotated[
        bool,
        typer.Option("--allow-future", help="Accept an --at more than one slot in the future."),
    ] = False,
) -> None:
    """Run one canary round now as a Prefect flow run and print the per-endpoint table.
    Exit 1 when the round could not judge the providers (a blind round) or failed."""
    from canary.cli import preflight

    settings = settings_or_exit()
    when = parse_at(at)
    target = model_or_default(settings, model)
    preflight.check_model_id(target)
    preflight.check_at(when, utc_now(), allow_future=allow_future)
    preflight.check_upstream_config(settings)
    listed = run_local(lambda: preflight.discover(settings, target))
    if listed is not None and endpoint:
        preflight.check_endpoints(target, endpoint, listed)

    async def go() -> Any:
        from prefect.exceptions import FailedRun

        from canary.cli.tables import quiet_task_logs
        from flows.canary_round import canary_round

        quiet_task_logs()
        state = await canary_round(
            model=target,
            mode=mode.value if mode else None,
            at=when,
            endpoints=endpoint,
            allow_future=allow_future,
            return_state=True,
        )
        if state.is_cancelled():
            return state.message or "cancelled"
        try:
            return await state.aresult(raise_on_failure=True)
        except FailedRun:  # a Failed state the round chose (blind, clock, lock): one line
            return RoundFailed(state.message or "the round failed")

    summary = run_with_api(settings, go)
    if isinstance(summary, RoundFailed):
        exit_with_error(summary.message, RUNTIME)
    if isinstance(summary, str):
        typer.echo(summary)
        return
    if as_json:
        typer.echo(summary.model_dump_json(indent=2))
    else:
        from canary.cli.tables import print_round

        print_round(summary)
    for warning in summary.warnings:
        typer.echo(f"warning: {warning}", err=True)


@dataclass(frozen=True)
class RoundFailed:
    message: str


@app.command("triage")
@cli_errors
def triage_cmd(
    provider: Annotated[str, typer.Option("--provider", "-p", help="Endpoint tag.")],
    model: ModelOpt = None,
    contract: Annotated[
        list[str] | None, typer.Option("--contract", "-c", help="Contract(s); default all.")
    ] = None,
    locale: Annotated[str | None, typer.Option(help="Locale; default en.")] = None,
    repeats: Annotated[int, typer.Option(min=1, max=50)] = 1,
    record: Annotated[
        bool, typer.Option("--record", help="Feed the result to the quarantine policy.")
    ] = False,
) -> None:
    """Re-probe one endpoint now with full transcripts; state untouched unless --record."""
    settings = settings_or_exit()
    target = model_or_default(settings, model)
    from probes.types import Contract

    known = {c.value for c in Contract}
    bad = [c for c in contract or [] if c not in known]
    if bad:
        exit_with_error(f"unknown contract(s) {bad}; choose from {sorted(known)}", BAD_INPUT)
    if record and contract and set(contract) != known:
        exit_with_error("--record needs every contract: partial evidence cannot clear a host", 2)
    if locale is not None and locale not in settings.locales:
        exit_with_error(f"unknown locale {locale!r}; choose from {settings.locales}", BAD_INPUT)
    from canary.cli import preflight

    preflight.check_model_id(target)
    preflight.check_upstream_config(settings)
    listed = run_local(lambda: preflight.discover(settings, target))
    if listed is not None:
        preflight.check_endpoints(target, [provider], listed)

    async def go() -> Any:
        from flows.triage import triage

        return await triage(
            model=target,
            provider=provider,
            contracts=contract or None,
            locale=locale,
            repeats=repeats,
            record=record,
        )

    result = run_with_api(settings, go)
    from canary.cli.tables import print_triage

    print_triage(result)
