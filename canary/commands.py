"""The canary's operator commands: round, status, ignore, exclude, lift,
triage, serve, server. Thin: parse and validate arguments, make sure a Prefect
API is reachable (the embedded local server by default), call a flow or a
quarantine function, print.

Exit codes: 0 whatever the providers did; 2 bad arguments or configuration;
1 our own runtime errors (Prefect API unreachable, unknown model, ...)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, NoReturn

import typer
from pydantic import ValidationError

from canary.settings import Settings, load_settings


class ModeChoice(StrEnum):
    observe = "observe"
    enforce = "enforce"


def fail(message: str, code: int = 1) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def settings_or_exit() -> Settings:
    try:
        return load_settings()
    except ValidationError as exc:
        problems = "; ".join(
            f"CANARY_{'_'.join(str(p) for p in e['loc']).upper()}: {e['msg']}" for e in exc.errors()
        )
        fail(f"bad configuration: {problems}", 2)


def parse_at(value: str | None, option: str = "--at") -> datetime | None:
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        fail(f"{option} must be an ISO-8601 time such as 2026-11-29T12:00:00Z, got {value!r}", 2)
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def run_with_api[T](settings: Settings, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine against a reachable Prefect API (starting the local server if needed),
    translating our own errors into exit codes."""
    from canary.prefect_local import PrefectUnavailable, use_api
    from probes.errors import DiscoveryError, InvalidModelIdError
    from quarantine.errors import QuarantineError

    try:
        with use_api(settings):
            return asyncio.run(make())
    except PrefectUnavailable as exc:
        fail(f"Prefect API unavailable: {exc}")
    except InvalidModelIdError as exc:
        fail(str(exc), 2)
    except (DiscoveryError, QuarantineError) as exc:
        fail(str(exc))
    except ValidationError as exc:  # bad values reaching a model (reason, tag, ...)
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg']}" for e in exc.errors()
        )
        fail(f"invalid input: {problems}", 2)
    except ValueError as exc:  # PlanError (unknown endpoint), empty reasons, ...
        fail(str(exc), 2)


ModelOpt = Annotated[str | None, typer.Option("--model", "-m", help="Model id, e.g. author/slug.")]


def _model(settings: Settings, model: str | None) -> str:
    return model or settings.models[0]


