"""`canary server start|stop` (the embedded Prefect server) and `canary serve` (deployments)."""

from __future__ import annotations

import typer

from canary.cli.common import settings_or_exit
from canary.cli.errors import cli_errors

app = typer.Typer(
    help="The embedded local Prefect server (SQLite under CANARY_HOME).", no_args_is_help=True
)
serve_app = typer.Typer()


@app.command("start")
@cli_errors
def server_start() -> None:
    """Start the local Prefect server (or report the running one)."""
    from ground.prefect_server import start_local_server

    srv = start_local_server(settings_or_exit())
    verb = "started" if srv.started_here else "already running"
    typer.echo(f"Prefect server {verb}: UI {srv.ui_url}  API {srv.api_url}")
    typer.echo(f"use it from other shells: export PREFECT_API_URL={srv.api_url}")


@app.command("stop")
@cli_errors
def server_stop() -> None:
    """Stop the local Prefect server started by `canary server start`, a command or the demo."""
    from canary.demo import demo_home
    from ground.prefect_server import stop_local_server

    settings = settings_or_exit()
    stopped = stop_local_server(settings)
    demo = settings.model_copy(update={"home": demo_home(settings)})
    demo_stopped = settings.home != demo.home and stop_local_server(demo)
    if stopped or demo_stopped:
        typer.echo("stopped" + (" (the demo's server)" if demo_stopped and not stopped else ""))
    else:
        typer.echo("no local server was started by canary")


@serve_app.command("serve")
@cli_errors
def serve_cmd() -> None:
    """Serve the scheduled round deployments (every 30 min) and the triage/admin ones."""
    from deployments.local import serve_all
    from ground.prefect_server import use_api

    settings = settings_or_exit()
    with use_api(settings) as url:
        typer.echo(f"serving deployments against {url} (Ctrl-C stops)")
        serve_all(settings)