def register(app: typer.Typer) -> None:
    """Add the operator commands to the `canary` app."""

    @app.command("round")
    def round_cmd(
        model: ModelOpt = None,
        mode: Annotated[ModeChoice | None, typer.Option(help="Default: CANARY_MODE.")] = None,
        at: Annotated[
            str | None, typer.Option(help="Logical time (ISO-8601); default now.")
        ] = None,
        endpoint: Annotated[
            list[str] | None, typer.Option("--endpoint", "-e", help="Probe only these tags.")
        ] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    ) -> None:
        """Run one canary round now as a Prefect flow run and print the per-endpoint table."""
        settings = settings_or_exit()
        when = parse_at(at)
        target = _model(settings, model)

        async def go() -> Any:
            from canary.tables import quiet_task_logs
            from flows.canary_round import canary_round

            quiet_task_logs()
            state = await canary_round(
                model=target,
                mode=mode.value if mode else None,
                at=when,
                endpoints=endpoint,
                return_state=True,
            )
            if state.is_cancelled():
                return state.message or "cancelled"
            return await state.aresult(raise_on_failure=True)

        summary = run_with_api(settings, go)
        if isinstance(summary, str):
            typer.echo(summary)
            return
        if as_json:
            typer.echo(summary.model_dump_json(indent=2))
            return
        from canary.tables import print_round

        print_round(summary)

    @app.command("status")
    def status_cmd(
        model: ModelOpt = None,
        as_json: Annotated[bool, typer.Option("--json")] = False,
    ) -> None:
        """Per-endpoint quarantine state of a model: active, suspended or shadow-suspended."""
        settings = settings_or_exit()
        target = _model(settings, model)

        async def go() -> Any:
            from quarantine.admin import astatus

            return await astatus(target, datetime.now(UTC))

        status = run_with_api(settings, go)
        if as_json:
            typer.echo(json.dumps(status.to_json(), indent=2))
            return
        from canary.tables import print_status

        print_status(status.to_json())

    @app.command("ignore")
    def ignore_cmd(model: ModelOpt = None) -> None:
        """The merged provider.ignore for a model, as a JSON array of tags."""
        settings = settings_or_exit()
        target = _model(settings, model)

        async def go() -> list[str]:
            from quarantine.exclusions import aignore_list, ignore_tags

            return ignore_tags(await aignore_list(target, datetime.now(UTC)))

        typer.echo(json.dumps(run_with_api(settings, go)))

    exclude = typer.Typer(help="Runtime incident exclusions (effective immediately, no deploy).")
    app.add_typer(exclude, name="exclude")

    @exclude.command("add")
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
        settings = settings_or_exit()
        target = _model(settings, model)
        expiry = parse_at(until, "--until")

        async def go() -> Any:
            from flows.admin import add_exclusion

            return await add_exclusion(
                model=target, tag=tag, reason=reason, author=author, until=expiry, force=force
            )

        typer.echo(json.dumps(run_with_api(settings, go), default=str))

    @exclude.command("remove")
    def exclude_remove(
        tag: str,
        model: ModelOpt = None,
        author: Annotated[str, typer.Option(help="Who removes it.")] = "cli",
    ) -> None:
        """Remove a runtime incident exclusion."""
        settings = settings_or_exit()
        target = _model(settings, model)

        async def go() -> Any:
            from flows.admin import remove_exclusion

            return await remove_exclusion(model=target, tag=tag, author=author)

        typer.echo(json.dumps(run_with_api(settings, go), default=str))

    @app.command("lift")
    def lift_cmd(
        tag: str,
        reason: Annotated[str, typer.Option("--reason")],
        model: ModelOpt = None,
        author: Annotated[str, typer.Option(help="Who lifts it.")] = "cli",
    ) -> None:
        """Lift a canary suspension by hand (Q8)."""
        settings = settings_or_exit()
        target = _model(settings, model)

        async def go() -> Any:
            from flows.admin import lift_suspension

            return await lift_suspension(model=target, tag=tag, reason=reason, author=author)

        typer.echo(json.dumps(run_with_api(settings, go), default=str))

    @app.command("triage")
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
        """Re-probe one endpoint now with full transcripts (O5); state untouched unless --record."""
        settings = settings_or_exit()
        target = _model(settings, model)
        from probes.types import Contract

        known = {c.value for c in Contract}
        bad = [c for c in contract or [] if c not in known]
        if bad:
            fail(f"unknown contract(s) {bad}; choose from {sorted(known)}", 2)
        if record and contract and set(contract) != known:
            fail("--record needs every contract: partial evidence cannot clear a host", 2)
        if locale is not None and locale not in settings.locales:
            fail(f"unknown locale {locale!r}; choose from {settings.locales}", 2)

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
        from canary.tables import print_triage

        print_triage(result)

    @app.command("serve")
    def serve_cmd() -> None:
        """Serve the scheduled round deployments (every 30 min) and the triage/admin ones."""
        settings = settings_or_exit()
        from canary.prefect_local import PrefectUnavailable, use_api
        from deployments.local import serve_all

        try:
            with use_api(settings) as url:
                typer.echo(f"serving deployments against {url} (Ctrl-C stops)")
                serve_all(settings)
        except PrefectUnavailable as exc:
            fail(f"Prefect API unavailable: {exc}")

    @app.command("demo")
    def demo_cmd(
        keep_ui: Annotated[
            bool, typer.Option("--keep-ui", help="Leave the Prefect UI running afterwards.")
        ] = False,
        rounds_before_fix: Annotated[int, typer.Option(min=2, max=10)] = 3,
    ) -> None:
        """The main job on embedded defaults: local Prefect server, seed-incidents fleet,
        enforce-mode rounds, a recovery, the UI address."""
        from canary.demo import run_demo

        settings = settings_or_exit()
        raise typer.Exit(run_demo(settings, rounds_before_fix=rounds_before_fix, keep_ui=keep_ui))

    server = typer.Typer(help="The embedded local Prefect server (SQLite under CANARY_HOME).")
    app.add_typer(server, name="server")

    @server.command("start")
    def server_start() -> None:
        """Start the local Prefect server (or report the running one)."""
        from canary.prefect_local import PrefectUnavailable, start_local_server

        settings = settings_or_exit()
        try:
            srv = start_local_server(settings)
        except PrefectUnavailable as exc:
            fail(str(exc))
        verb = "started" if srv.started_here else "already running"
        typer.echo(f"Prefect server {verb}: UI {srv.ui_url}  API {srv.api_url}")
        typer.echo(f"use it from other shells: export PREFECT_API_URL={srv.api_url}")

    @server.command("stop")
    def server_stop() -> None:
        """Stop the local Prefect server started by `canary server start` or a command."""
        from canary.prefect_local import stop_local_server

        stopped = stop_local_server(settings_or_exit())
        typer.echo("stopped" if stopped else "no local server was started by canary")
